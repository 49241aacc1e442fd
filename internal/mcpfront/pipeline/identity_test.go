package pipeline

import (
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/google/go-cmp/cmp"

	"github.com/spacefix/spacefix/internal/access"
	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/identity"
	"github.com/spacefix/spacefix/internal/policy"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlite"
)

// identityFront is a Pipeline with just what identityTokens reads: a store
// with one project, an agent key with an audience and one without.
func identityFront(t *testing.T) (*Pipeline, store.Project) {
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p, err := st.CreateProject(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range []store.Key{
		{ID: "key_aud", ProjectID: p.ID, Kind: store.KindAgent, IdentityAudience: "https://orders.example.com"},
		{ID: "key_none", ProjectID: p.ID, Kind: store.KindAgent},
	} {
		if _, err := st.CreateKey(ctx, k, []byte(strings.Repeat(string(rune('a'+i)), 32))); err != nil {
			t.Fatal(err)
		}
	}
	signer := identity.New(identity.Options{Store: st, Issuer: func() string { return "https://gw.example.com" }})
	if err := signer.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { signer.Close() })
	return &Pipeline{identity: signer, controls: access.NewCache(st, time.Second, policy.Options{}), log: slog.New(slog.DiscardHandler)}, p
}

func TestIdentityTokens(t *testing.T) {
	f, p := identityFront(t)
	person := agentproto.Caller{
		KeyID: "grant_1", Project: "shop", Scopes: []string{"mcp:read", "mcp:write"},
		Person: &agentproto.Person{ID: "7", Email: "ada@example.com", Name: "Ada"},
		App:    &agentproto.App{ID: "client_9", Name: "Claude"},
	}
	key := agentproto.Caller{KeyID: "key_c", Project: "shop", Scopes: []string{"mcp:read"}}

	if h := f.identityTokens(t.Context(), p.ID, "key_none", person); h != nil {
		t.Error("a key without an audience got an identity hook; want none (no signing)")
	}
	// Zero cost for keys that did not ask: no signing, no allocation.
	if n := testing.AllocsPerRun(100, func() { f.identityTokens(t.Context(), p.ID, "key_none", person) }); n != 0 {
		t.Errorf("a call to a key without an audience allocates %v times for its identity token; want 0", n)
	}
	if h := (&Pipeline{controls: f.controls}).identityTokens(t.Context(), p.ID, "key_aud", person); h != nil {
		t.Error("a gateway without a signer got an identity hook")
	}
	type claims struct {
		jwt.Claims
		Email    string `json:"email"`
		Name     string `json:"name"`
		ClientID string `json:"client_id"`
		Scope    string `json:"scope"`
		Project  string `json:"project"`
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(f.identity.JWKS(), &set); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		caller agentproto.Caller
		wait   time.Duration
		want   claims
	}{
		{"person", person, time.Minute, claims{Claims: jwt.Claims{Subject: "7"}, Email: "ada@example.com", Name: "Ada", ClientID: "client_9", Scope: "mcp:read mcp:write", Project: "shop"}},
		{"client key", key, 10 * time.Minute, claims{Claims: jwt.Claims{Subject: "key:key_c"}, Scope: "mcp:read", Project: "shop"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := f.identityTokens(t.Context(), p.ID, "key_aud", tt.caller)
			if h == nil {
				t.Fatal("no identity hook for a key with an audience")
			}
			now := time.Now()
			tok := h("c-test-1", now.Add(tt.wait))
			parsed, err := jwt.ParseSigned(tok, []jose.SignatureAlgorithm{jose.ES256})
			if err != nil {
				t.Fatalf("ParseSigned(%q): %v", tok, err)
			}
			var got claims
			if err := parsed.Claims(set, &got); err != nil {
				t.Fatalf("the token does not verify against the JWKS: %v", err)
			}
			if err := got.Validate(jwt.Expected{Issuer: "https://gw.example.com", AnyAudience: jwt.Audience{"https://orders.example.com"}, Time: now}); err != nil {
				t.Errorf("Validate: %v", err)
			}
			if got.ID == "" || got.ID == "c-test-1" {
				t.Errorf("jti = %q; want the token's own id, not the call id", got.ID)
			}
			// 5 minutes whatever the call's wait: the token asserts the
			// caller, and the next calls get it again.
			exp := got.Expiry.Time()
			if limit := now.Add(identity.MaxTTL); exp.After(limit) || exp.Before(limit.Add(-2*time.Second)) {
				t.Errorf("exp = %v, want within 2s before %v (5 minutes)", exp, limit)
			}
			if again := h("c-test-2", now.Add(tt.wait)); again != tok {
				t.Error("the caller's next call got another token; want the same one reused")
			}
			got.Claims, tt.want.Claims = jwt.Claims{Subject: got.Subject}, jwt.Claims{Subject: tt.want.Subject}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("claims (-want +got):\n%s", diff)
			}
		})
	}
}
