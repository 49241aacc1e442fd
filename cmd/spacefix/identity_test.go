package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/spacefix/spacefix/internal/identity"
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
