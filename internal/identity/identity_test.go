package identity_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/google/go-cmp/cmp"

	"github.com/spacefix/spacefix/internal/identity"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/postgres"
	"github.com/spacefix/spacefix/internal/store/sqlite"
	"github.com/spacefix/spacefix/internal/testenv"
)

const issuer = "https://gw.example.test"

// clock is a settable time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func openSQLite(t *testing.T) store.Store { return openSQLiteB(t) }

func openSQLiteB(t testing.TB) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func openPostgres(t *testing.T) store.Store {
	t.Helper()
	st, err := postgres.Open(context.Background(), testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func newSignerB(b *testing.B, st store.Meta, clk *clock) *identity.Signer {
	s := identity.New(identity.Options{Store: st, Issuer: func() string { return issuer }, Now: clk.Now})
	if err := s.Start(b.Context()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// newSigner starts a Signer on st; log, if set, gets its log.
func newSigner(t *testing.T, st store.Meta, clk *clock, log *bytes.Buffer) *identity.Signer {
	t.Helper()
	opts := identity.Options{Store: st, Issuer: func() string { return issuer }, Now: clk.Now, ReloadEvery: time.Hour}
	if log != nil {
		opts.Log = slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	s := identity.New(opts)
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var personClaims = identity.Claims{
	Subject: "u-1", Email: "ada@example.test", Name: "Ada", ClientID: "c-9",
	Scope: "mcp:read mcp:write", Project: "shop", Audience: "https://orders.example.test", ID: "call-42",
}

// payload is what a verifier reads out of a token.
type payload struct {
	jwt.Claims
	Email    string `json:"email"`
	Name     string `json:"name"`
	ClientID string `json:"client_id"`
	Scope    string `json:"scope"`
	Project  string `json:"project"`
}

// verify checks token as a provider's backend would, with go-jose against
// the published JWKS: signature, iss, aud and exp at now.
func verify(jwks []byte, token, aud string, now time.Time) (payload, error) {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(jwks, &set); err != nil {
		return payload{}, err
	}
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		return payload{}, err
	}
	var p payload
	if err := tok.Claims(set, &p); err != nil {
		return payload{}, err
	}
	err = p.ValidateWithLeeway(jwt.Expected{Issuer: issuer, AnyAudience: jwt.Audience{aud}, Time: now}, 0)
	return p, err
}

func kid(t *testing.T, token string) string {
	t.Helper()
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		t.Fatal(err)
	}
	return tok.Headers[0].KeyID
}

func kids(t *testing.T, jwks []byte) []string {
	t.Helper()
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(jwks, &set); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, k := range set.Keys {
		if !k.IsPublic() || k.Algorithm != "ES256" || k.Use != "sig" {
			t.Errorf("JWKS key %q: public %v, alg %q, use %q; want a public ES256 signing key", k.KeyID, k.IsPublic(), k.Algorithm, k.Use)
		}
		out = append(out, k.KeyID)
	}
	return out
}

func TestSignVerifies(t *testing.T) {
	clk := newClock()
	s := newSigner(t, openSQLite(t), clk, nil)
	token, err := s.Sign(personClaims)
	if err != nil {
		t.Fatal(err)
	}
	got, err := verify(s.JWKS(), token, personClaims.Audience, clk.Now())
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	now := jwt.NewNumericDate(clk.Now())
	want := payload{
		Claims: jwt.Claims{Issuer: issuer, Subject: "u-1", Audience: jwt.Audience{"https://orders.example.test"},
			IssuedAt: now, Expiry: jwt.NewNumericDate(clk.Now().Add(5 * time.Minute)), ID: "call-42"},
		Email: "ada@example.test", Name: "Ada", ClientID: "c-9", Scope: "mcp:read mcp:write", Project: "shop",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("claims (-want +got):\n%s", d)
	}
	if _, err := verify(s.JWKS(), token, "https://other.example.test", clk.Now()); err == nil {
		t.Error("verified for another audience")
	}
	if _, err := verify(s.JWKS(), token, personClaims.Audience, clk.Now().Add(5*time.Minute+time.Second)); err == nil {
		t.Error("verified after exp")
	}
}

// The TTL is 5 minutes at most, shorter when the call's limit is.
func TestSignTTL(t *testing.T) {
	clk := newClock()
	s := newSigner(t, openSQLite(t), clk, nil)
	for _, tc := range []struct{ ttl, want time.Duration }{
		{0, 5 * time.Minute},
		{time.Hour, 5 * time.Minute},
		{30 * time.Second, 30 * time.Second},
	} {
		c := personClaims
		c.TTL = tc.ttl
		token, err := s.Sign(c)
		if err != nil {
			t.Fatal(err)
		}
		p, err := verify(s.JWKS(), token, c.Audience, clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Expiry.Time().Sub(p.IssuedAt.Time()); got != tc.want {
			t.Errorf("TTL %v: exp - iat = %v, want %v", tc.ttl, got, tc.want)
		}
	}
}

func TestSignRefuses(t *testing.T) {
	clk := newClock()
	notStarted := identity.New(identity.Options{Store: openSQLite(t), Issuer: func() string { return issuer }, Now: clk.Now})
	if _, err := notStarted.Sign(personClaims); err != identity.ErrNotReady {
		t.Errorf("Sign before Start: %v, want ErrNotReady", err)
	}
	if got := string(notStarted.JWKS()); got != `{"keys":[]}` {
		t.Errorf("JWKS before Start = %s", got)
	}
	s := newSigner(t, openSQLite(t), clk, nil)
	for name, c := range map[string]identity.Claims{
		"no audience":  {Subject: "u-1"},
		"no subject":   {Audience: "a"},
		"negative TTL": {Subject: "u-1", Audience: "a", TTL: -time.Second},
	} {
		if tok, err := s.Sign(c); err == nil {
			t.Errorf("%s: signed %q", name, tok)
		}
	}
}

// A token altered by one byte anywhere — header, claims or signature —
// fails.
func TestAlteredTokenFails(t *testing.T) {
	clk := newClock()
	s := newSigner(t, openSQLite(t), clk, nil)
	token, err := s.Sign(personClaims)
	if err != nil {
		t.Fatal(err)
	}
	jwks := s.JWKS()
	for i := range len(token) {
		if token[i] == '.' {
			continue
		}
		b := []byte(token)
		b[i] = 'A'
		if b[i] == token[i] {
			b[i] = 'B'
		}
		if _, err := verify(jwks, string(b), personClaims.Audience, clk.Now()); err == nil {
			// The last character of a base64url part may carry unused
			// bits; a change that decodes to the same bytes is no change.
			if d1, d2 := decodeParts(token), decodeParts(string(b)); d1 != d2 {
				t.Errorf("token altered at byte %d of %d verified", i, len(token))
			}
		}
	}
}

func decodeParts(token string) string {
	var out []string
	for _, p := range strings.Split(token, ".") {
		b, _ := base64.RawURLEncoding.DecodeString(p)
		out = append(out, string(b))
	}
	return strings.Join(out, "|")
}

// After a rotation old and new tokens both verify until the old key's last
// token has expired; then the old key leaves the JWKS. The new key was
// published before it signed.
func TestRotate(t *testing.T) {
	clk := newClock()
	s := newSigner(t, openSQLite(t), clk, nil)
	before := kids(t, s.JWKS())
	if len(before) != 2 {
		t.Fatalf("JWKS before a rotation has %d keys (%v), want the current and the next", len(before), before)
	}
	oldTok, err := s.Sign(personClaims)
	if err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Minute)
	if err := s.Rotate(t.Context()); err != nil {
		t.Fatal(err)
	}
	newTok, err := s.Sign(personClaims)
	if err != nil {
		t.Fatal(err)
	}
	oldKid, newKid := kid(t, oldTok), kid(t, newTok)
	if oldKid == newKid {
		t.Fatalf("kid after Rotate is still %q", oldKid)
	}
	if oldKid != before[0] || newKid != before[1] {
		t.Errorf("kids %q then %q; want the current then the next published before, %v", oldKid, newKid, before)
	}
	for name, tok := range map[string]string{"old": oldTok, "new": newTok} {
		if _, err := verify(s.JWKS(), tok, personClaims.Audience, clk.Now()); err != nil {
			t.Errorf("%s token after Rotate: %v", name, err)
		}
	}
	after := kids(t, s.JWKS())
	if d := cmp.Diff([]string{before[1], after[1], before[0]}, after); d != "" {
		t.Errorf("JWKS after Rotate: current, next, retired (-want +got):\n%s", d)
	}
	// Still published while a token it signed may live, on any gateway.
	clk.Add(5 * time.Minute)
	if !contains(kids(t, s.JWKS()), oldKid) {
		t.Errorf("old key left the JWKS 5 minutes after the rotation")
	}
	clk.Add(identity.MaxTTL + 2*time.Hour + time.Minute) // past 2 reloads (an hour each here) + MaxTTL + a minute
	if got := kids(t, s.JWKS()); contains(got, oldKid) || len(got) != 2 {
		t.Errorf("JWKS long after the rotation = %v, want 2 keys without %q", got, oldKid)
	}
	if tok, _ := s.Sign(personClaims); kid(t, tok) != newKid {
		t.Errorf("the new key stopped signing: kid %q", kid(t, tok))
	} else if _, err := verify(s.JWKS(), tok, personClaims.Audience, clk.Now()); err != nil {
		t.Errorf("a token of the new key against the later JWKS: %v", err)
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// The schedule: a key signs RotateEvery, then the next one takes over.
func TestRotateOnSchedule(t *testing.T) {
	clk := newClock()
	st := openSQLite(t)
	s := identity.New(identity.Options{Store: st, Issuer: func() string { return issuer }, Now: clk.Now, RotateEvery: 24 * time.Hour})
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	first, _ := s.Sign(personClaims)
	clk.Add(24 * time.Hour)
	// A Signer started now finds the key due and rotates it.
	s2 := identity.New(identity.Options{Store: st, Issuer: func() string { return issuer }, Now: clk.Now, RotateEvery: 24 * time.Hour})
	if err := s2.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	second, _ := s2.Sign(personClaims)
	if kid(t, first) == kid(t, second) {
		t.Errorf("a key due for rotation still signs")
	}
	if got := kids(t, s2.JWKS()); !contains(got, kid(t, first)) {
		t.Errorf("JWKS right after a scheduled rotation %v lacks the retired key %q", got, kid(t, first))
	}
}

func TestSharedStore(t *testing.T) {
	for name, open := range map[string]func(*testing.T) store.Store{"sqlite": openSQLite, "postgres": openPostgres} {
		t.Run(name, func(t *testing.T) { testSharedStore(t, open(t)) })
	}
}

// Gateways on one store publish the same JWKS and sign with the same key:
// those that start at once on an empty store, and after a rotation on one
// of them, once the others have read the store; a token of one verifies
// with another's JWKS.
func testSharedStore(t *testing.T, st store.Store) {
	clk := newClock()
	var logs [4]bytes.Buffer
	signers := make([]*identity.Signer, len(logs))
	var wg sync.WaitGroup
	for i := range signers {
		wg.Go(func() {
			s := identity.New(identity.Options{Store: st, Issuer: func() string { return issuer }, Now: clk.Now,
				Log: slog.New(slog.NewTextHandler(&logs[i], nil))})
			if err := s.Start(t.Context()); err != nil {
				t.Error(err)
			}
			signers[i] = s
		})
	}
	wg.Wait()
	for _, s := range signers {
		if s != nil {
			t.Cleanup(func() { s.Close() })
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	same := func(when string) {
		t.Helper()
		tok0, _ := signers[0].Sign(personClaims)
		for i, s := range signers[1:] {
			if a, b := string(signers[0].JWKS()), string(s.JWKS()); a != b {
				t.Errorf("%s: signer %d's JWKS differs:\n%s\n%s", when, i+1, a, b)
			}
			tok, err := s.Sign(personClaims)
			if err != nil {
				t.Fatal(err)
			}
			if kid(t, tok) != kid(t, tok0) {
				t.Errorf("%s: signer %d signs with %q, signer 0 with %q", when, i+1, kid(t, tok), kid(t, tok0))
			}
			if _, err := verify(s.JWKS(), tok0, personClaims.Audience, clk.Now()); err != nil {
				t.Errorf("%s: signer 0's token against signer %d's JWKS: %v", when, i+1, err)
			}
		}
	}
	same("started at once")

	// Rotate on one; the others take it when they re-read the store (their
	// loop does it every ReloadEvery; Rotate on one that was rotated
	// already is the same read).
	if err := signers[2].Rotate(t.Context()); err != nil {
		t.Fatal(err)
	}
	created, rotated := 0, 0
	for i := range logs {
		created += strings.Count(logs[i].String(), "identity keys created")
		rotated += strings.Count(logs[i].String(), "identity key rotated")
	}
	if created != 1 || rotated != 1 {
		t.Errorf("logs say keys created %d times and rotated %d times, want once each", created, rotated)
	}
	reloaded := identity.New(identity.Options{Store: st, Issuer: func() string { return issuer }, Now: clk.Now})
	if err := reloaded.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer reloaded.Close()
	tokR, _ := reloaded.Sign(personClaims)
	tok2, _ := signers[2].Sign(personClaims)
	if kid(t, tokR) != kid(t, tok2) {
		t.Errorf("after a rotation a new gateway signs with %q, the rotating one with %q", kid(t, tokR), kid(t, tok2))
	}
	if a, b := string(reloaded.JWKS()), string(signers[2].JWKS()); a != b {
		t.Errorf("after a rotation the JWKS differ:\n%s\n%s", a, b)
	}
}

// A started Signer takes another gateway's rotation at its next read of
// the store, ReloadEvery later, not before; the token it handed out for
// reuse goes with the retired key.
func TestReloadTakesRotation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &memMeta{}
		const every = time.Minute
		s := identity.New(identity.Options{Store: st, Issuer: func() string { return issuer }, ReloadEvery: every})
		if err := s.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		before := token(t, s, personClaims)
		cli := identity.New(identity.Options{Store: st, Issuer: func() string { return issuer }})
		if err := cli.Rotate(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(every - time.Second)
		synctest.Wait()
		if got := token(t, s, personClaims); got != before {
			t.Errorf("before its next read of the store the Signer gave a new token (kid %q); want the one it had", kid(t, got))
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := token(t, s, personClaims); kid(t, got) == kid(t, before) {
			t.Errorf("ReloadEvery after a rotation elsewhere, the Signer still gives tokens of the retired key %q", kid(t, got))
		}
		if tok, _ := s.Sign(personClaims); kid(t, tok) == kid(t, before) {
			t.Errorf("ReloadEvery after a rotation elsewhere, the Signer still signs with the retired key %q", kid(t, tok))
		}
	})
}

// memMeta is a store.Meta in memory: for tests in a synctest bubble,
// where a database's goroutines and files do not belong.
type memMeta struct {
	mu sync.Mutex
	m  map[string]string
}

func (s *memMeta) SetMeta(_ context.Context, name, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]string{}
	}
	s.m[name] = value
	return nil
}

func (s *memMeta) Meta(_ context.Context, name string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[name]
	if !ok {
		return "", store.ErrNotFound
	}
	return v, nil
}

func (s *memMeta) SwapMeta(_ context.Context, name, old, value string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[name] != old {
		return false, nil
	}
	if s.m == nil {
		s.m = map[string]string{}
	}
	s.m[name] = value
	return true, nil
}

// No private key reaches a log, an error or the JWKS.
func TestNoSecretOut(t *testing.T) {
	clk := newClock()
	st := openSQLite(t)
	var log bytes.Buffer
	s := newSigner(t, st, clk, &log)
	if err := s.Rotate(t.Context()); err != nil {
		t.Fatal(err)
	}
	raw, err := st.Meta(t.Context(), identity.MetaKeys)
	if err != nil {
		t.Fatal(err)
	}
	var stored struct {
		Current, Next struct{ Private []byte }
	}
	if err := json.Unmarshal([]byte(raw), &stored); err != nil {
		t.Fatal(err)
	}
	secrets := []string{string(stored.Current.Private), string(stored.Next.Private)}
	// The private keys in the forms one might print them: base64 of the
	// DER (as stored) and the JWK's d.
	var forms []string
	for _, der := range secrets {
		b, _ := json.Marshal([]byte(der))
		forms = append(forms, strings.Trim(string(b), `"`))
	}
	var set jose.JSONWebKeySet
	_ = json.Unmarshal(s.JWKS(), &set)
	if strings.Contains(string(s.JWKS()), `"d"`) {
		t.Errorf("JWKS has a private part: %s", s.JWKS())
	}
	// A store whose keys are damaged: the error says so without quoting them.
	if err := st.SetMeta(t.Context(), identity.MetaKeys, strings.Replace(raw, `"private":"`, `"private":"AAAA`, 1)); err != nil {
		t.Fatal(err)
	}
	err = identity.New(identity.Options{Store: st, Issuer: func() string { return issuer }}).Start(t.Context())
	if err == nil {
		t.Fatal("Start on damaged keys: nil error")
	}
	for _, f := range forms {
		if strings.Contains(log.String(), f[:20]) || strings.Contains(err.Error(), f[:20]) {
			t.Errorf("a private key reached the log or the error %q", err)
		}
	}
	if !strings.Contains(log.String(), "identity key rotated") {
		t.Errorf("log lacks the rotation: %s", log.String())
	}
}
