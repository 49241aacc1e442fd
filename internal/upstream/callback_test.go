package upstream_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spacefix/spacefix/internal/secrets"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/upstream"
)

// spent reports whether the remote's token endpoint saw code exchanged.
func (r *remote) spent(code string) bool {
	return r.count(func(r *remote) int {
		if _, ok := r.used[code]; ok {
			return 1
		}
		return 0
	}) == 1
}

// TestRefusedCallbackSpendsCode (issue 32, item 4): a callback refused in
// the browser (another person's, an expired one) still spends its code
// at the authorization server, so the link connects nobody later; one
// without a code is refused.
func TestRefusedCallbackSpendsCode(t *testing.T) {
	each(t, func(t *testing.T, st store.Store) {
		r := newRemote(t)
		f := newFixture(t, st)
		c := &clock{}
		svc := newService(st, keyFile(t, secrets.NewKey()), c)
		host := strings.TrimPrefix(r.base, "http://")
		begin := func() (state, code, iss string) {
			authURL, err := svc.Begin(t.Context(), f.project, f.agentKey, f.ann, r.base+"/mcp", "")
			if err != nil {
				t.Fatal(err)
			}
			back := browse(t, authURL, "ann-upstream")
			return back.Get("state"), back.Get("code"), back.Get("iss")
		}

		state, code, iss := begin()
		if _, err := svc.Complete(t.Context(), f.bob, state, code, iss); !errors.Is(err, upstream.ErrState) {
			t.Fatalf("bob completing ann's = %v; want ErrState", err)
		}
		if !r.spent(code) {
			t.Errorf("the code of the callback refused to bob was not exchanged at the remote")
		}
		_, err := svc.Complete(t.Context(), f.ann, state, code, iss)
		if want := "the authorization server of " + host + " refused: invalid_grant"; err == nil || err.Error() != want {
			t.Errorf("ann's use of the code after bob's refused callback = %v; want %s", err, want)
		}

		state, code, iss = begin()
		c.advance(10*time.Minute + time.Second)
		if _, err := svc.Complete(t.Context(), f.ann, state, code, iss); !errors.Is(err, upstream.ErrState) || !strings.Contains(err.Error(), "it expired") {
			t.Errorf("an expired callback = %v; want it refused as expired", err)
		}
		if !r.spent(code) {
			t.Errorf("the code of the expired callback was not exchanged at the remote")
		}

		state, code, iss = begin()
		_, err = svc.Complete(t.Context(), f.ann, state, "", iss)
		if want := "the connect link is not valid: the answer from " + host + " carries no code; start connecting your " + host + " account again"; err == nil || err.Error() != want {
			t.Errorf("a callback without a code = %v; want %s", err, want)
		}
		if list, _ := st.UpstreamAccounts(t.Context(), store.UpstreamFilter{}); len(list) != 0 {
			t.Errorf("accounts stored after refused callbacks: %d", len(list))
		}
		// The flow whose callback came without a code may still finish.
		if done, err := svc.Complete(t.Context(), f.ann, state, code, iss); err != nil || done.Again {
			t.Errorf("the callback with its code after one without = %+v, %v; want connected", done, err)
		}
	})
}

// TestCallbackReloadExactFlow (issue 32, item 4): the reload guard knows
// the flow, not the time. Two connects started before either finished
// (two tabs): the second one's callback exchanges its own code and
// connects its account; only its reload is a reload.
func TestCallbackReloadExactFlow(t *testing.T) {
	each(t, func(t *testing.T, st store.Store) {
		r := newRemote(t)
		f := newFixture(t, st)
		svc := newService(st, keyFile(t, secrets.NewKey()), nil)
		start := func(subject string) (string, string, string) {
			authURL, err := svc.Begin(t.Context(), f.project, f.agentKey, f.ann, r.base+"/mcp", "")
			if err != nil {
				t.Fatal(err)
			}
			back := browse(t, authURL, subject)
			return back.Get("state"), back.Get("code"), back.Get("iss")
		}
		stateA, codeA, issA := start("ann-upstream")
		stateB, codeB, issB := start("ann-second")
		if done, err := svc.Complete(t.Context(), f.ann, stateA, codeA, issA); err != nil || done.Again {
			t.Fatalf("the first tab's callback = %+v, %v", done, err)
		}
		done, err := svc.Complete(t.Context(), f.ann, stateB, codeB, issB)
		if err != nil || done.Again {
			t.Fatalf("the second tab's callback = %+v, %v; want connected now", done, err)
		}
		if !r.spent(codeB) {
			t.Errorf("the second tab's code was not exchanged")
		}
		tok, err := svc.Token(t.Context(), f.project, f.agentKey, f.ann, r.base+"/mcp")
		if err != nil || r.who(t, tok) != "ann-second" {
			t.Errorf("ann's token after the second tab = %v; the remote says %s, want ann-second", err, r.who(t, tok))
		}
		issued := r.count(func(r *remote) int { return r.n })
		again, err := svc.Complete(t.Context(), f.ann, stateB, codeB, issB)
		if err != nil || !again.Again || again.Account.Version != done.Account.Version {
			t.Errorf("the second tab reloaded = %+v, %v; want again, the same account", again, err)
		}
		if n := r.count(func(r *remote) int { return r.n }); n != issued {
			t.Errorf("a reload got %d more tokens from the remote; want none", n-issued)
		}
		if _, err := svc.Complete(t.Context(), f.bob, stateB, codeB, issB); !errors.Is(err, upstream.ErrState) {
			t.Errorf("bob opening ann's finished callback = %v; want ErrState", err)
		}
	})
}
