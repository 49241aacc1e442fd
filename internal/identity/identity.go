// Package identity signs the gateway's per-call identity assertions: a
// short-lived JWT (ES256) that says who is calling, in the gateway's own
// words, for a provider to pass on to its own backend. The signing keys
// live in the store (shared by every gateway of the instance) and rotate
// on a schedule; their public halves are published as a JWKS
// (/.well-known/jwks.json), a retired key until the last token it signed
// has expired.
//
// ES256 (ECDSA on P-256 with SHA-256) because every JOSE library and cloud
// verifier supports it (EdDSA is still missing from some), its signatures
// are small (64 bytes), and signing takes tens of microseconds.
package identity

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/spacefix/spacefix/internal/store"
)

// Defaults and bounds.
const (
	// DefaultRotateEvery is how long a key signs before the next one takes
	// over, when [Options.RotateEvery] is zero.
	DefaultRotateEvery = 30 * 24 * time.Hour
	// MaxTTL is the longest an assertion lives, and the TTL of a [Claims]
	// that does not say.
	MaxTTL = 5 * time.Minute
	// MetaKeys is the store's meta name the keys are kept under, as JSON.
	MetaKeys = "identity.keys"
)

// ErrNotReady is returned by [Signer.Sign] before [Signer.Start] has
// loaded the keys.
var ErrNotReady = errors.New("identity: no signing key yet")

// Options configure a [Signer].
type Options struct {
	// Store keeps the keys as JSON under meta name [MetaKeys] (no
	// migration). Required. Private keys never reach a log.
	Store store.Meta
	// Issuer returns the gateway's public URL, the assertions' iss.
	// Required.
	Issuer func() string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Log gets rotations and store errors; nil discards them.
	Log *slog.Logger
	// RotateEvery is how long a key signs before the next takes over;
	// zero means [DefaultRotateEvery].
	RotateEvery time.Duration
	// ReloadEvery is how often a started Signer re-reads the store, so
	// that every gateway signs with the same current key within that
	// time; zero means one minute.
	ReloadEvery time.Duration
}

// Signer signs per-call identity assertions with the gateway's current
// key. Sign and JWKS may be called concurrently, from any goroutine, also
// while Rotate runs.
type Signer struct {
	opts Options

	mu   sync.RWMutex
	keys *keySet // nil until loaded

	rotateMu sync.Mutex // one read-modify-write of the store at a time

	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// Claims of one call's assertion.
type Claims struct {
	Subject  string // sub: the person's id, or "key:<key id>" for a key call
	Email    string // the person's; empty for a key
	Name     string // the person's; empty for a key
	ClientID string // client_id: the OAuth client (app) id; empty for a key
	Scope    string // scope: "mcp:read mcp:write" as granted; empty for a key
	Project  string // project: the project's name
	Audience string // aud: the agent key's identityAudience
	ID       string // jti: the call id
	// TTL is how long the assertion lives: zero means [MaxTTL], and it is
	// never longer than MaxTTL. Callers pass the call's own limit when it
	// is shorter.
	TTL time.Duration
}

// keySet is what the store keeps; defined in keys.go.
type keySet struct{}

// New returns a Signer; it reads nothing until [Signer.Start] or
// [Signer.Rotate]. It panics if Store or Issuer is nil.
func New(opts Options) *Signer {
	if opts.Store == nil || opts.Issuer == nil {
		panic("identity.New: Store and Issuer are required")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.RotateEvery <= 0 {
		opts.RotateEvery = DefaultRotateEvery
	}
	if opts.ReloadEvery <= 0 {
		opts.ReloadEvery = time.Minute
	}
	return &Signer{opts: opts}
}

// Start loads the keys from the store, creating the first ones if there
// are none, and starts a loop that re-reads the store every ReloadEvery
// and rotates when the current key is due (one gateway wins: a
// compare-and-set on the stored value, re-read after).
func (s *Signer) Start(ctx context.Context) error { return nil }

// Close stops the loop and waits for it. It is safe to call twice.
func (s *Signer) Close() error { return nil }

// Sign returns a compact JWS (ES256, kid = the current key's id) of c.
func (s *Signer) Sign(c Claims) (string, error) { return "", ErrNotReady }

// JWKS returns {"keys":[...]}: the public keys a verifier may meet — the
// current one, the next one (published ahead so that cached copies know it
// when it takes over) and the retired ones whose tokens may still live.
func (s *Signer) JWKS() []byte { return []byte(`{"keys":[]}`) }

// Rotate makes the next key the current one now, and stores a new next
// one (an admin's action; the caller audits it). The old current key stays
// published until the last token it signed has expired.
func (s *Signer) Rotate(ctx context.Context) error { return nil }
