package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/gateway"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/users"
)

// The identity token (issue 27, docs/identity.md): an agent key with an
// identity audience gets, with every call, a JWT the gateway signs, which
// anyone verifies with a JOSE library that is not ours (go-jose here)
// against /.well-known/jwks.json.

const idAudience = "https://orders.example.com"

// idSeen is what the test agent's handler reports of core.CallFrom.
type idSeen struct {
	KeyID         string
	Person        *core.Person
	App           *core.App
	Scopes        []string
	IdentityToken string
}

// idAgent offers idtok_whoami, which answers what its handler saw.
func idAgent(t *testing.T) func(a *core.Agent) {
	return func(a *core.Agent) {
		must(t, core.AddTool(a, "idtok_whoami", "Who is calling.", func(ctx context.Context, _ struct{}) (string, error) {
			c, _ := core.CallFrom(ctx)
			b, _ := json.Marshal(idSeen{c.KeyID, c.Person, c.App, c.Scopes, c.IdentityToken})
			return string(b), nil
		}, core.ReadOnly()))
		must(t, core.AddTool(a, "idtok_ping", "Answers ok.", func(ctx context.Context, _ struct{}) (string, error) {
			return "ok", nil
		}, core.ReadOnly()))
	}
}

// idWhoami calls idtok_whoami on cs and returns what the handler saw.
func idWhoami(t *testing.T, cs *mcp.ClientSession) idSeen {
	t.Helper()
	var s idSeen
	if err := json.Unmarshal([]byte(text(call(t, cs, "idtok_whoami", map[string]any{}))), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// idClaims is the identity token's payload.
type idClaims struct {
	jwt.Claims
	Email    string `json:"email"`
	Name     string `json:"name"`
	ClientID string `json:"client_id"`
	Scope    string `json:"scope"`
	Project  string `json:"project"`
}

// jwksOf fetches the JWKS a gateway publishes at base.
func jwksOf(t *testing.T, base string) (jose.JSONWebKeySet, []byte) {
	t.Helper()
	resp, err := http.Get(base + gateway.JWKSPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Cache-Control") != "public, max-age=300" {
		t.Fatalf("GET %s = %s, Cache-Control %q", gateway.JWKSPath, resp.Status, resp.Header.Get("Cache-Control"))
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil || len(set.Keys) == 0 {
		t.Fatalf("JWKS %s: %v", body, err)
	}
	return set, body
}

// verifyToken checks token as a provider's backend would: the signature
// against the JWKS, then iss, aud and exp.
func verifyToken(set jose.JSONWebKeySet, token, iss string) (idClaims, error) {
	var c idClaims
	parsed, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		return c, err
	}
	if err := parsed.Claims(set, &c); err != nil {
		return c, err
	}
	return c, c.Validate(jwt.Expected{Issuer: iss, AnyAudience: jwt.Audience{idAudience}, Time: time.Now()})
}

// mustVerify is verifyToken that fails the test.
func mustVerify(t *testing.T, set jose.JSONWebKeySet, token, iss string) idClaims {
	t.Helper()
	c, err := verifyToken(set, token, iss)
	if err != nil {
		t.Fatalf("the identity token does not verify: %v\n%s", err, token)
	}
	return c
}

// agentKeyID returns the id of e's agent key.
func (e *env) agentKeyID() string {
	e.t.Helper()
	ks, err := e.store.Keys(context.Background(), e.project.ID)
	must(e.t, err)
	for _, k := range ks {
		if k.Kind == store.KindAgent && !k.Revoked() {
			return k.ID
		}
	}
	e.t.Fatal("no agent key")
	return ""
}

// setAudience sets the agent key's identity audience through the admin
// API, as the dashboard's Edit dialog does.
func setAudience(t *testing.T, e *env, keyID, aud string) {
	t.Helper()
	_, token, err := users.CreateAPIToken(context.Background(), e.store, "e2e-identity", 0)
	must(t, err)
	body, _ := json.Marshal(map[string]string{"identityAudience": aud})
	req, _ := http.NewRequest("PATCH", e.url+"/api/projects/"+e.project.Name+"/agent-keys/"+keyID, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PATCH agent key = %s %s", resp.Status, b)
	}
}

// tokenOf calls idtok_whoami on cs until its handler gets an identity
// token (the setting reaches the gateway's controls within a second).
func tokenOf(t *testing.T, cs *mcp.ClientSession) idSeen {
	t.Helper()
	var s idSeen
	waitFor(t, "a call with an identity token", func() bool {
		s = idWhoami(t, cs)
		return s.IdentityToken != ""
	})
	return s
}

// alterOneByte returns token with one byte of part (0 header, 1 payload,
// 2 signature) changed to another base64url character.
func alterOneByte(token string, part int) string {
	parts := strings.Split(token, ".")
	b := []byte(parts[part])
	i := len(b) / 2
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	parts[part] = string(b)
	return strings.Join(parts, ".")
}

// TestIdentityToken: a person signs in through OAuth (the real flow, with
// consent) and calls a tool; the handler sees the person, the app and the
// scopes, and once the agent key has an identity audience, a token that
// verifies with go-jose against the gateway's JWKS (signature, iss, aud,
// exp) and says the same; a token altered by one byte fails. With a client
// key the handler sees the key and no person, and the token's subject is
// the key. Before the key asks, no call carries a token.
func TestIdentityToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startAgent(core.Options{}, idAgent(t))
	p := newPerson(t, e, "ada@example.com")
	person, err := p.oauthClient("2025-11-25")
	if err != nil {
		t.Fatalf("connect with OAuth: %v", err)
	}
	keyCS := e.connect("2026-07-28", e.clientKey, nil)

	if s := idWhoami(t, person); s.IdentityToken != "" {
		t.Errorf("a call to a key that asked for no identity token carries one: %q", s.IdentityToken)
	}
	setAudience(t, e, e.agentKeyID(), idAudience)

	u, _, err := e.store.UserByEmail(context.Background(), "ada@example.com")
	must(t, err)
	seen := tokenOf(t, person)
	if seen.Person == nil || seen.Person.ID != strconv.FormatInt(u.ID, 10) || seen.Person.Email != "ada@example.com" {
		t.Errorf("handler saw person %+v; want ada (%d)", seen.Person, u.ID)
	}
	if seen.App == nil || seen.App.Name != "e2e-app" || seen.App.ID == "" {
		t.Errorf("handler saw app %+v; want e2e-app", seen.App)
	}
	if diff := cmp.Diff([]string{"mcp:read", "mcp:write"}, seen.Scopes); diff != "" {
		t.Errorf("handler saw scopes (-want +got):\n%s", diff)
	}

	set, _ := jwksOf(t, e.url)
	start := time.Now()
	c := mustVerify(t, set, seen.IdentityToken, e.url)
	want := idClaims{Email: "ada@example.com", ClientID: seen.App.ID, Scope: "mcp:read mcp:write", Project: e.project.Name}
	want.Subject = seen.Person.ID
	got := c
	got.Claims = jwt.Claims{Subject: c.Subject}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("token claims (-want +got):\n%s", diff)
	}
	// 5 minutes, whatever the call's own limit (the project's call wait,
	// 30 s by default): the token asserts the caller, not the call.
	if exp := c.Expiry.Time(); exp.After(start.Add(5*time.Minute)) || exp.Before(start.Add(5*time.Minute-time.Minute-3*time.Second)) {
		t.Errorf("token expires at %v; want 5 minutes after it was signed, and at least a minute left when a call gets it (now %v)", exp, start)
	}
	if c.ID == "" || c.IssuedAt == nil {
		t.Errorf("token lacks jti or iat: %+v", c.Claims)
	}
	// The person's next call gets the same token, reused: no signature.
	if again := idWhoami(t, person).IdentityToken; again != seen.IdentityToken {
		t.Errorf("the person's next call got another token; want the same one until a minute before it expires")
	}

	for part, name := range []string{"header", "payload", "signature"} {
		if _, err := verifyToken(set, alterOneByte(seen.IdentityToken, part), e.url); err == nil {
			t.Errorf("a token with one byte of its %s altered verifies", name)
		}
	}
	if _, err := verifyToken(set, seen.IdentityToken, "https://elsewhere.example.com"); err == nil {
		t.Error("the token verifies for another issuer")
	}

	ks := idWhoami(t, keyCS)
	if ks.Person != nil || ks.App != nil || !strings.HasPrefix(ks.KeyID, "key_") {
		t.Errorf("a client key's call: handler saw key %q, person %+v, app %+v; want the key and no person", ks.KeyID, ks.Person, ks.App)
	}
	kc := mustVerify(t, set, ks.IdentityToken, e.url)
	if kc.Subject != "key:"+ks.KeyID || kc.Email != "" || kc.ClientID != "" || kc.Project != e.project.Name {
		t.Errorf("a client key's token = %+v; want sub key:%s and no person", kc, ks.KeyID)
	}
	if kc.ID == c.ID {
		t.Errorf("two calls share the jti %q", c.ID)
	}

	// Turned off: calls carry none again.
	setAudience(t, e, e.agentKeyID(), "")
	waitFor(t, "calls without a token", func() bool { return idWhoami(t, keyCS).IdentityToken == "" })
}

// TestIdentityTokenRotation: after an admin rotates the signing key, a
// token signed before and one signed after both verify against the JWKS
// (the old key stays published until its last token has expired).
func TestIdentityTokenRotation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startAgent(core.Options{}, idAgent(t))
	must(t, e.store.SetKeyIdentityAudience(context.Background(), e.agentKeyID(), idAudience))
	cs := e.connect("2025-11-25", e.clientKey, nil)
	before := tokenOf(t, cs).IdentityToken
	must(t, e.gw.Identity().Rotate(context.Background()))
	after := idWhoami(t, cs).IdentityToken
	if kid(t, before) == kid(t, after) {
		t.Fatalf("after the rotation the token is signed with the same key %q", kid(t, after))
	}
	set, _ := jwksOf(t, e.url)
	mustVerify(t, set, before, e.url)
	mustVerify(t, set, after, e.url)
}

// kid is the key id in a token's header.
func kid(t *testing.T, token string) string {
	t.Helper()
	parsed, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil || len(parsed.Headers) != 1 {
		t.Fatalf("parse %q: %v", token, err)
	}
	return parsed.Headers[0].KeyID
}

// TestIdentityTokenCluster: two gateways on PostgreSQL and NATS publish
// the same JWKS and sign with the same current key; a token minted on
// gateway A (the call came to A) verifies with B's JWKS, and one minted on
// B (the call came to B and was relayed to the agent on A) with A's.
func TestIdentityTokenCluster(t *testing.T) {
	t.Parallel()
	var pg string
	e := newEnv(t, onPostgres(&pg), withConfig(func(c *gateway.Config) {
		c.Bus, c.BusHeartbeat = startNATS(t), 250*time.Millisecond
		c.PublicURL, c.AllowedHosts = "https://mcp.example.com", []string{"*"}
	}))
	a := "http://" + e.gw.Addr()
	e.url = a
	e.startAgent(core.Options{}, idAgent(t))
	sib := e.sibling()
	b := "http://" + sib.gw.Addr()
	sib.url = b
	must(t, e.store.SetKeyIdentityAudience(context.Background(), e.agentKeyID(), idAudience))

	setA, rawA := jwksOf(t, a)
	_, rawB := jwksOf(t, b)
	if !bytes.Equal(rawA, rawB) {
		t.Errorf("the gateways publish different JWKS:\nA %s\nB %s", rawA, rawB)
	}
	if e.gw.Identity().KeyID() != sib.gw.Identity().KeyID() {
		t.Errorf("the gateways sign with different keys: %q and %q", e.gw.Identity().KeyID(), sib.gw.Identity().KeyID())
	}

	onA := tokenOf(t, e.connect("2025-11-25", e.clientKey, nil)).IdentityToken
	csB := sib.connect("2025-11-25", e.clientKey, nil)
	waitFor(t, "gateway B to see the agent on A", func() bool {
		return strings.Contains(strings.Join(toolNames(t, csB), ","), "idtok_whoami")
	})
	onB := tokenOf(t, csB).IdentityToken
	setB, _ := jwksOf(t, b)
	ca := mustVerify(t, setB, onA, "https://mcp.example.com")
	cb := mustVerify(t, setA, onB, "https://mcp.example.com")
	if kid(t, onA) != kid(t, onB) || ca.Subject != cb.Subject {
		t.Errorf("tokens from A and B: kid %q vs %q, sub %q vs %q; want the same key and caller", kid(t, onA), kid(t, onB), ca.Subject, cb.Subject)
	}
}

var identityBench = flag.Bool("identity-bench", false, "measure the CPU a call spends with and without an identity token, at 16 callers")

// TestIdentityCost measures what an identity token adds to a call: 16
// callers (one go-sdk session each) call a tool through a real gateway to
// a real agent, with the agent key's audience off and on, in alternating
// rounds; it prints the process CPU (gateway, agent and clients, all in
// this process) per call and calls/s of each (docs/benchmarks.md). The
// tool answers "ok", so the difference is the token's: the signature and
// its ~600 bytes in the agent's call message.
func TestIdentityCost(t *testing.T) {
	if !*identityBench {
		return
	}
	e := newEnv(t)
	e.startAgent(core.Options{}, idAgent(t))
	keyID := e.agentKeyID()
	const callers, perRound, rounds = 16, 4000, 3
	sessions := make([]*mcp.ClientSession, callers)
	for i := range sessions {
		sessions[i] = e.connect("2025-11-25", e.clientKey, nil)
	}
	run := func() (cpu time.Duration, wall time.Duration) {
		var next atomic.Int64
		var wg sync.WaitGroup
		c0, w0 := processCPU(), time.Now()
		for _, cs := range sessions {
			wg.Go(func() {
				for next.Add(1) <= perRound {
					if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "idtok_ping", Arguments: map[string]any{}}); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		return processCPU() - c0, time.Since(w0)
	}
	for _, aud := range []string{"", idAudience} { // warm both
		must(t, e.store.SetKeyIdentityAudience(context.Background(), keyID, aud))
		waitFor(t, "the setting to apply", func() bool { return (idWhoami(t, sessions[0]).IdentityToken != "") == (aud != "") })
		run()
	}
	for r := range rounds {
		for _, aud := range []string{"", idAudience} {
			must(t, e.store.SetKeyIdentityAudience(context.Background(), keyID, aud))
			waitFor(t, "the setting to apply", func() bool { return (idWhoami(t, sessions[0]).IdentityToken != "") == (aud != "") })
			cpu, wall := run()
			t.Logf("round %d audience %-28q %6.1f µs CPU/call  %6.0f calls/s", r+1, aud, float64(cpu.Microseconds())/perRound, perRound/wall.Seconds())
		}
	}
}

// processCPU is the CPU time this process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
