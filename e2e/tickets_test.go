package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/coder/websocket"

	"github.com/spacefix/spacefix/internal/agentfront"
	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/store"
)

// An agent key holds at most 1,000 registrations waiting to connect; the
// next is refused with 429 and a message that says what to do, other keys
// are not touched, and a ticket used frees a place.
func TestRegistrationsWaitingPerKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := regJSON(t, regWith("a"))
	var first agentproto.Ticket
	for i := range agentfront.MaxTicketsPerKey {
		status, msg := e.register(e.agentKey, body)
		if status != http.StatusOK {
			t.Fatalf("registration %d: %d %s", i+1, status, msg)
		}
		if i == 0 {
			must(t, json.Unmarshal([]byte(msg), &first))
		}
	}
	const want = "This agent key has 1,000 registrations waiting to connect, the most the gateway keeps for one key. " +
		"Connect with the tickets already issued (GET /v1/agent?ticket=…), or wait up to 30 s for unused ones to expire, then register again."
	if status, msg := e.register(e.agentKey, body); status != http.StatusTooManyRequests || msg != want {
		t.Fatalf("registration 1,001: %d %q, want 429 %q", status, msg, want)
	}
	_, other := e.newKey(store.Key{Name: "other", Kind: store.KindAgent})
	if status, msg := e.register(other, body); status != http.StatusOK {
		t.Fatalf("another agent key's registration: %d %s", status, msg)
	}

	ws, _, err := websocket.Dial(context.Background(), e.url+agentproto.ConnectPath+"?ticket="+first.Ticket,
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + e.agentKey}}})
	must(t, err)
	defer ws.CloseNow()
	if status, msg := e.register(e.agentKey, body); status != http.StatusOK {
		t.Fatalf("registration after a ticket was used: %d %s", status, msg)
	}
	if status, msg := e.register(e.agentKey, body); status != http.StatusTooManyRequests {
		t.Fatalf("registration 1,001 again: %d %s, want 429", status, msg)
	}
}
