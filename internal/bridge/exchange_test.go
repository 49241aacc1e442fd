package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/spacefix/spacefix/internal/agentproto"
)

// fakeAS is a token endpoint: RFC 8693 exchanges (the access token
// "up-<subject token>-<n>") and client_credentials ("cc-<n>"), for the
// client "bridge" with the secret "tx-secret".
type fakeAS struct {
	srv *httptest.Server
	ttl int // expires_in

	mu        sync.Mutex
	forms     []url.Values
	exchanges map[string]int // by subject token
	cc        int
	failWith  string        // an OAuth error code to answer every exchange with
	hold      chan struct{} // when set, an exchange waits for it to close
	arrived   chan struct{} // told of each exchange as it arrives
}

func newFakeAS(t *testing.T) *fakeAS {
	a := &fakeAS{ttl: 3600, exchanges: map[string]int{}, arrived: make(chan struct{}, 64)}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		id, secret, ok := r.BasicAuth()
		if !ok || id != "bridge" || secret != "tx-secret" || r.ParseForm() != nil {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":"invalid_client"}`)
			return
		}
		a.mu.Lock()
		a.forms = append(a.forms, r.PostForm)
		fail, hold, ttl := a.failWith, a.hold, a.ttl
		a.mu.Unlock()
		if r.PostForm.Get("grant_type") == "client_credentials" {
			a.mu.Lock()
			a.cc++
			n := a.cc
			a.mu.Unlock()
			fmt.Fprintf(w, `{"access_token":"cc-%d","token_type":"Bearer","expires_in":%d}`, n, ttl)
			return
		}
		a.arrived <- struct{}{}
		if hold != nil {
			<-hold
		}
		if fail != "" {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"error":%q,"error_description":"subject %s is not known here"}`, fail, r.PostForm.Get("subject_token"))
			return
		}
		subject := r.PostForm.Get("subject_token")
		a.mu.Lock()
		a.exchanges[subject]++
		n := a.exchanges[subject]
		a.mu.Unlock()
		json.NewEncoder(w).Encode(map[string]any{"access_token": fmt.Sprintf("up-%s-%d", subject, n), "token_type": "Bearer",
			"issued_token_type": tokenTypeAccess, "expires_in": ttl})
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *fakeAS) exchangeCount(subject string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.exchanges[subject]
}

func (a *fakeAS) config() TokenExchange {
	return TokenExchange{TokenEndpoint: a.srv.URL + "/token", ClientID: "bridge", ClientSecretEnv: "TX_SECRET", ClientSecret: "tx-secret",
		Audience: "jira", Scope: "read write"}
}

// One exchange is a form POST with exactly the RFC 8693 fields and the
// client's Basic credentials; its token is kept per person until 30 s
// before it expires.
func TestExchangeFormAndCache(t *testing.T) {
	as := newFakeAS(t)
	as.ttl = 60
	x := newExchanger(as.config(), http.DefaultTransport)
	now := time.Unix(1_000_000, 0)
	x.now = func() time.Time { return now }
	ctx := context.Background()

	tok, err := x.token(ctx, "1", "id-alice")
	if err != nil || tok != "up-id-alice-1" {
		t.Fatalf("token = %q, %v", tok, err)
	}
	want := url.Values{
		"grant_type":           {"urn:ietf:params:oauth:grant-type:token-exchange"},
		"subject_token":        {"id-alice"},
		"subject_token_type":   {"urn:ietf:params:oauth:token-type:jwt"},
		"requested_token_type": {"urn:ietf:params:oauth:token-type:access_token"},
		"audience":             {"jira"},
		"scope":                {"read write"},
	}
	if d := cmp.Diff(want, as.forms[0]); d != "" {
		t.Errorf("the exchange's form (-want +got):\n%s", d)
	}
	// A cache hit, until 30 s before expiry; a new identity token of the
	// same person does not matter meanwhile.
	now = now.Add(29 * time.Second)
	if tok, _ := x.token(ctx, "1", "id-alice"); tok != "up-id-alice-1" || as.exchangeCount("id-alice") != 1 {
		t.Errorf("within the token's life: %q after %d exchanges, want the cached one after 1", tok, as.exchangeCount("id-alice"))
	}
	// Another person gets their own.
	if tok, _ := x.token(ctx, "2", "id-bob"); tok != "up-id-bob-1" {
		t.Errorf("bob's token = %q", tok)
	}
	now = now.Add(2 * time.Second) // 31 s: within 30 s of expiry
	if tok, _ := x.token(ctx, "1", "id-alice"); tok != "up-id-alice-2" {
		t.Errorf("30 s before expiry: %q, want a new exchange", tok)
	}
	// drop forgets the refused token only.
	x.drop("1", "up-id-alice-1")
	if tok, _ := x.token(ctx, "1", "id-alice"); tok != "up-id-alice-2" {
		t.Errorf("dropping a stale token dropped the current one: %q", tok)
	}
	x.drop("1", "up-id-alice-2")
	if tok, _ := x.token(ctx, "1", "id-alice"); tok != "up-id-alice-3" {
		t.Errorf("after drop: %q, want a new exchange", tok)
	}
}

// Callers of one person who arrive while an exchange runs wait for it:
// one exchange for twenty calls.
func TestExchangeOneAtATime(t *testing.T) {
	as := newFakeAS(t)
	as.hold = make(chan struct{})
	x := newExchanger(as.config(), http.DefaultTransport)
	ctx := context.Background()
	results := make(chan string, 20)
	get := func() {
		tok, err := x.token(ctx, "1", "id-alice")
		if err != nil {
			tok = err.Error()
		}
		results <- tok
	}
	go get()
	select {
	case <-as.arrived:
	case <-time.After(waitFor):
		t.Fatal("no exchange arrived")
	}
	for range 19 {
		go get()
	}
	// The 19 wait on the exchange in flight; poll until they all do.
	deadline := time.Now().Add(waitFor)
	for {
		x.mu.Lock()
		joined := x.joined
		x.mu.Unlock()
		if joined == 19 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d callers joined the exchange in flight, want 19", joined)
		}
		time.Sleep(time.Millisecond)
	}
	close(as.hold)
	for range 20 {
		select {
		case tok := <-results:
			if tok != "up-id-alice-1" {
				t.Errorf("a caller got %q", tok)
			}
		case <-time.After(waitFor):
			t.Fatal("a caller did not get a token")
		}
	}
	if n := as.exchangeCount("id-alice"); n != 1 {
		t.Errorf("%d exchanges for 20 concurrent calls, want 1", n)
	}
}

// A refused exchange names the endpoint's host and the OAuth error code,
// nothing of the answer's body or the tokens.
func TestExchangeError(t *testing.T) {
	as := newFakeAS(t)
	as.failWith = "invalid_grant"
	x := newExchanger(as.config(), http.DefaultTransport)
	_, err := x.token(context.Background(), "1", "id-alice-secret")
	host := strings.TrimPrefix(as.srv.URL, "http://")
	if want := "The token exchange at " + host + " failed: invalid_grant."; err == nil || err.Error() != want {
		t.Errorf("error = %v, want %q", err, want)
	}
	bad := as.config()
	bad.ClientSecret = "wrong"
	_, err = newExchanger(bad, http.DefaultTransport).token(context.Background(), "1", "id-alice")
	if want := "The token exchange at " + host + " failed: invalid_client."; err == nil || err.Error() != want {
		t.Errorf("with a wrong secret: %v, want %q", err, want)
	}
}

// Exchange mode through the bridge: each person's calls carry the token
// exchanged for their identity token, exchanged once while it lasts; a 401
// drops it and the call is retried once with a new one; a second 401 ends
// the call; the tools are listed with a client_credentials token.
func TestExchangeModeThroughTheBridge(t *testing.T) {
	as := newFakeAS(t)
	remote := newFakeRemote(t)
	g := newFakeGateway(t)
	te := as.config()
	runBridge(t, g, Server{Name: "jira", URL: remote.url(), TokenExchange: &te, Protocol: legacyVersion}, "")
	g.waitTool("jira__whoami")
	if pp := g.registration().Bridge.PerPerson; pp == nil || *pp != (agentproto.PerPerson{Mode: "exchange"}) {
		t.Errorf("registration's perPerson = %+v, want exchange mode", pp)
	}
	remoteHost := strings.TrimPrefix(remote.srv.URL, "http://")
	asHost := strings.TrimPrefix(as.srv.URL, "http://")
	who := func(id, identity string) *agentproto.Caller {
		return &agentproto.Caller{KeyID: "app_" + id, Person: &agentproto.Person{ID: id}, IdentityToken: identity}
	}
	steps := []struct {
		name   string
		before func()
		caller *agentproto.Caller
		want   string
	}{
		{"alice", nil, who("1", "id-alice"), "up-id-alice-1"},
		{"alice again: cached", nil, who("1", "id-alice"), "up-id-alice-1"},
		{"bob", nil, who("2", "id-bob"), "up-id-bob-1"},
		{"alice's token refused once", func() { remote.refuseToken("up-id-alice-1", 1) }, who("1", "id-alice"), "up-id-alice-2"},
		{"carol's first token refused at the session's start", func() { remote.refuseToken("up-id-carol-1", 1) }, who("3", "id-carol"), "up-id-carol-2"},
		{"dave refused twice", func() { remote.refuseToken("up-id-dave-1", -1); remote.refuseToken("up-id-dave-2", -1) }, who("4", "id-dave"),
			"error: " + remoteHost + " refused the token the exchange at " + asHost + " gave for this person (HTTP 401), twice."},
		{"no identity token", nil, who("5", ""),
			"error: jira__whoami acts on " + remoteHost + " as each person's own account through a token exchange, and the gateway sent no identity token with this call: the bridge's agent key needs an identity audience: spacefix keys set KEY_ID --identity-audience AUD"},
		{"a key call", nil, &agentproto.Caller{KeyID: "key_9"},
			"error: jira__whoami acts on " + remoteHost + ` as each person's own account, and this call comes with an agent key, not a person. Call it through an MCP client signed in with OAuth, or ask the bridge's operator to set "fallback": "shared".`},
	}
	for _, s := range steps {
		if s.before != nil {
			s.before()
		}
		if got := answerText(g.call("jira__whoami", s.caller)); got != s.want {
			t.Errorf("%s: %q, want %q", s.name, got, s.want)
		}
	}
	for subject, n := range map[string]int{"id-alice": 2, "id-bob": 1, "id-carol": 2, "id-dave": 2} {
		if got := as.exchangeCount(subject); got != n {
			t.Errorf("%d exchanges of %s, want %d", got, subject, n)
		}
	}
	// The shared session (listing) used the client_credentials token; no
	// session carried two people's tokens.
	for sid, toks := range remote.sessions() {
		owner := ""
		for _, tok := range toks {
			o := strings.SplitN(strings.TrimPrefix(tok, "up-"), "-", 3)
			p := tok
			if len(o) == 3 {
				p = o[1]
			}
			if owner != "" && p != owner {
				t.Errorf("session %s carried %q", sid, toks)
			}
			owner = p
		}
	}
	if !slices.ContainsFunc(mapsValues(remote.sessions()), func(toks []string) bool { return len(toks) == 1 && toks[0] == "cc-1" }) {
		t.Errorf("no session listed with the client_credentials token: %q", remote.sessions())
	}
}

func mapsValues(m map[string][]string) [][]string {
	var out [][]string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
