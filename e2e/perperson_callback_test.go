package e2e

import (
	"context"
	"errors"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/spacefix/spacefix/internal/store"
)

// TestPerPersonCallbackSpent (issue 32, item 4), through a real gateway
// and a real remote authorization server. bob opens the link alice's
// browser was sent back with: refused, and the code is spent at the
// remote, so alice's later use of it fails too. A callback without a code
// is refused. A callback opened twice connects once: one audit entry, one
// log line.
func TestPerPersonCallbackSpent(t *testing.T) {
	t.Parallel()
	w := newPPWorld(t, ppSetup{})
	alice, bob := w.person("alice", true), w.person("bob", true)
	notConnected := html.EscapeString("Your account could not be connected. Start again from the link in your MCP client or from your accounts page; if it fails again, the gateway's log says why.")
	gone := func(p *ppPerson) bool {
		_, err := w.front.store.UpstreamAccount(context.Background(), w.keyID, p.id)
		return errors.Is(err, store.ErrNotFound)
	}

	back := w.authorize(alice, "approve")
	codes := w.upSt.codes.Load()
	if status, _, page := browse(t, back.String(), bob.front.session); status != http.StatusBadRequest || !strings.Contains(page, notConnected) {
		t.Errorf("bob opening alice's callback = %d; want 400 saying %q\n%s", status, notConnected, page)
	}
	if n := w.upSt.codes.Load(); n != codes+1 {
		t.Errorf("the remote's token endpoint got %d codes when bob's callback was refused; want alice's one, spent", n-codes)
	}
	if status, _, page := browse(t, back.String(), alice.front.session); status != http.StatusBadRequest || !strings.Contains(page, notConnected) || !gone(alice) || !gone(bob) {
		t.Errorf("alice opening her callback after bob's = %d (alice connected: %v); want 400 and no account: its code was spent\n%s", status, !gone(alice), page)
	}

	// A callback with its state and no code.
	back = w.authorize(alice, "approve")
	noCode := *back
	q := noCode.Query()
	q.Del("code")
	noCode.RawQuery = q.Encode()
	if status, _, page := browse(t, noCode.String(), alice.front.session); status != http.StatusBadRequest || !strings.Contains(page, notConnected) || !gone(alice) {
		t.Errorf("a callback without a code = %d (connected: %v); want 400 and no account\n%s", status, !gone(alice), page)
	}

	// The genuine callback, then opened again.
	connected := "Your " + w.host + " account is connected."
	for i := range 2 {
		if status, _, page := browse(t, back.String(), alice.front.session); status != http.StatusOK || !strings.Contains(page, connected) || gone(alice) {
			t.Fatalf("alice's callback, opening %d = %d; want 200 saying %q\n%s", i+1, status, connected, page)
		}
	}
	var audit struct {
		Entries []struct{ Actor, Target string } `json:"entries"`
	}
	apiGet(t, w.front, w.front.adminToken(), "/api/projects/"+url.PathEscape(w.front.project.Name)+"/audit?action=upstream.connect", &audit)
	if len(audit.Entries) != 1 || audit.Entries[0].Actor != alice.email || audit.Entries[0].Target != w.keyID {
		t.Errorf("upstream.connect entries = %+v; want one, alice's", audit.Entries)
	}
	if n := strings.Count(w.frontLogs.String(), `msg="upstream account connected"`); n != 1 {
		t.Errorf("the front logged %d lines \"upstream account connected\"; want 1", n)
	}
	if got := w.whoami(t, w.session(alice, "2026-07-28", nil)); got != alice.email {
		t.Errorf("alice's whoami = %q", got)
	}
}
