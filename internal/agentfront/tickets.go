package agentfront

import (
	"crypto/rand"
	"sync"
	"time"

	"github.com/spacefix/spacefix/core/agentproto"
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

// RedeemTicket takes a registration ticket this gateway issued, for a
// WebSocket that reached another gateway: it is used up here.
func (f *Front) RedeemTicket(id, keyID string) (*agentproto.Registration, bool) {
	t, ok := f.tickets.redeem(id, keyID)
	if !ok {
		return nil, false
	}
	return t.reg, true
}

// Compile checks a registration another gateway accepted and compiles its
// input schemas. The limits are that gateway's business: it applied the
// project's.
func Compile(reg *agentproto.Registration) (map[string]*schema.Schema, error) {
	return Check(reg, Limits{MaxTools: 1 << 30, MaxSchema: 1 << 30, MaxResources: 1 << 30, MaxRegister: 1 << 30})
}
