package bridge

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/oauth2"

	"github.com/spacefix/spacefix/internal/agentproto"
)

// runBridge runs a bridge for srv against g until the test ends; a
// shared sign-in with token shared is saved first unless shared is "".
func runBridge(t *testing.T, g *fakeGateway, srv Server, shared string) *Bridge {
	t.Helper()
	dir := t.TempDir()
	b, err := New(srv, Options{GatewayURL: g.srv.URL, APIKey: fakeAgentKey, TokenDir: dir, KeepAlive: -1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if shared != "" {
		if err := b.saveTokens(&tokenFile{URL: srv.URL, ClientID: "c", AuthURL: "http://127.0.0.1:1/a", TokenURL: "http://127.0.0.1:1/t",
			Token: &oauth2.Token{AccessToken: shared, TokenType: "Bearer"}}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return b
}

func person(id, upstream string) *agentproto.Caller {
	return &agentproto.Caller{KeyID: "app_" + id, Person: &agentproto.Person{ID: id}, UpstreamToken: upstream}
}

// Connect mode: each person's calls go in a session of their own with
// their own token; the shared sign-in lists the tools and serves no
// person; a call without a person is refused with the gateway's sentence.
func TestConnectModeSessionPerPerson(t *testing.T) {
	remote := newFakeRemote(t)
	g := newFakeGateway(t)
	b := runBridge(t, g, Server{Name: "gh", URL: remote.url(), PerPerson: true, Protocol: legacyVersion}, "tok-shared")
	g.waitTool("gh__whoami")

	pp := g.registration().Bridge.PerPerson
	if pp == nil || *pp != (agentproto.PerPerson{Mode: "connect", URL: remote.url()}) {
		t.Errorf("registration's perPerson = %+v, want connect mode at %s", pp, remote.url())
	}
	for _, c := range []struct {
		caller *agentproto.Caller
		want   string
	}{
		{person("1", "tok-alice"), "tok-alice"},
		{person("2", "tok-bob"), "tok-bob"},
		{person("1", "tok-alice-refreshed"), "tok-alice-refreshed"},
		{person("2", "tok-bob"), "tok-bob"},
		{&agentproto.Caller{KeyID: "key_9"}, "error: gh__whoami acts on " + strings.TrimPrefix(remote.srv.URL, "http://") +
			` as each person's own account, and this call comes with an agent key, not a person. Call it through an MCP client signed in with OAuth, or ask the bridge's operator to set "fallback": "shared".`},
	} {
		if got := answerText(g.call("gh__whoami", c.caller)); got != c.want {
			t.Errorf("whoami as %+v = %q, want %q", c.caller.Person, got, c.want)
		}
	}
	if n := b.people.len(); n != 2 {
		t.Errorf("%d people's sessions, want 2", n)
	}
	// Three sessions: the shared one (listing) and one per person, none
	// carrying anyone else's token.
	var got [][]string
	for _, toks := range remote.sessions() {
		got = append(got, toks)
	}
	slices.SortFunc(got, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	want := [][]string{{"tok-alice", "tok-alice-refreshed"}, {"tok-bob"}, {"tok-shared"}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("tokens per session = %q, want %q", got, want)
	}
}

// With "fallback": "shared", a call without a person uses the bridge's
// own sign-in.
func TestConnectModeSharedFallback(t *testing.T) {
	remote := newFakeRemote(t)
	g := newFakeGateway(t)
	runBridge(t, g, Server{Name: "gh", URL: remote.url(), PerPerson: true, Fallback: "shared"}, "tok-shared")
	g.waitTool("gh__whoami")
	if got := answerText(g.call("gh__whoami", &agentproto.Caller{KeyID: "key_9"})); got != "tok-shared" {
		t.Errorf("a key call = %q, want the shared sign-in's token", got)
	}
	if got := answerText(g.call("gh__whoami", person("1", "tok-alice"))); got != "tok-alice" {
		t.Errorf("a person's call = %q, want their own token", got)
	}
}

// A 401 to a person's token ends the call with -32044, which the gateway
// turns into a refresh or a connect link; the next call with a new token
// works in the same session.
func TestConnectModeRefusedToken(t *testing.T) {
	remote := newFakeRemote(t)
	g := newFakeGateway(t)
	runBridge(t, g, Server{Name: "gh", URL: remote.url(), PerPerson: true}, "tok-shared")
	g.waitTool("gh__whoami")
	if got := answerText(g.call("gh__whoami", person("1", "tok-alice"))); got != "tok-alice" {
		t.Fatalf("whoami = %q", got)
	}
	remote.refuseToken("tok-alice-old", -1)
	want := "error -32044: the remote refused the person's token"
	if got := answerText(g.call("gh__whoami", person("1", "tok-alice-old"))); got != want {
		t.Errorf("a refused token: %q, want %q", got, want)
	}
	// A refused token on a person's first call (the session's initialize).
	if got := answerText(g.call("gh__whoami", person("3", "tok-alice-old"))); got != want {
		t.Errorf("a refused token on the first call: %q, want %q", got, want)
	}
	if got := answerText(g.call("gh__whoami", person("1", "tok-alice-new"))); got != "tok-alice-new" {
		t.Errorf("after a refresh: %q, want tok-alice-new", got)
	}
}

// Connect mode lists the tools with one signed-in account: without a
// `bridge login` the bridge does not start, and says what to run.
func TestConnectModeNeedsSignIn(t *testing.T) {
	b, err := New(Server{Name: "gh", URL: "http://127.0.0.1:1/mcp", PerPerson: true}, Options{APIKey: fakeAgentKey, TokenDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	want := "per-person mode lists gh's tools with one signed-in account: run `spacefix bridge login gh` once (any account may list; each call then uses the caller's own)"
	if err := b.Run(context.Background()); err == nil || err.Error() != want {
		t.Errorf("Run = %v, want %q", err, want)
	}
}

// fakeDial opens sessions without a network, counting opens and closes.
type fakeDial struct {
	mu             sync.Mutex
	opened, closed map[string]int
}

func (f *fakeDial) dial(_ context.Context, ps *personSession) (*upstream, func(), error) {
	f.mu.Lock()
	f.opened[ps.person]++
	f.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	return &upstream{ctx: ctx}, func() {
		f.mu.Lock()
		f.closed[ps.person]++
		f.mu.Unlock()
		cancel()
	}, nil
}

// The pool holds at most max sessions: the least recently used one no call
// uses is closed to make room; when every one is busy the call is refused.
// A session idle for 10 minutes is closed.
func TestPersonPoolLimits(t *testing.T) {
	f := &fakeDial{opened: map[string]int{}, closed: map[string]int{}}
	p := newPersonPool(f.dial)
	now := time.Unix(1_000_000, 0)
	p.now = func() time.Time { return now }
	p.max = 3
	ctx := context.Background()
	use := func(person string) {
		t.Helper()
		ps, release, err := p.acquire(ctx, person, "tok-"+person)
		if err != nil {
			t.Fatalf("acquire %s: %v", person, err)
		}
		if ps.bearer() != "tok-"+person {
			t.Errorf("%s's session sends %q", person, ps.bearer())
		}
		release()
		now = now.Add(time.Second)
	}
	for _, who := range []string{"a", "b", "c", "a", "d"} { // d evicts b, the least recently used
		use(who)
	}
	p.mu.Lock()
	closing := &p.closing
	p.mu.Unlock()
	closing.Wait()
	if !maps.Equal(f.opened, map[string]int{"a": 1, "b": 1, "c": 1, "d": 1}) || !maps.Equal(f.closed, map[string]int{"b": 1}) {
		t.Errorf("opened %v, closed %v; want each opened once and b closed", f.opened, f.closed)
	}
	// Busy sessions are never closed to make room.
	var releases []func()
	for _, who := range []string{"a", "c", "d"} {
		_, release, err := p.acquire(ctx, who, "tok-"+who)
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, release)
	}
	if _, _, err := p.acquire(ctx, "e", "tok-e"); err != errPoolFull {
		t.Errorf("a fourth person while three calls run: %v, want %v", err, errPoolFull)
	}
	for _, r := range releases {
		r()
	}
	// Idle for 10 minutes: closed; used within them: kept.
	now = now.Add(9 * time.Minute)
	use("d")
	now = now.Add(time.Minute + time.Second)
	p.sweep()
	closing.Wait()
	if p.len() != 1 || !maps.Equal(f.closed, map[string]int{"a": 1, "b": 1, "c": 1}) {
		t.Errorf("after 10 idle minutes: %d sessions, closed %v; want d alone open", p.len(), f.closed)
	}
	p.shut()
	if f.closed["d"] != 1 {
		t.Errorf("shut left d open")
	}
	if _, _, err := p.acquire(ctx, "a", "tok-a"); err == nil {
		t.Errorf("a shut pool opened a session")
	}
}

// A server's request or log message belongs to the call in flight on its
// own session: one person's session never reaches another
// person's call.
func TestRelayStaysInItsSession(t *testing.T) {
	b, err := New(Server{Name: "gh", URL: "https://h/mcp", PerPerson: true}, Options{APIKey: fakeAgentKey})
	if err != nil {
		t.Fatal(err)
	}
	alice, bob, carol := new(mcp.ClientSession), new(mcp.ClientSession), new(mcp.ClientSession)
	type key struct{}
	actx := context.WithValue(context.Background(), key{}, "alice")
	bctx := context.WithValue(context.Background(), key{}, "bob")
	_, doneA := b.watchProgress(actx, alice)
	defer doneA()
	_, doneB := b.watchProgress(bctx, bob)
	defer doneB()
	for cs, want := range map[*mcp.ClientSession]string{alice: "alice", bob: "bob"} {
		ctx, err := b.soleCall(cs)
		if err != nil || ctx.Value(key{}) != want {
			t.Errorf("the call on %s's session: %v, %v", want, ctx, err)
		}
	}
	if _, err := b.soleCall(carol); err == nil || !b.idle(carol) {
		t.Errorf("carol's session, with no call in flight, found one: %v", err)
	}
}

// A person's token goes to the remote's origin only: not in a request to
// another origin, not after a redirect away, and it replaces a configured
// Authorization header.
func TestPersonTokenStaysWithTheRemote(t *testing.T) {
	var mu sync.Mutex
	var elsewhereSaw []string
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		elsewhereSaw = append(elsewhereSaw, r.Header.Get("Authorization"))
		mu.Unlock()
	}))
	defer elsewhere.Close()
	remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/away" {
			http.Redirect(w, r, elsewhere.URL+"/x", http.StatusTemporaryRedirect)
			return
		}
		fmt.Fprint(w, r.Header.Get("Authorization"))
	}))
	defer remote.Close()
	b, err := New(Server{Name: "gh", URL: remote.URL + "/mcp", PerPerson: true, Headers: map[string]string{"Authorization": "Bearer configured", "X-Team": "t"}},
		Options{APIKey: fakeAgentKey})
	if err != nil {
		t.Fatal(err)
	}
	ps := &personSession{person: "1"}
	ps.setToken("tok-alice")
	hc := b.personHTTPClient(ps, remote.URL)
	get := func(u string) (int, string) {
		resp, err := hc.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if _, body := get(remote.URL + "/mcp"); body != "Bearer tok-alice" {
		t.Errorf("the remote saw %q, want the person's token", body)
	}
	if status, _ := get(remote.URL + "/away"); status != http.StatusTemporaryRedirect {
		t.Errorf("a redirect away: status %d, want the 307 itself, not followed", status)
	}
	get(elsewhere.URL + "/direct")
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(elsewhereSaw, []string{""}) {
		t.Errorf("another origin saw Authorization %q, want one request without it", elsewhereSaw)
	}
}
