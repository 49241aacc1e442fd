package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Leeway is the clock skew allowed on a token's exp (and nbf). go-jose's
// Claims.Validate allows a minute, which would accept a token that expired
// 35 seconds ago; a gateway's token lives 5 minutes at most, often only as
// long as the call may take, so a few seconds are enough.
const Leeway = 5 * time.Second

// Caller is what an identity token says about who is calling.
type Caller struct {
	jwt.Claims
	Email    string `json:"email"`
	ClientID string `json:"client_id"`
	Scope    string `json:"scope"`
	Project  string `json:"project"`
}

// Verifier checks Spacefix identity tokens as a provider's backend does.
// It keeps the gateway's JWKS and fetches it again for a key id it does not
// know (a rotation), at most once a minute.
type Verifier struct {
	Issuer   string // the gateway's public URL: the tokens' iss
	Audience string // the agent key's identity audience

	mu      sync.Mutex
	keys    jose.JSONWebKeySet
	fetched time.Time
}

// Verify checks token's signature (ES256 only), iss, aud and exp at now.
func (v *Verifier) Verify(ctx context.Context, token string, now time.Time) (Caller, error) {
	var c Caller
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		return c, err
	}
	keys, err := v.keysFor(ctx, tok.Headers[0].KeyID, now)
	if err != nil {
		return c, err
	}
	if err := tok.Claims(keys, &c); err != nil {
		return c, err
	}
	want := jwt.Expected{Issuer: strings.TrimRight(v.Issuer, "/"), AnyAudience: jwt.Audience{v.Audience}, Time: now}
	return c, c.ValidateWithLeeway(want, Leeway)
}

// keysFor returns the key set, fetched again first when it lacks kid.
func (v *Verifier) keysFor(ctx context.Context, kid string, now time.Time) (jose.JSONWebKeySet, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.keys.Key(kid)) > 0 || now.Sub(v.fetched) < time.Minute {
		return v.keys, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(v.Issuer, "/")+"/.well-known/jwks.json", nil)
	if err != nil {
		return v.keys, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return v.keys, fmt.Errorf("fetch the gateway's keys: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return v.keys, errors.New("fetch the gateway's keys: " + resp.Status)
	}
	var keys jose.JSONWebKeySet
	if err := json.NewDecoder(resp.Body).Decode(&keys); err != nil {
		return v.keys, fmt.Errorf("fetch the gateway's keys: %w", err)
	}
	v.keys, v.fetched = keys, now
	return keys, nil
}
