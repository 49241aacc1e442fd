// Package identity signs the gateway's identity assertions: a short-lived
// JWT (ES256) that says who is calling, in the gateway's own words, for a
// provider to pass on to its own backend; one per caller and audience,
// reused by that caller's calls for most of its life. The signing keys
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
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/spacefix/spacefix/internal/secrets"
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
	// Box seals the private keys in the store (the gateway's secret key
	// file): whoever reads the store without the file cannot sign as the
	// gateway. Keys the store holds in the clear, or sealed with a key the
	// file keeps only to open, are sealed again with its current key when
	// read. Nil keeps them in the clear (an embedding program without a
	// key file); keys already sealed then cannot be read ([ErrSealed]).
	Box *secrets.Box
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

// Signer signs identity assertions with the gateway's current key. Sign,
// Token and JWKS may be called concurrently, from any goroutine, also
// while Rotate runs.
type Signer struct {
	opts Options

	mu        sync.RWMutex
	keys      *keySet   // nil until loaded
	jwks      []byte    // keys' JWKS, built lazily
	jwksUntil time.Time // when jwks must be built again (zero: when keys change)

	rotateMu sync.Mutex // one read-modify-write of the store at a time

	reuse reuseCache // tokens [Signer.Token] hands out again

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
	ID       string // jti: the token's id; [Signer.Token] sets a random one
	// TTL is how long the assertion lives: zero means [MaxTTL], and it is
	// never longer than MaxTTL. [Signer.Token] always signs for MaxTTL.
	TTL time.Duration
}

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
// (so that every gateway signs with the same current key within that
// time) and rotates when the current key is due: of gateways due at once,
// one wins (a compare-and-set on the stored value) and the others take
// its keys.
func (s *Signer) Start(ctx context.Context) error {
	if err := s.Load(ctx); err != nil {
		return err
	}
	ctx, s.cancel = context.WithCancel(ctx)
	s.wg.Go(func() { s.loop(ctx) })
	return nil
}

// Load reads the keys from the store (creating the first ones, or
// rotating them if due) without starting a loop: for a command that signs
// or rotates once.
func (s *Signer) Load(ctx context.Context) error {
	if err := s.refresh(ctx); err != nil {
		return fmt.Errorf("identity keys: %w", err)
	}
	return nil
}

// KeyID returns the id (kid) of the key Sign signs with; "" before the
// keys are loaded. Key ids are public: they are in the JWKS.
func (s *Signer) KeyID() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.keys == nil {
		return ""
	}
	return s.keys.st.Current.ID
}

// Close stops the loop and waits for it. It is safe to call twice.
func (s *Signer) Close() error {
	s.once.Do(func() {
		if s.cancel != nil {
			s.cancel()
		}
		s.wg.Wait()
	})
	return nil
}

func (s *Signer) loop(ctx context.Context) {
	t := time.NewTicker(s.opts.ReloadEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.refresh(ctx); err != nil && ctx.Err() == nil {
				s.opts.Log.Warn("identity keys: reading the store failed; signing with the keys read before", "err", err)
			}
		}
	}
}

// refresh takes the stored keys, creating or rotating them when due.
func (s *Signer) refresh(ctx context.Context) error {
	return s.change(ctx, false)
}

// Rotate makes the next key the current one now, and publishes a new next
// one (an admin's action; the caller audits it). The old current key stays
// published until the last token it signed has expired. A Signer that was
// not started (the CLI) may rotate too; started ones on other gateways
// take the new key within ReloadEvery.
func (s *Signer) Rotate(ctx context.Context) error {
	if err := s.change(ctx, true); err != nil {
		return fmt.Errorf("rotate the identity keys: %w", err)
	}
	return nil
}

// Reset replaces every stored key with new ones, whatever the store held:
// for when the keys cannot be read (the secret key file that sealed them
// is lost). Tokens signed with the old keys stop verifying at once; the
// caller audits it. Other gateways take the new keys within ReloadEvery,
// if their key file is the one given here.
func (s *Signer) Reset(ctx context.Context) error {
	s.rotateMu.Lock()
	defer s.rotateMu.Unlock()
	for range 10 {
		raw, err := s.opts.Store.Meta(ctx, MetaKeys)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("reset the identity keys: %w", err)
		}
		fresh, err := s.next(nil, s.opts.Now())
		if err != nil {
			return fmt.Errorf("reset the identity keys: %w", err)
		}
		won, err := s.opts.Store.SwapMeta(ctx, MetaKeys, raw, fresh.raw)
		if err != nil {
			return fmt.Errorf("reset the identity keys: %w", err)
		}
		if won {
			s.adopt(fresh)
			s.opts.Log.Info("identity keys reset", "kid", fresh.st.Current.ID, "next", fresh.st.Next.ID)
			return nil
		}
	}
	return errors.New("reset the identity keys: the stored keys kept changing; try again")
}

// change reads the stored keys and, if there are none, the current one is
// due or force is set, writes the changed keys with a compare-and-set. A
// writer that loses re-reads: another gateway's change counts as its own
// (a forced rotation is done once the key it would have retired is).
func (s *Signer) change(ctx context.Context, force bool) error {
	s.rotateMu.Lock()
	defer s.rotateMu.Unlock()
	var retire string // the current key a forced rotation retires
	for range 10 {
		raw, err := s.opts.Store.Meta(ctx, MetaKeys)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		now := s.opts.Now()
		var ks *keySet
		if raw != "" {
			if ks, err = parse(raw, s.opts.Box); err != nil {
				return err
			}
			if retire == "" {
				retire = ks.st.Current.ID
			}
			due := !now.Before(ks.st.Current.Active.Add(s.opts.RotateEvery))
			if !due && (!force || ks.st.Current.ID != retire) {
				if ks.reseal {
					won, err := s.reseal(ctx, ks)
					if err != nil {
						return err
					}
					if !won {
						continue // changed meanwhile: read again
					}
					return nil
				}
				s.adopt(ks)
				return nil
			}
		}
		if ks == nil {
			retire = "(none)" // a rotation of no keys is their creation, by whoever wins
		}
		next, err := s.next(ks, now)
		if err != nil {
			return err
		}
		won, err := s.opts.Store.SwapMeta(ctx, MetaKeys, raw, next.raw)
		if err != nil {
			return err
		}
		if won {
			s.adopt(next)
			if ks == nil {
				s.opts.Log.Info("identity keys created", "kid", next.st.Current.ID, "next", next.st.Next.ID)
			} else {
				s.opts.Log.Info("identity key rotated", "kid", next.st.Current.ID, "retired", ks.st.Current.ID, "next", next.st.Next.ID)
			}
			return nil
		}
	}
	return errors.New("the stored keys kept changing under this gateway; try again")
}

// reseal writes ks back with every private key sealed with the box's
// current key and retired keys by their public half only (the same keys:
// ids, JWKS and tokens do not change), unless the stored value changed
// meanwhile (false).
func (s *Signer) reseal(ctx context.Context, ks *keySet) (bool, error) {
	raw, err := encode(ks.st, s.opts.Box)
	if err != nil {
		return false, err
	}
	sealed, err := parse(raw, s.opts.Box)
	if err != nil {
		return false, err
	}
	won, err := s.opts.Store.SwapMeta(ctx, MetaKeys, ks.raw, raw)
	if err != nil || !won {
		return false, err
	}
	s.adopt(sealed)
	s.opts.Log.Info("identity keys stored again: sealed with the secret key file's current key, if there is one, and retired keys by their public half only", "kid", ks.st.Current.ID)
	return true, nil
}

// next is the keys after ks (nil: none yet): the first ones, or ks rotated.
func (s *Signer) next(ks *keySet, now time.Time) (*keySet, error) {
	var st stored
	var err error
	if ks == nil {
		st, err = freshSet(now)
	} else {
		st, err = ks.st.rotated(now, s.publishedFor())
	}
	if err != nil {
		return nil, err
	}
	raw, err := encode(st, s.opts.Box)
	if err != nil {
		return nil, err
	}
	return parse(raw, s.opts.Box)
}

// publishedFor is how long a retired key stays in the JWKS: other
// gateways may sign with it until they next read the store (twice the
// reload, for one failed read), and its last token lives MaxTTL; one
// minute more for verifiers' clocks.
func (s *Signer) publishedFor() time.Duration {
	return 2*s.opts.ReloadEvery + MaxTTL + time.Minute
}

// adopt makes ks the keys Sign and JWKS use, unless they are already.
func (s *Signer) adopt(ks *keySet) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keys != nil && s.keys.raw == ks.raw {
		return
	}
	s.keys, s.jwks, s.jwksUntil = ks, nil, time.Time{}
	s.reuse.clear() // tokens of the keys before are not handed out again
}

// Sign returns a compact JWS (ES256, kid = the current key's id) of c:
// iss, sub, aud, iat, exp, jti and the person's, app's and project's
// claims that are set. It fails before the keys are loaded
// ([ErrNotReady]), without a Subject or an Audience, and for a negative TTL.
// Calls use [Signer.Token], which reuses a token for the same caller.
func (s *Signer) Sign(c Claims) (string, error) {
	s.mu.RLock()
	ks := s.keys
	s.mu.RUnlock()
	if ks == nil {
		return "", ErrNotReady
	}
	tok, _, err := s.sign(c, ks, s.opts.Issuer(), s.opts.Now())
	return tok, err
}

// sign is Sign with ks, issued by iss at now; it returns the token's exp.
func (s *Signer) sign(c Claims, ks *keySet, iss string, now time.Time) (string, time.Time, error) {
	if c.Subject == "" || c.Audience == "" {
		return "", time.Time{}, errors.New("identity: an assertion needs a subject and an audience")
	}
	ttl := c.TTL
	switch {
	case ttl < 0:
		return "", time.Time{}, errors.New("identity: negative TTL")
	case ttl == 0 || ttl > MaxTTL:
		ttl = MaxTTL
	}
	iat := now.Unix()
	exp := now.Add(ttl).Unix()
	if exp <= iat {
		exp = iat + 1
	}
	payload, err := json.Marshal(jwtClaims{
		Issuer: iss, Subject: c.Subject, Audience: c.Audience,
		IssuedAt: iat, Expiry: exp, ID: c.ID,
		Email: c.Email, Name: c.Name, ClientID: c.ClientID, Scope: c.Scope, Project: c.Project,
	})
	if err != nil {
		return "", time.Time{}, fmt.Errorf("identity: encode claims: %w", err)
	}
	jws, err := ks.signer.Sign(payload)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("identity: sign: %w", err)
	}
	tok, err := jws.CompactSerialize()
	return tok, time.Unix(exp, 0), err
}

// jwtClaims is the assertion's payload.
type jwtClaims struct {
	Issuer   string `json:"iss"`
	Subject  string `json:"sub"`
	Audience string `json:"aud"`
	IssuedAt int64  `json:"iat"`
	Expiry   int64  `json:"exp"`
	ID       string `json:"jti,omitempty"`
	Email    string `json:"email,omitempty"`
	Name     string `json:"name,omitempty"`
	ClientID string `json:"client_id,omitempty"`
	Scope    string `json:"scope,omitempty"`
	Project  string `json:"project,omitempty"`
}

// JWKS returns {"keys":[...]}: the public keys a verifier may meet — the
// current one, the next one (published ahead, so that a cached copy knows
// it when it takes over) and the retired ones whose tokens may still live.
// Before the keys are loaded it is {"keys":[]}.
func (s *Signer) JWKS() []byte {
	now := s.opts.Now()
	s.mu.RLock()
	b, until, ks := s.jwks, s.jwksUntil, s.keys
	s.mu.RUnlock()
	if ks == nil {
		return []byte(`{"keys":[]}`)
	}
	if b != nil && (until.IsZero() || now.Before(until)) {
		return b
	}
	b, until = ks.jwks(now, s.publishedFor())
	s.mu.Lock()
	if s.keys == ks {
		s.jwks, s.jwksUntil = b, until
	}
	s.mu.Unlock()
	return b
}
