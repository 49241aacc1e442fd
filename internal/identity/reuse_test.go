package identity_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/spacefix/spacefix/internal/identity"
)

// token is s.Token(c) that fails the test.
func token(t *testing.T, s *identity.Signer, c identity.Claims) string {
	t.Helper()
	tok, err := s.Token(c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// A caller's calls get the same token until a minute before it expires,
// whatever their call ids; then a new one, with a jti of its own.
func TestTokenReused(t *testing.T) {
	clk := newClock()
	s := newSigner(t, openSQLite(t), clk, nil)
	first := token(t, s, personClaims)
	p, err := verify(s.JWKS(), first, personClaims.Audience, clk.Now())
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if got := p.Expiry.Time().Sub(p.IssuedAt.Time()); got != identity.MaxTTL {
		t.Errorf("exp - iat = %v, want %v", got, identity.MaxTTL)
	}
	if p.ID == "" || p.ID == personClaims.ID {
		t.Errorf("jti = %q; want a random id of the token's own, not the call id %q", p.ID, personClaims.ID)
	}

	other := personClaims
	other.ID, other.TTL = "call-43", time.Second // another call: its id and limit do not matter
	clk.Add(identity.MaxTTL - identity.ReuseMargin - time.Second)
	if got := token(t, s, other); got != first {
		t.Errorf("a call %v after the first got another token; want the same until %v before it expires", identity.MaxTTL-identity.ReuseMargin-time.Second, identity.ReuseMargin)
	}

	clk.Add(time.Second) // exp − 60 s: no longer handed out
	second := token(t, s, personClaims)
	if second == first {
		t.Fatalf("a call %v before the token expires got it again; want a new one", identity.ReuseMargin)
	}
	p2, err := verify(s.JWKS(), second, personClaims.Audience, clk.Now())
	if err != nil {
		t.Fatalf("verify the new token: %v", err)
	}
	if p2.ID == p.ID || p2.ID == "" {
		t.Errorf("the new token's jti = %q; want a fresh one (the first was %q)", p2.ID, p.ID)
	}
	if want := clk.Now().Add(identity.MaxTTL); !p2.Expiry.Time().Equal(want) {
		t.Errorf("the new token expires at %v; want %v", p2.Expiry.Time(), want)
	}
	if got := token(t, s, personClaims); got != second {
		t.Error("the new token is not reused in turn")
	}
}

// Another caller, another audience or anything else the token says gets a
// token of its own.
func TestTokenPerCaller(t *testing.T) {
	clk := newClock()
	s := newSigner(t, openSQLite(t), clk, nil)
	base := token(t, s, personClaims)
	seen := map[string]string{base: "the person"}
	for name, change := range map[string]func(*identity.Claims){
		"another person":   func(c *identity.Claims) { c.Subject = "u-2" },
		"another audience": func(c *identity.Claims) { c.Audience = "https://billing.example.test" },
		"another app":      func(c *identity.Claims) { c.ClientID = "c-10" },
		"other scopes":     func(c *identity.Claims) { c.Scope = "mcp:read" },
		"another project":  func(c *identity.Claims) { c.Project = "shop-2" },
		"a new email":      func(c *identity.Claims) { c.Email = "ada@new.example.test" },
	} {
		c := personClaims
		change(&c)
		tok := token(t, s, c)
		if was, ok := seen[tok]; ok {
			t.Errorf("%s got the token of %s", name, was)
		}
		seen[tok] = name
		p, err := verify(s.JWKS(), tok, c.Audience, clk.Now())
		if err != nil {
			t.Errorf("%s: verify: %v", name, err)
		} else if p.Subject != c.Subject || p.Scope != c.Scope || p.Project != c.Project || p.Email != c.Email || p.ClientID != c.ClientID {
			t.Errorf("%s: the token says %+v; want the claims %+v", name, p, c)
		}
	}
	if got := token(t, s, personClaims); got != base {
		t.Error("the first caller's token was not kept beside the others")
	}
}

// A rotation, here or on another gateway sharing the store, ends reuse:
// the next call gets a token of the new key.
func TestTokenAfterRotation(t *testing.T) {
	clk := newClock()
	st := openSQLite(t)
	s := newSigner(t, st, clk, nil)
	before := token(t, s, personClaims)
	if err := s.Rotate(t.Context()); err != nil {
		t.Fatal(err)
	}
	after := token(t, s, personClaims)
	if after == before || kid(t, after) == kid(t, before) {
		t.Fatalf("after Rotate the call got kid %q, the same as before; want the new key's token", kid(t, after))
	}

	other := identity.New(identity.Options{Store: st, Issuer: func() string { return issuer }, Now: clk.Now})
	if err := other.Rotate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.Load(t.Context()); err != nil { // what the reload loop does
		t.Fatal(err)
	}
	if got := token(t, s, personClaims); kid(t, got) == kid(t, after) {
		t.Errorf("after a rotation on another gateway and a reload, the call still got a token of the retired key %q", kid(t, after))
	}

	if err := s.Reset(t.Context()); err != nil {
		t.Fatal(err)
	}
	reset := token(t, s, personClaims)
	if _, err := verify(s.JWKS(), reset, personClaims.Audience, clk.Now()); err != nil {
		t.Errorf("after Reset the call got a token that does not verify against the new keys: %v", err)
	}
}

// The tokens kept for reuse are bounded: a flood of distinct callers
// replaces kept tokens instead of growing memory, and every caller still
// gets a token that says who it is.
func TestTokenReuseBounded(t *testing.T) {
	const bound = 64 // MaxReused's 4096 in the gateway: the same code, fewer signatures
	t.Cleanup(identity.SetMaxReused(bound))
	clk := newClock()
	s := newSigner(t, openSQLite(t), clk, nil)
	for i := range 3 * bound {
		c := personClaims
		c.Subject = fmt.Sprint("u-", i)
		token(t, s, c)
		if n := identity.ReusedLen(s); n > bound {
			t.Fatalf("%d tokens kept after %d callers; want at most %d", n, i+1, bound)
		}
	}
	if n := identity.ReusedLen(s); n != bound {
		t.Errorf("%d tokens kept after %d callers; want the bound, %d", n, 3*bound, bound)
	}
	tok := token(t, s, personClaims)
	if p, err := verify(s.JWKS(), tok, personClaims.Audience, clk.Now()); err != nil || p.Subject != personClaims.Subject {
		t.Errorf("a caller after the flood: subject %q, %v; want its own token", p.Subject, err)
	}
}

// Callers at once, some of them the same, each get a token that says who
// they are (the race detector watches the cache).
func TestTokenConcurrent(t *testing.T) {
	clk := newClock()
	s := newSigner(t, openSQLite(t), clk, nil)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				c := personClaims
				c.Subject = fmt.Sprint("u-", (g+i)%4)
				tok, err := s.Token(c)
				if err != nil {
					t.Error(err)
					return
				}
				if p, err := verify(s.JWKS(), tok, c.Audience, clk.Now()); err != nil || p.Subject != c.Subject {
					t.Errorf("caller %s got a token for %q (%v)", c.Subject, p.Subject, err)
				}
			}
		})
	}
	wg.Add(1)
	go func() { // a rotation meanwhile
		defer wg.Done()
		if err := s.Rotate(t.Context()); err != nil {
			t.Error(err)
		}
	}()
	wg.Wait()
}

func TestTokenRefuses(t *testing.T) {
	clk := newClock()
	notStarted := identity.New(identity.Options{Store: openSQLite(t), Issuer: func() string { return issuer }, Now: clk.Now})
	if _, err := notStarted.Token(personClaims); err != identity.ErrNotReady {
		t.Errorf("Token before Start: %v, want ErrNotReady", err)
	}
	s := newSigner(t, openSQLite(t), clk, nil)
	if tok, err := s.Token(identity.Claims{Subject: "u-1"}); err == nil {
		t.Errorf("no audience: got %q", tok)
	}
}
