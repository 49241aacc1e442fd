// Package auth turns presented secrets into keys: it makes new key secrets,
// hashes them for storage and checks presented ones against the store with a
// short cache, so a revoked key stops working within a second.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/spacefix/spacefix/internal/store"
)

// Secret prefixes say what a key is at a glance and let secret scanners find
// leaked keys.
const (
	agentPrefix  = "sfx_agent_"
	clientPrefix = "sfx_client_"
)

// ErrUnknownKey is returned for a secret that matches no live key.
var ErrUnknownKey = errors.New("unknown or revoked key")

// NewSecret returns a fresh secret for a key of kind, and its public id.
func NewSecret(kind string) (secret, id string) {
	prefix := clientPrefix
	if kind == store.KindAgent {
		prefix = agentPrefix
	}
	return prefix + rand.Text(), "key_" + strings.ToLower(rand.Text()[:12])
}

// Hash returns the SHA-256 of a secret; only this is stored. Secrets are 130
// bits of randomness, so a fast hash is safe here, unlike for passwords.
func Hash(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// CreateKey makes a key of k.Kind in k.ProjectID, stores it hashed and returns
// the stored key and its secret, which is shown once and never again.
func CreateKey(ctx context.Context, s store.Keys, k store.Key) (store.Key, string, error) {
	secret, id := NewSecret(k.Kind)
	k.ID = id
	stored, err := s.CreateKey(ctx, k, Hash(secret))
	if err != nil {
		return store.Key{}, "", fmt.Errorf("create key: %w", err)
	}
	return stored, secret, nil
}

// Verifier checks presented secrets. Lookups are cached for TTL, which bounds
// how long a revoked key keeps working.
type Verifier struct {
	store store.Keys
	ttl   time.Duration
	now   func() time.Time

	mu    sync.Mutex
	cache map[string]cached // by hex hash
}

type cached struct {
	key     store.Key
	err     error
	expires time.Time
}

// NewVerifier returns a Verifier over s. A zero ttl means 500ms.
func NewVerifier(s store.Keys, ttl time.Duration) *Verifier {
	if ttl <= 0 {
		ttl = 500 * time.Millisecond
	}
	return &Verifier{store: s, ttl: ttl, now: time.Now, cache: make(map[string]cached)}
}

// Verify returns the live key whose secret is presented, or ErrUnknownKey.
func (v *Verifier) Verify(ctx context.Context, secret string) (store.Key, error) {
	if secret == "" {
		return store.Key{}, ErrUnknownKey
	}
	h := Hash(secret)
	hk := hex.EncodeToString(h)
	now := v.now()
	v.mu.Lock()
	c, ok := v.cache[hk]
	v.mu.Unlock()
	if ok && now.Before(c.expires) {
		return c.key, c.err
	}
	k, err := v.store.KeyByHash(ctx, h)
	switch {
	case errors.Is(err, store.ErrNotFound):
		err = ErrUnknownKey
	case err != nil:
		return store.Key{}, fmt.Errorf("verify key: %w", err) // not cached: the store may recover
	case k.Revoked():
		err = ErrUnknownKey
	}
	v.mu.Lock()
	if len(v.cache) > 10000 { // bounded: unknown secrets must not grow it forever
		clear(v.cache)
	}
	v.cache[hk] = cached{key: k, err: err, expires: now.Add(v.ttl)}
	v.mu.Unlock()
	return k, err
}

// Forget drops what the verifier remembers of key keyID, so that a key
// revoked in this process stops working at once rather than within TTL.
func (v *Verifier) Forget(keyID string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for hk, c := range v.cache {
		if c.key.ID == keyID {
			delete(v.cache, hk)
		}
	}
}

// BearerToken returns the token of an "Authorization: Bearer <token>" value.
func BearerToken(header string) string {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}
