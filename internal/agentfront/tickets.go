package agentfront

import (
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/schema"
)

// MaxTicketsPerKey is the most registrations of one agent key that wait
// for their WebSocket at once. An agent connects within milliseconds of
// registering, so this is only reached by a fleet starting all at once
// (the fan-in benchmark starts 500 replicas of one key together) or by a
// key that registers without connecting, which would otherwise fill the
// gateway's memory with registrations for [TicketTTL] each.
const MaxTicketsPerKey = 1000

// msgTooManyTickets is what a registration over [MaxTicketsPerKey] reads.
var msgTooManyTickets = fmt.Sprintf("This agent key has %s registrations waiting to connect, the most the gateway keeps for one key. "+
	"Connect with the tickets already issued (GET %s?ticket=…), or wait up to %d s for unused ones to expire, then register again.",
	agentproto.Thousands(MaxTicketsPerKey), agentproto.ConnectPath, int(TicketTTL.Seconds()))

// tickets are registrations accepted and waiting for their WebSocket, at
// most [MaxTicketsPerKey] per key.
type tickets struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[string]*ticket
	// perKey counts the tickets of m by key.
	perKey map[string]int
	// order is the ids issued, oldest first (all live as long): expired
	// ones are swept from its front. Ids already redeemed are skipped.
	order []string
}

type ticket struct {
	keyID   string
	reg     *agentproto.Registration
	schemas map[string]*schema.Schema
	expires time.Time
}

func newTickets(ttl time.Duration) *tickets {
	return &tickets{ttl: ttl, m: make(map[string]*ticket), perKey: make(map[string]int)}
}

// issue keeps a registration and returns its ticket, or
// [errTooManyTickets] when keyID has [MaxTicketsPerKey] waiting.
func (ts *tickets) issue(keyID string, reg *agentproto.Registration, schemas map[string]*schema.Schema) (string, error) {
	now := time.Now()
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.sweep(now)
	if ts.perKey[keyID] >= MaxTicketsPerKey {
		return "", errTooManyTickets
	}
	id := rand.Text()
	ts.m[id] = &ticket{keyID: keyID, reg: reg, schemas: schemas, expires: now.Add(ts.ttl)}
	ts.perKey[keyID]++
	ts.order = append(ts.order, id)
	return id, nil
}

// errTooManyTickets refuses a registration over [MaxTicketsPerKey].
var errTooManyTickets = errors.New(msgTooManyTickets)

// sweep forgets the tickets expired at now; mu is held.
func (ts *tickets) sweep(now time.Time) {
	n := 0
	for _, id := range ts.order {
		t := ts.m[id]
		if t != nil && !now.After(t.expires) {
			break
		}
		if t != nil {
			ts.forget(id, t)
		}
		n++
	}
	clear(ts.order[:n])
	ts.order = ts.order[n:] // append copies what is left when it grows
}

// forget drops ticket t, id; mu is held.
func (ts *tickets) forget(id string, t *ticket) {
	delete(ts.m, id)
	if ts.perKey[t.keyID]--; ts.perKey[t.keyID] <= 0 {
		delete(ts.perKey, t.keyID)
	}
}

// redeem returns and forgets a live ticket issued to keyID.
func (ts *tickets) redeem(id, keyID string) (*ticket, bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t := ts.m[id]
	if t == nil || t.keyID != keyID || time.Now().After(t.expires) {
		return nil, false
	}
	ts.forget(id, t)
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
