package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// The backend refuses a token that expired more than Leeway ago: go-jose's
// default minute would accept one 35 seconds past its exp.
func TestVerifyLeeway(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: "k1"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	v := &Verifier{Issuer: "https://gw.example.com", Audience: "https://orders.example.com",
		keys: jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "ES256"}}}, fetched: now}
	token := func(aud string, expired time.Duration) string {
		c := Caller{Claims: jwt.Claims{Issuer: "https://gw.example.com", Subject: "key:key_1", Audience: jwt.Audience{aud},
			IssuedAt: jwt.NewNumericDate(now.Add(-expired - time.Minute)), Expiry: jwt.NewNumericDate(now.Add(-expired))}, Project: "default"}
		s, err := jwt.Signed(signer).Claims(c).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, c := range []struct {
		name, token, err string
	}{
		{"valid for 30 s more", token("https://orders.example.com", -30*time.Second), ""},
		{"expired 3 s ago, within the leeway", token("https://orders.example.com", 3*time.Second), ""},
		{"expired 6 s ago", token("https://orders.example.com", 6*time.Second), "token is expired (exp)"},
		{"expired 35 s ago", token("https://orders.example.com", 35*time.Second), "token is expired (exp)"},
		{"for another audience", token("https://elsewhere.example.com", -30*time.Second), "invalid audience claim (aud)"},
	} {
		caller, err := v.Verify(context.Background(), c.token, now)
		switch {
		case c.err == "" && (err != nil || caller.Subject != "key:key_1" || caller.Project != "default"):
			t.Errorf("%s: %v, %+v; want it accepted", c.name, err, caller)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: %v; want refused: %s", c.name, err, c.err)
		}
	}
}
