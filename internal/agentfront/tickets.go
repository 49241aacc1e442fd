package agentfront

import (
	"crypto/rand"
	"sync"
	"time"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/schema"
)

// tickets are registrations accepted and waiting for their WebSocket.
type tickets struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[string]*ticket
}

type ticket struct {
	keyID   string
	reg     *agentproto.Registration
	schemas map[string]*schema.Schema
	expires time.Time
}

func newTickets(ttl time.Duration) *tickets {
	return &tickets{ttl: ttl, m: make(map[string]*ticket)}
}

func (ts *tickets) issue(keyID string, reg *agentproto.Registration, schemas map[string]*schema.Schema) string {
	id := rand.Text()
	now := time.Now()
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for k, t := range ts.m { // few at a time: agents redeem within milliseconds
		if now.After(t.expires) {
			delete(ts.m, k)
		}
	}
	ts.m[id] = &ticket{keyID: keyID, reg: reg, schemas: schemas, expires: now.Add(ts.ttl)}
	return id
}

// redeem returns and forgets a live ticket issued to keyID.
func (ts *tickets) redeem(id, keyID string) (*ticket, bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t := ts.m[id]
	if t == nil || t.keyID != keyID || time.Now().After(t.expires) {
		return nil, false
	}
	delete(ts.m, id)
	return t, true
}
