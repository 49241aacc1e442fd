package auth

import (
	"context"
	"encoding/hex"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlite"
)

func TestNewSecret(t *testing.T) {
	seen := map[string]bool{}
	for _, tt := range []struct{ kind, prefix string }{
		{store.KindAgent, "sfx_agent_"},
		{store.KindClient, "sfx_client_"},
		{"anything else", "sfx_client_"},
	} {
		for range 50 {
			secret, id := NewSecret(tt.kind)
			if !strings.HasPrefix(secret, tt.prefix) {
				t.Fatalf("NewSecret(%q) = %q, want the prefix %q", tt.kind, secret, tt.prefix)
			}
			// rand.Text is 26 base32 characters: 130 bits.
			if n := len(secret) - len(tt.prefix); n != 26 {
				t.Fatalf("NewSecret(%q) has %d random characters, want 26", tt.kind, n)
			}
			if !strings.HasPrefix(id, "key_") || len(id) != len("key_")+12 || id != strings.ToLower(id) {
				t.Fatalf("NewSecret(%q) id = %q, want key_ and 12 lowercase characters", tt.kind, id)
			}
			if seen[secret] || seen[id] {
				t.Fatalf("NewSecret repeated %q / %q", secret, id)
			}
			seen[secret], seen[id] = true, true
		}
	}
}

func TestHash(t *testing.T) {
	// SHA-256 of "abc" (FIPS 180-2, appendix B.1).
	const want = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	if got := hex.EncodeToString(Hash("abc")); got != want {
		t.Errorf("Hash(abc) = %s, want %s", got, want)
	}
}

func TestBearerToken(t *testing.T) {
	for _, tt := range []struct{ header, want string }{
		{"Bearer sfx_client_x", "sfx_client_x"},
		{"bearer sfx_client_x", "sfx_client_x"},
		{"BEARER  sfx_client_x ", "sfx_client_x"},
		{"  Bearer sfx_client_x", "sfx_client_x"},
		{"Basic dXNlcjpwYXNz", ""},
		{"Bearer", ""},
		{"sfx_client_x", ""},
		{"", ""},
	} {
		if got := BearerToken(tt.header); got != tt.want {
			t.Errorf("BearerToken(%q) = %q, want %q", tt.header, got, tt.want)
		}
	}
}

// countingStore counts the lookups that reach the store, and fails them
// while broken is set.
type countingStore struct {
	store.Store
	lookups atomic.Int64
	broken  atomic.Bool
}

var errStoreDown = errors.New("store down")

func (s *countingStore) KeyByHash(ctx context.Context, hash []byte) (store.Key, error) {
	s.lookups.Add(1)
	if s.broken.Load() {
		return store.Key{}, errStoreDown
	}
	return s.Store.KeyByHash(ctx, hash)
}

// newStore opens a SQLite store in a temporary directory with one project.
func newStore(t *testing.T) (*countingStore, int64) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "keys.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p, err := st.CreateProject(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	return &countingStore{Store: st}, p.ID
}

func TestCreateKeyStoresOnlyTheHash(t *testing.T) {
	ctx := context.Background()
	st, project := newStore(t)
	k, secret, err := CreateKey(ctx, st, store.Key{ProjectID: project, Kind: store.KindAgent, Name: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(secret, "sfx_agent_") || !strings.HasPrefix(k.ID, "key_") {
		t.Fatalf("CreateKey = %q, %q", k.ID, secret)
	}
	got, err := st.KeyByHash(ctx, Hash(secret))
	if err != nil || got.ID != k.ID {
		t.Fatalf("the key is not found by its secret's hash: %+v, %v", got, err)
	}
	if _, err := st.KeyByHash(ctx, []byte(secret)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the key is found by its plain secret (%v): the secret itself was stored", err)
	}
}

func TestVerify(t *testing.T) {
	ctx := context.Background()
	st, project := newStore(t)
	k, secret, err := CreateKey(ctx, st, store.Key{ProjectID: project, Kind: store.KindClient, Name: "cli"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	v := NewVerifier(st, time.Second)
	v.now = func() time.Time { return now }

	for _, bad := range []string{"", "sfx_client_nope"} {
		if _, err := v.Verify(ctx, bad); !errors.Is(err, ErrUnknownKey) {
			t.Errorf("Verify(%q) = %v, want ErrUnknownKey", bad, err)
		}
	}
	got, err := v.Verify(ctx, secret)
	if err != nil || got.ID != k.ID || got.Name != "cli" {
		t.Fatalf("Verify(secret) = %+v, %v", got, err)
	}

	// Within the TTL a secret is checked once.
	before := st.lookups.Load()
	for range 5 {
		if _, err := v.Verify(ctx, secret); err != nil {
			t.Fatal(err)
		}
	}
	if n := st.lookups.Load() - before; n != 0 {
		t.Errorf("%d store lookups within the TTL, want 0", n)
	}

	// A revoked key is refused once the TTL has passed...
	if err := st.RevokeKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(ctx, secret); err != nil {
		t.Errorf("within the TTL the cached key is used: %v", err)
	}
	now = now.Add(time.Second)
	if _, err := v.Verify(ctx, secret); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("Verify(revoked) after the TTL = %v, want ErrUnknownKey", err)
	}
}

func TestVerifyForget(t *testing.T) {
	ctx := context.Background()
	st, project := newStore(t)
	k, secret, err := CreateKey(ctx, st, store.Key{ProjectID: project, Kind: store.KindClient})
	if err != nil {
		t.Fatal(err)
	}
	v := NewVerifier(st, time.Hour)
	if _, err := v.Verify(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if err := st.RevokeKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	v.Forget("key_other")
	if _, err := v.Verify(ctx, secret); err != nil {
		t.Fatalf("forgetting another key dropped this one: %v", err)
	}
	v.Forget(k.ID)
	if _, err := v.Verify(ctx, secret); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("Verify after Forget of a revoked key = %v, want ErrUnknownKey at once", err)
	}
}

func TestVerifyStoreErrorsAreNotCached(t *testing.T) {
	ctx := context.Background()
	st, project := newStore(t)
	_, secret, err := CreateKey(ctx, st, store.Key{ProjectID: project, Kind: store.KindAgent})
	if err != nil {
		t.Fatal(err)
	}
	v := NewVerifier(st, time.Hour)
	st.broken.Store(true)
	_, err = v.Verify(ctx, secret)
	if !errors.Is(err, errStoreDown) || errors.Is(err, ErrUnknownKey) {
		t.Fatalf("Verify with the store down = %v, want the store's error, not ErrUnknownKey", err)
	}
	if strings.Contains(err.Error(), secret) {
		t.Errorf("the error names the secret: %v", err)
	}
	st.broken.Store(false)
	if _, err := v.Verify(ctx, secret); err != nil {
		t.Errorf("Verify once the store is back = %v: the failure was cached", err)
	}
}

func TestVerifyCacheIsBounded(t *testing.T) {
	ctx := context.Background()
	st, _ := newStore(t)
	v := NewVerifier(st, time.Hour)
	for i := range 10_050 {
		v.Verify(ctx, "sfx_client_unknown"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+hex.EncodeToString([]byte{byte(i), byte(i >> 8)}))
	}
	v.mu.Lock()
	n := len(v.cache)
	v.mu.Unlock()
	if n > 10_001 {
		t.Errorf("the cache holds %d unknown secrets; it must stay bounded", n)
	}
}
