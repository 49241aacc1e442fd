package identity

import (
	"crypto/rand"
	"encoding/base64"
	"sync"
	"time"
)

// Reuse of tokens: an assertion says who is calling, not which call, so
// [Signer.Token] signs one per caller and audience and hands the same one
// to that caller's calls until [ReuseMargin] before it expires. Signing
// (an ECDSA signature, tens of microseconds) then costs a call nothing at
// steady state; the call id travels in the call's own envelope.
const (
	// ReuseMargin is how long before its exp a token stops being handed
	// out: every token a call gets lives at least this long.
	ReuseMargin = time.Minute
	// MaxReused bounds the tokens kept for reuse. A flood of distinct
	// callers replaces kept tokens (each entry is about 1 KiB: the token
	// and its claims) instead of growing memory; a replaced caller's next
	// call signs again.
	MaxReused = 4096
)

// maxReused is MaxReused, smaller in tests.
var maxReused = MaxReused

// reuseKey is what a reused token says: the claims less the per-token ID
// and TTL, and the issuer it was signed for.
type reuseKey struct {
	claims Claims
	issuer string
}

// reused is a token kept for reuse.
type reused struct {
	token string
	until time.Time // hand it out before this (exp − ReuseMargin)
	keys  *keySet   // the keys that signed it
}

// reuseCache is the Signer's bounded map of kept tokens. Safe for
// concurrent use.
type reuseCache struct {
	mu sync.RWMutex
	m  map[reuseKey]reused
}

func (c *reuseCache) get(k reuseKey, ks *keySet, now time.Time) (string, bool) {
	c.mu.RLock()
	e, ok := c.m[k]
	c.mu.RUnlock()
	if !ok || e.keys != ks || !now.Before(e.until) {
		return "", false
	}
	return e.token, true
}

func (c *reuseCache) put(k reuseKey, e reused) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[reuseKey]reused)
	}
	if _, ok := c.m[k]; !ok && len(c.m) >= maxReused {
		for old := range c.m { // map order: an arbitrary entry goes
			delete(c.m, old)
			break
		}
	}
	c.m[k] = e
}

// clear forgets every kept token: the keys changed.
func (c *reuseCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m = nil
}

func (c *reuseCache) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}

// Token returns an assertion of c for a call: the one signed for the same
// claims (c's ID and TTL aside) while it has more than [ReuseMargin] left,
// else a new one that lives [MaxTTL] with a random jti. Tokens signed with
// keys that have since changed (a rotation, a reset, a reload that found
// other keys) are not handed out again. Errors are [Signer.Sign]'s.
func (s *Signer) Token(c Claims) (string, error) {
	c.ID, c.TTL = "", 0
	s.mu.RLock()
	ks := s.keys
	s.mu.RUnlock()
	if ks == nil {
		return "", ErrNotReady
	}
	k := reuseKey{claims: c, issuer: s.opts.Issuer()}
	now := s.opts.Now()
	if tok, ok := s.reuse.get(k, ks, now); ok {
		return tok, nil
	}
	c.ID = newJTI()
	tok, exp, err := s.sign(c, ks, k.issuer, now)
	if err != nil {
		return "", err
	}
	s.reuse.put(k, reused{token: tok, until: exp.Add(-ReuseMargin), keys: ks})
	return tok, nil
}

// newJTI is a random token id: 128 bits, base64url.
func newJTI() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b[:])
}
