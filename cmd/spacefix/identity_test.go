package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spacefix/spacefix/internal/identity"
	"github.com/spacefix/spacefix/internal/secrets"
	"github.com/spacefix/spacefix/internal/store"
)

func TestIdentityRotate(t *testing.T) { eachStore(t, testIdentityRotate) }

// identity rotate makes the published next key sign, keeps the old one
// published, and audits the change with key ids only.
func testIdentityRotate(t *testing.T, data string) {
	ctx := context.Background()
	var before, after string
	withStore(ctx, data, func(st store.Store) error {
		s := identity.New(identity.Options{Store: st, Issuer: func() string { return "" }})
		if err := s.Load(ctx); err != nil {
			t.Fatal(err)
		}
		before = s.KeyID()
		return nil
	})
	out, err := runCLI(t, "identity", "rotate", "--data", data)
	if err != nil {
		t.Fatalf("identity rotate: %v\n%s", err, out)
	}
	var jwks []byte
	var secret string
	withStore(ctx, data, func(st store.Store) error {
		s := identity.New(identity.Options{Store: st, Issuer: func() string { return "" }})
		if err := s.Load(ctx); err != nil {
			t.Fatal(err)
		}
		after, jwks = s.KeyID(), s.JWKS()
		raw, _ := st.Meta(ctx, identity.MetaKeys)
		var keys struct{ Current struct{ Private []byte } }
		json.Unmarshal([]byte(raw), &keys)
		b, _ := json.Marshal(keys.Current.Private)
		secret = strings.Trim(string(b), `"`)
		es, err := st.Audit(ctx, store.AuditFilter{ProjectID: 0, Action: "identity.rotate"})
		if err != nil || len(es) != 1 {
			t.Fatalf("audit identity.rotate: %v, %d entries; want 1", err, len(es))
		}
		e := es[0]
		if e.Actor != store.ActorCLI || e.Target != after || string(e.Before) != `{"kid":"`+before+`"}` || string(e.After) != `{"kid":"`+after+`"}` {
			t.Errorf("audit entry = %+v %s %s", e, e.Before, e.After)
		}
		if strings.Contains(string(e.Before)+string(e.After), secret[:20]) {
			t.Error("the audit log holds a private key")
		}
		return nil
	})
	if after == before || after == "" {
		t.Fatalf("key before %q, after %q", before, after)
	}
	want := "Rotated the identity signing key: " + after + " signs now (was " + before + ").\n"
	if !strings.HasPrefix(out, want) || strings.Contains(out, secret[:20]) {
		t.Errorf("identity rotate printed %q, want it to start %q", out, want)
	}
	if !strings.Contains(string(jwks), `"kid":"`+before+`"`) {
		t.Errorf("the old key left the JWKS at once: %s", jwks)
	}
}

func TestIdentitySealedKeys(t *testing.T) { eachStore(t, testIdentitySealedKeys) }

// Keys sealed with the gateways' secret key file: identity rotate needs
// the file (given, or secret.key beside a SQLite file) and says so without
// it; identity reset, for a lost file, makes new keys sealed with the
// file given, which gateways with it start on.
func testIdentitySealedKeys(t *testing.T, data string) {
	ctx := context.Background()
	keyFile := writeKeyFile(t, filepath.Join(t.TempDir(), "secret.key"))
	box, err := secrets.Load(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	var sealed string
	withStore(ctx, data, func(st store.Store) error {
		s := identity.New(identity.Options{Store: st, Issuer: func() string { return "" }, Box: box})
		if err := s.Load(ctx); err != nil {
			t.Fatal(err)
		}
		sealed = s.KeyID()
		return nil
	})

	_, err = runCLI(t, "identity", "rotate", "--data", data)
	if err == nil || !strings.Contains(err.Error(), "sealed with a secret key file this process does not have: give it the gateways' --secret-key-file (or SPACEFIX_SECRET_KEY_FILE)") {
		t.Errorf("identity rotate without the key file: %v", err)
	}
	out, err := runCLI(t, "identity", "rotate", "--data", data, "--secret-key-file", keyFile)
	if err != nil || !strings.Contains(out, "(was "+sealed+")") {
		t.Fatalf("identity rotate --secret-key-file: %v\n%s", err, out)
	}
	if !strings.HasPrefix(data, "postgres") { // serve's default file beside the database
		writeKeyFileFrom(t, keyFile, filepath.Join(filepath.Dir(data), "secret.key"))
		if out, err := runCLI(t, "identity", "rotate", "--data", data); err != nil {
			t.Errorf("identity rotate with secret.key beside the database: %v\n%s", err, out)
		}
	}

	// The file is lost: a new one, and new keys.
	lost := writeKeyFile(t, filepath.Join(t.TempDir(), "secret.key"))
	if _, err := runCLI(t, "identity", "rotate", "--data", data, "--secret-key-file", lost); err == nil || !strings.Contains(err.Error(), "if that file is lost, run spacefix identity reset to make new keys") {
		t.Errorf("identity rotate with another key file: %v", err)
	}
	out, err = runCLI(t, "identity", "reset", "--data", data, "--secret-key-file", lost)
	if err != nil || !strings.HasPrefix(out, "Made new identity signing keys: ") {
		t.Fatalf("identity reset: %v\n%s", err, out)
	}
	newBox, err := secrets.Load(lost)
	if err != nil {
		t.Fatal(err)
	}
	withStore(ctx, data, func(st store.Store) error {
		s := identity.New(identity.Options{Store: st, Issuer: func() string { return "" }, Box: newBox})
		if err := s.Load(ctx); err != nil {
			t.Errorf("a gateway with the new file after the reset: %v", err)
		}
		if !strings.Contains(out, s.KeyID()+" signs now") {
			t.Errorf("identity reset printed %q; the key is %s", out, s.KeyID())
		}
		raw, _ := st.Meta(ctx, identity.MetaKeys)
		if strings.Contains(raw, `"private"`) {
			t.Error("identity reset stored a private key in the clear")
		}
		es, err := st.Audit(ctx, store.AuditFilter{ProjectID: 0, Action: "identity.reset"})
		if err != nil || len(es) != 1 || es[0].Target != s.KeyID() {
			t.Errorf("audit identity.reset: %v, %+v; want one entry for %s", err, es, s.KeyID())
		}
		return nil
	})
}

// writeKeyFile writes a new secret key file at path.
func writeKeyFile(t *testing.T, path string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(secrets.NewKey()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func writeKeyFileFrom(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
