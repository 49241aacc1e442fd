package secrets_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/spacefix/spacefix/internal/secrets"
)

const ctxAccess = "upstream-access:key_jira:7"

func mustBox(t *testing.T, lines ...string) *secrets.Box {
	t.Helper()
	path := filepath.Join(t.TempDir(), "secret.key")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := secrets.Load(path)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return b
}

func TestSealOpen(t *testing.T) {
	b := mustBox(t, "# a comment", "", secrets.NewKey())
	plain := []byte("gho_plainUpstreamToken123")
	sealed := b.Seal(plain, ctxAccess)
	if bytes.Contains(sealed, plain) {
		t.Fatal("the sealed value contains the plain token")
	}
	if got, want := len(sealed), 1+8+12+len(plain)+16; got != want {
		t.Errorf("sealed length %d, want %d (version, key id, nonce, ciphertext, tag)", got, want)
	}
	if sealed[0] != 1 {
		t.Errorf("version byte %d, want 1", sealed[0])
	}
	got, err := b.Open(sealed, ctxAccess)
	if err != nil || string(got) != string(plain) {
		t.Fatalf("Open = %q, %v; want the plain token", got, err)
	}
	if again := b.Seal(plain, ctxAccess); bytes.Equal(again, sealed) {
		t.Error("two seals of one value are equal: the nonce is not random")
	}
	if !b.Current(sealed) {
		t.Error("Current of a value the box just sealed = false")
	}
	empty := b.Seal(nil, ctxAccess)
	if got, err := b.Open(empty, ctxAccess); err != nil || len(got) != 0 {
		t.Errorf("Open of a sealed empty value = %q, %v", got, err)
	}
}

func TestOpenRefuses(t *testing.T) {
	b := mustBox(t, secrets.NewKey())
	sealed := b.Seal([]byte("refresh-token"), ctxAccess)
	for _, ctx := range []string{"upstream-access:key_jira:8", "upstream-refresh:key_jira:7", ""} {
		if _, err := b.Open(sealed, ctx); !errors.Is(err, secrets.ErrOpen) {
			t.Errorf("Open under context %q = %v, want ErrOpen", ctx, err)
		}
	}
	for i := range sealed {
		bad := bytes.Clone(sealed)
		bad[i] ^= 0x01
		if _, err := b.Open(bad, ctxAccess); !errors.Is(err, secrets.ErrOpen) {
			t.Errorf("Open with byte %d changed = %v, want ErrOpen", i, err)
		}
	}
	for _, bad := range [][]byte{nil, {}, {1}, sealed[:20], sealed[:len(sealed)-1]} {
		if _, err := b.Open(bad, ctxAccess); !errors.Is(err, secrets.ErrOpen) {
			t.Errorf("Open of %d bytes = %v, want ErrOpen", len(bad), err)
		}
	}
	other := mustBox(t, secrets.NewKey())
	if _, err := other.Open(sealed, ctxAccess); !errors.Is(err, secrets.ErrOpen) {
		t.Errorf("Open with another key = %v, want ErrOpen", err)
	}
	if other.Current(sealed) {
		t.Error("Current of a value sealed by another key = true")
	}
}

// TestRotation: a box with a new first key and the old one below opens
// values the old one sealed, says they are not current, and seals with the
// new key.
func TestRotation(t *testing.T) {
	oldKey, newKey := secrets.NewKey(), secrets.NewKey()
	before := mustBox(t, oldKey)
	sealed := before.Seal([]byte("tok-1"), ctxAccess)

	after := mustBox(t, "# rotated", newKey, oldKey)
	if after.Keys() != 2 {
		t.Errorf("Keys = %d, want 2", after.Keys())
	}
	got, err := after.Open(sealed, ctxAccess)
	if err != nil || string(got) != "tok-1" {
		t.Fatalf("Open of an old value after rotation = %q, %v", got, err)
	}
	if after.Current(sealed) {
		t.Error("Current of a value sealed with the old key = true, want false")
	}
	resealed := after.Seal(got, ctxAccess)
	if !after.Current(resealed) {
		t.Error("Current of a value sealed after rotation = false")
	}
	if _, err := before.Open(resealed, ctxAccess); !errors.Is(err, secrets.ErrOpen) {
		t.Errorf("the old box opened a value sealed with the new key: %v", err)
	}
	// The old line can go once every value is sealed again.
	newOnly := mustBox(t, newKey)
	if got, err := newOnly.Open(resealed, ctxAccess); err != nil || string(got) != "tok-1" {
		t.Errorf("Open with the new key alone = %q, %v", got, err)
	}
}

func TestNewKey(t *testing.T) {
	k := secrets.NewKey()
	raw, err := base64.StdEncoding.DecodeString(k)
	if err != nil || len(raw) != secrets.KeySize {
		t.Fatalf("NewKey = %q: %d bytes, %v; want the base64 of 32", k, len(raw), err)
	}
	if secrets.NewKey() == k {
		t.Error("two NewKey calls returned the same key")
	}
}

func TestLoadOrCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret.key")
	b, created, err := secrets.LoadOrCreate(path)
	if err != nil || !created {
		t.Fatalf("LoadOrCreate of a new file = %v, %v; want created", created, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
		t.Errorf("new key file mode %04o, want 0600", fi.Mode().Perm())
	}
	if w := secrets.PermissionWarning(path); w != "" {
		t.Errorf("PermissionWarning of a 0600 file = %q, want none", w)
	}
	sealed := b.Seal([]byte("tok"), ctxAccess)

	again, created, err := secrets.LoadOrCreate(path)
	if err != nil || created {
		t.Fatalf("LoadOrCreate of an existing file = %v, %v; want loaded", created, err)
	}
	if got, err := again.Open(sealed, ctxAccess); err != nil || string(got) != "tok" {
		t.Errorf("the reloaded box opens %q, %v; want the same key", got, err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("the directory holds %d files, want only the key file", len(entries))
	}
}

// TestLoadOrCreateAtOnce: processes that start at the same moment end up
// with one key file, which exactly one of them created.
func TestLoadOrCreateAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret.key")
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		boxes   []*secrets.Box
		creates int
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, created, err := secrets.LoadOrCreate(path)
			if err != nil {
				t.Errorf("LoadOrCreate: %v", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			boxes = append(boxes, b)
			if created {
				creates++
			}
		}()
	}
	wg.Wait()
	if creates != 1 {
		t.Errorf("%d callers created the file, want 1", creates)
	}
	for i, b := range boxes {
		if !b.Current(boxes[0].Seal([]byte("x"), "c")) {
			t.Errorf("box %d has another key than box 0", i)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	good := secrets.NewKey()
	short := base64.StdEncoding.EncodeToString([]byte("sixteen-bytes-ok"))
	for _, tc := range []struct {
		name, content, want, secret string
	}{
		{"notbase64", "# keys\n" + good + "\nhunter2-not-a-key!\n", "line 3: not a key in base64", "hunter2"},
		{"short", good + "\n" + short + "\n", "line 2: the key has 16 bytes, want 32", short},
		{"empty", "# nothing here\n\n", "holds no key", ""},
	} {
		path := filepath.Join(dir, tc.name+".key")
		if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := secrets.Load(path)
		if err == nil {
			t.Errorf("%s: Load succeeded", tc.name)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, path) || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: error %q, want it to name %s and say %q", tc.name, msg, path, tc.want)
		}
		if tc.secret != "" && strings.Contains(msg, tc.secret) {
			t.Errorf("%s: error %q shows the line's content", tc.name, msg)
		}
		if strings.Contains(msg, good) {
			t.Errorf("%s: error %q shows a key", tc.name, msg)
		}
		// LoadOrCreate reports the same and leaves a bad file as it is.
		if _, _, err := secrets.LoadOrCreate(path); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: LoadOrCreate = %v, want %q", tc.name, err, tc.want)
		}
		if b, _ := os.ReadFile(path); string(b) != tc.content {
			t.Errorf("%s: LoadOrCreate changed a bad file", tc.name)
		}
	}
	if _, err := secrets.Load(filepath.Join(dir, "missing.key")); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of a missing file = %v, want a not-exist error", err)
	}
}

func TestPermissionWarning(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix file modes")
	}
	path := filepath.Join(t.TempDir(), "secret.key")
	if err := os.WriteFile(path, []byte(secrets.NewKey()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if w := secrets.PermissionWarning(path); w != "" {
		t.Errorf("PermissionWarning(0600) = %q, want none", w)
	}
	for _, mode := range []os.FileMode{0o700, 0o400} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if w := secrets.PermissionWarning(path); w != "" {
			t.Errorf("PermissionWarning(%04o) = %q, want none: nobody else may read or change it", mode, w)
		}
	}
	const (
		read  = "anyone who reads it can decrypt the upstream tokens and signing keys in the store"
		write = "anyone who changes it can put in a key of their own, which the gateway then seals with and signs its requests to other gateways with"
	)
	for _, c := range []struct {
		mode      os.FileMode
		who, what string
	}{
		{0o640, "read", read},
		{0o604, "read", read},
		{0o644, "read", read},
		{0o620, "changed", write},
		{0o602, "changed", write},
		{0o660, "read and changed", read + ", and " + write},
		{0o606, "read and changed", read + ", and " + write},
	} {
		if err := os.Chmod(path, c.mode); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("the secret key file %s may be %s by others than its owner (mode %04o): %s; run: chmod 600 %s", path, c.who, c.mode, c.what, path)
		if w := secrets.PermissionWarning(path); w != want {
			t.Errorf("PermissionWarning(%04o) = %q\nwant %q", c.mode, w, want)
		}
	}
}

// A derived key is the same for the same key file line and label, one a
// key in the file's order, and tells nothing of the key itself or of
// another label's.
func TestDerive(t *testing.T) {
	k1, k2 := secrets.NewKey(), secrets.NewKey()
	a := mustBox(t, k1, k2).Derive("spacefix test v1")
	b := mustBox(t, k2, k1).Derive("spacefix test v1")
	other := mustBox(t, k1).Derive("spacefix other v1")
	raw, _ := base64.StdEncoding.DecodeString(k1)
	if len(a) != 2 || len(a[0]) != secrets.KeySize {
		t.Fatalf("Derive gave %d keys of %d bytes, want 2 of %d", len(a), len(a[0]), secrets.KeySize)
	}
	if !bytes.Equal(a[0], b[1]) || !bytes.Equal(a[1], b[0]) {
		t.Error("the same key and label derive different keys")
	}
	if bytes.Equal(a[0], a[1]) || bytes.Equal(a[0], other[0]) || bytes.Equal(a[0], raw) {
		t.Error("a derived key equals another key's, another label's or the key itself")
	}
}
