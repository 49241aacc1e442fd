package upstream_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/spacefix/spacefix/internal/egress"
	"github.com/spacefix/spacefix/internal/secrets"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/upstream"
)

// TestTokenBoundToResource (issue 32, item 2): an account connected at
// one remote is neither handed out for another nor refreshed for it, even
// when its token is about to expire; at its own remote it still is.
func TestTokenBoundToResource(t *testing.T) {
	each(t, func(t *testing.T, st store.Store) {
		r := newRemote(t)
		r.set(func(r *remote) { r.accessLife = 30 }) // expires within the minute: Token would refresh
		f := newFixture(t, st)
		svc := newService(st, keyFile(t, secrets.NewKey()), nil)
		connect(t, svc, f, r, f.ann, "ann-upstream")
		other := "http://other.example/mcp"
		if tok, err := svc.Token(t.Context(), f.project, f.agentKey, f.ann, other); !errors.Is(err, upstream.ErrNotConnected) || tok != "" {
			t.Errorf("Token for another remote = %q, %v; want no token, ErrNotConnected", tok, err)
		}
		if tok, err := svc.Refresh(t.Context(), f.project, f.agentKey, f.ann, other, "stale"); !errors.Is(err, upstream.ErrNotConnected) || tok != "" {
			t.Errorf("Refresh for another remote = %q, %v; want no token, ErrNotConnected", tok, err)
		}
		if n := r.count(func(r *remote) int { return r.refreshAsk }); n != 0 {
			t.Errorf("the remote was asked for %d refreshes on behalf of another remote; want 0", n)
		}
		if _, err := st.UpstreamAccount(t.Context(), f.agentKey, f.ann); err != nil {
			t.Errorf("ann's account after a use elsewhere: %v; want it kept for its own remote", err)
		}
		tok, err := svc.Token(t.Context(), f.project, f.agentKey, f.ann, r.base+"/mcp")
		if err != nil || r.who(t, tok) != "ann-upstream" {
			t.Errorf("Token at the account's own remote = %v; the remote says %s", err, r.who(t, tok))
		}
	})
}

// TestUnreadableAccountReconnects (issue 32, item 3): an account sealed
// with a key the gateway no longer has (the key file lost or replaced) is
// dropped at its first use, which asks the person to connect again; the
// next connect registers a client anew, since the kept one's secret does
// not open either, and works.
func TestUnreadableAccountReconnects(t *testing.T) {
	each(t, func(t *testing.T, st store.Store) {
		r := newRemote(t)
		f := newFixture(t, st)
		connect(t, newService(st, keyFile(t, secrets.NewKey()), nil), f, r, f.ann, "ann-upstream")
		connect(t, newService(st, keyFile(t, secrets.NewKey()), nil), f, r, f.bob, "bob-upstream")

		var log syncBuffer
		box := keyFile(t, secrets.NewKey()) // the key file replaced
		svc := upstream.New(upstream.Options{Store: st, Box: box, PublicURL: func() string { return public },
			Egress: egress.Policy{AllowLoopback: true}, Log: slog.New(slog.NewTextHandler(&log, nil))})
		if tok, err := svc.Token(t.Context(), f.project, f.agentKey, f.ann, r.base+"/mcp"); !errors.Is(err, upstream.ErrReconnect) || tok != "" {
			t.Errorf("Token of an account the key file does not open = %q, %v; want ErrReconnect", tok, err)
		}
		if _, err := st.UpstreamAccount(t.Context(), f.agentKey, f.ann); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("ann's unreadable account after its use: %v; want it dropped", err)
		}
		if want := `level=WARN msg="upstream: the secret key file does not open an account; it is dropped and the person asked to connect again (was the key file lost or replaced?)"`; !strings.Contains(log.String(), want) {
			t.Errorf("the log does not say %s:\n%s", want, log.String())
		}
		// bob's 401 at the remote: Refresh meets the same.
		if _, err := svc.Refresh(t.Context(), f.project, f.agentKey, f.bob, r.base+"/mcp", "stale"); !errors.Is(err, upstream.ErrReconnect) {
			t.Errorf("Refresh of an account the key file does not open = %v; want ErrReconnect", err)
		}
		if _, err := st.UpstreamAccount(t.Context(), f.agentKey, f.bob); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("bob's unreadable account after a refresh: %v; want it dropped", err)
		}
		a := connect(t, svc, f, r, f.ann, "ann-upstream")
		if n := r.count(func(r *remote) int { return r.registered }); n != 3 {
			t.Errorf("%d client registrations; want 3 (the kept clients' secrets do not open with the new key)", n)
		}
		tok, err := svc.Token(t.Context(), f.project, f.agentKey, f.ann, a.Resource)
		if err != nil || r.who(t, tok) != "ann-upstream" {
			t.Errorf("ann's token after connecting again = %v; the remote says %s", err, r.who(t, tok))
		}
	})
}
