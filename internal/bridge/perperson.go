package bridge

// Per-person remotes: each caller acts as their own account at the remote
// server. The bridge keeps one MCP session with the server per person,
// whose requests carry that person's token and no one else's: in connect
// mode the token the gateway sends with the call (Caller.UpstreamToken),
// in exchange mode the one the bridge exchanged the call's identity token
// for (exchange.go). Listing the server's tools, resources and prompts
// uses the shared session (the `bridge login` sign-in).

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/oauth2"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/agentproto"
)

// Bounds of the per-person sessions.
const (
	maxPersonSessions = 256
	personIdle        = 10 * time.Minute
)

// errUpstreamUnauthorized says the remote answered a person's request with
// HTTP 401: it refused the person's token and did nothing.
var errUpstreamUnauthorized = errors.New("the remote refused the person's token")

// unauthorized reports whether err is the remote's 401 to a person's token.
func unauthorized(err error) bool { return errors.Is(err, errUpstreamUnauthorized) }

// refusedToken ends a connect-mode call whose token the remote refused:
// the gateway refreshes the person's account and delivers the call again,
// or asks the person to connect again. No client sees it.
func refusedToken() error {
	return &core.ProtocolError{Code: agentproto.CodeUpstreamUnauthorized, Message: errUpstreamUnauthorized.Error()}
}

// remoteHost is the remote's host, as the people's sentences name it.
func (s Server) remoteHost() string {
	u, err := url.Parse(s.URL)
	if err != nil {
		return "the remote server"
	}
	return u.Host
}

// refusal is what a call without a person gets when the server has no
// shared fallback: the gateway's sentence, word for word.
func (b *Bridge) refusal(tool string) error {
	return fmt.Errorf(`%s acts on %s as each person's own account, and this call comes with an agent key, not a person. Call it through an MCP client signed in with OAuth, or ask the bridge's operator to set "fallback": "shared".`,
		tool, b.srv.remoteHost())
}

// checkPerPerson fails the start of a connect-mode bridge without a
// `bridge login` sign-in: listing the remote's tools needs one account.
func (b *Bridge) checkPerPerson() error {
	if b.srv.Mode() != ModeConnect {
		return nil
	}
	f, err := b.loadTokens()
	if err != nil {
		return err
	}
	if f == nil {
		return fmt.Errorf("per-person mode lists %s's tools with one signed-in account: run `spacefix bridge login %s` once (any account may list; each call then uses the caller's own)",
			b.srv.Name, b.srv.Name)
	}
	return nil
}

// via runs f on the session that serves the call ctx carries: the shared
// one, or the person's own. f returns its error as callError words it.
func (b *Bridge) via(ctx context.Context, shared *upstream, f func(*upstream) error) error {
	mode := b.srv.Mode()
	if mode == ModeShared {
		return f(shared)
	}
	c, _ := core.CallFrom(ctx)
	if c.Person == nil || c.Person.ID == "" {
		if b.srv.Fallback == agentproto.FallbackShared {
			return f(shared)
		}
		return b.refusal(c.Tool)
	}
	person := c.Person.ID
	if mode == ModeConnect {
		if c.UpstreamToken == "" {
			return refusedToken() // a gateway that sent none: it connects the person first
		}
		err := b.onPersonSession(ctx, person, c.UpstreamToken, f)
		if unauthorized(err) {
			return refusedToken()
		}
		return err
	}
	// Exchange mode.
	if c.IdentityToken == "" {
		return fmt.Errorf("%s acts on %s as each person's own account through a token exchange, and the gateway sent no identity token with this call: the bridge's agent key needs an identity audience: spacefix keys set KEY_ID --identity-audience AUD",
			c.Tool, b.srv.remoteHost())
	}
	for attempt := 0; ; attempt++ {
		tok, err := b.exchange.token(ctx, person, c.IdentityToken)
		if err != nil {
			return err
		}
		err = b.onPersonSession(ctx, person, tok, f)
		if !unauthorized(err) {
			return err
		}
		b.exchange.drop(person, tok)
		if attempt == 1 {
			return fmt.Errorf("%s refused the token the exchange at %s gave for this person (HTTP 401), twice.", b.srv.remoteHost(), b.exchange.host())
		}
		b.log.Info("bridge: the remote refused a person's exchanged token; exchanging again", "person", person)
	}
}

// onPersonSession runs f on person's session, sending token.
func (b *Bridge) onPersonSession(ctx context.Context, person, token string, f func(*upstream) error) error {
	ps, release, err := b.people.acquire(ctx, person, token)
	if err != nil {
		return err
	}
	defer release()
	return f(ps.up)
}

// personSession is one person's session with the remote.
type personSession struct {
	person string
	ready  chan struct{} // closed once dialled (up or err set)
	up     *upstream
	err    error
	close  func()

	// Guarded by the pool's mu.
	busy     int           // calls using it
	lastUsed time.Time     // when the last call ended (or the first began)
	elem     *list.Element // in the pool's LRU list

	tokMu sync.Mutex
	token string // the bearer of its requests: the latest call's
}

func (ps *personSession) setToken(t string) {
	ps.tokMu.Lock()
	ps.token = t
	ps.tokMu.Unlock()
}

func (ps *personSession) bearer() string {
	ps.tokMu.Lock()
	defer ps.tokMu.Unlock()
	return ps.token
}

// gone reports whether the session was dialled and has ended since.
func (ps *personSession) gone() bool {
	select {
	case <-ps.ready:
		return ps.err != nil || ps.up.ctx.Err() != nil
	default:
		return false
	}
}

// personPool holds the per-person sessions: at most max, the least
// recently used idle one closed to make room, and each closed after idle
// without calls.
type personPool struct {
	dial func(ctx context.Context, ps *personSession) (*upstream, func(), error)
	now  func() time.Time
	max  int
	idle time.Duration

	mu       sync.Mutex
	sessions map[string]*personSession
	lru      *list.List // of *personSession, least recently used first
	closed   bool

	closing sync.WaitGroup // sessions being closed
}

func newPersonPool(dial func(context.Context, *personSession) (*upstream, func(), error)) *personPool {
	return &personPool{dial: dial, now: time.Now, max: maxPersonSessions, idle: personIdle,
		sessions: map[string]*personSession{}, lru: list.New()}
}

// errPoolFull says every session is in use.
var errPoolFull = fmt.Errorf("The bridge has %d people's sessions with the remote busy at once, its limit; try again shortly.", maxPersonSessions)

// acquire returns person's session, dialled with token on first use, with
// token as its bearer from now on; release ends the call's use of it.
func (p *personPool) acquire(ctx context.Context, person, token string) (*personSession, func(), error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, nil, errors.New("the bridge is stopping")
	}
	ps := p.sessions[person]
	if ps != nil && ps.gone() {
		p.removeLocked(ps)
		ps = nil
	}
	fresh := ps == nil
	if fresh {
		if len(p.sessions) >= p.max && !p.evictLocked() {
			p.mu.Unlock()
			return nil, nil, errPoolFull
		}
		ps = &personSession{person: person, ready: make(chan struct{})}
		ps.elem = p.lru.PushBack(ps)
		p.sessions[person] = ps
	} else {
		p.lru.MoveToBack(ps.elem)
	}
	ps.busy++
	ps.lastUsed = p.now()
	ps.setToken(token)
	p.mu.Unlock()

	release := func() {
		p.mu.Lock()
		ps.busy--
		ps.lastUsed = p.now()
		p.mu.Unlock()
	}
	if fresh {
		up, closeFn, err := p.dial(ctx, ps)
		ps.up, ps.close, ps.err = up, closeFn, err
		close(ps.ready)
		if err != nil {
			release()
			p.mu.Lock()
			p.removeLocked(ps)
			p.mu.Unlock()
			return nil, nil, err
		}
	}
	select {
	case <-ps.ready:
	case <-ctx.Done():
		release()
		return nil, nil, context.Cause(ctx)
	}
	if ps.err != nil {
		release()
		return nil, nil, ps.err
	}
	return ps, release, nil
}

// removeLocked drops ps from the pool and closes it (in the background:
// closing waits for the session's goroutines). p.mu is held.
func (p *personPool) removeLocked(ps *personSession) {
	if p.sessions[ps.person] == ps {
		delete(p.sessions, ps.person)
	}
	if ps.elem != nil {
		p.lru.Remove(ps.elem)
		ps.elem = nil
	}
	p.closing.Add(1)
	go func() {
		defer p.closing.Done()
		<-ps.ready
		if ps.close != nil {
			ps.close()
		}
	}()
}

// evictLocked closes the least recently used session no call uses, and
// reports whether there was one. p.mu is held.
func (p *personPool) evictLocked() bool {
	for e := p.lru.Front(); e != nil; e = e.Next() {
		if ps := e.Value.(*personSession); ps.busy == 0 {
			p.removeLocked(ps)
			return true
		}
	}
	return false
}

// sweep closes the sessions idle for longer than p.idle.
func (p *personPool) sweep() {
	p.mu.Lock()
	defer p.mu.Unlock()
	cutoff := p.now().Add(-p.idle)
	for e := p.lru.Front(); e != nil; {
		next := e.Next()
		if ps := e.Value.(*personSession); ps.busy == 0 && ps.lastUsed.Before(cutoff) {
			p.removeLocked(ps)
		}
		e = next
	}
}

// run sweeps every minute until ctx ends, then closes every session and
// returns once they are closed.
func (p *personPool) run(ctx context.Context) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			p.shut()
			return
		case <-t.C:
			p.sweep()
		}
	}
}

// shut closes every session and takes no more; it returns once they are
// closed.
func (p *personPool) shut() {
	p.mu.Lock()
	p.closed = true
	for _, ps := range p.sessions {
		p.removeLocked(ps)
	}
	p.mu.Unlock()
	p.closing.Wait()
}

// len is how many sessions the pool holds.
func (p *personPool) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.sessions)
}

// dialPerson opens ps's session with the remote (Streamable HTTP only),
// every request carrying ps's current token, and nothing else's.
func (b *Bridge) dialPerson(ctx context.Context, ps *personSession) (*upstream, func(), error) {
	origin, err := originOf(b.srv.URL)
	if err != nil {
		return nil, nil, err
	}
	// The transport keeps Connect's context for the session's life (its
	// GET stream): the session's own, ended by close.
	sctx, end := context.WithCancelCause(context.Background())
	cctx, cancel := context.WithTimeout(sctx, connectTimeout)
	defer cancel()
	stopEarly := context.AfterFunc(ctx, cancel)
	defer stopEarly()

	client := mcp.NewClient(&mcp.Implementation{Name: "spacefix-bridge", Version: Version}, b.personClientOptions())
	client.AddReceivingMiddleware(b.relayRequests)
	hc := b.personHTTPClient(ps, origin)
	cs, err := client.Connect(cctx, &mcp.StreamableClientTransport{Endpoint: b.srv.URL, HTTPClient: hc, MaxRetries: -1,
		OAuthHandler: personAuth{}, MaxEventSize: maxResponse}, b.sessionOptions())
	if err != nil {
		end(errGone)
		if unauthorized(err) {
			return nil, nil, errUpstreamUnauthorized
		}
		b.log.Warn("bridge: could not open a person's session with the MCP server", "person", ps.person, "err", redactErr(err))
		return nil, nil, b.callError(ctx, err)
	}
	upCtx, hung := context.WithCancelCause(sctx)
	up := &upstream{cs: cs, ctx: upCtx, modern: speaksModern(cs)}
	go func() {
		cs.Wait()
		hung(errGone)
	}()
	b.log.Debug("bridge: opened a person's session with the MCP server", "person", ps.person)
	return up, func() { cs.Close(); end(errGone) }, nil
}

// personHTTPClient carries ps's requests: the configured headers, then
// ps's bearer to the remote's origin only, never following a redirect
// elsewhere.
func (b *Bridge) personHTTPClient(ps *personSession, origin string) *http.Client {
	return &http.Client{
		Transport:     capBodies{headers{h: b.srv.Headers, base: personBearer{ps: ps, origin: origin, base: b.opts.httpTransport()}}},
		CheckRedirect: sameOrigin(origin),
	}
}

// personClientOptions are clientOptions without the list-changed
// handlers: the shared session alone says when to register again.
func (b *Bridge) personClientOptions() *mcp.ClientOptions {
	o := b.clientOptions()
	o.ToolListChangedHandler, o.PromptListChangedHandler, o.ResourceListChangedHandler = nil, nil, nil
	return o
}

// originOf is scheme://host of a URL.
func originOf(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("url %s is not usable", redactURL(raw))
	}
	return u.Scheme + "://" + u.Host, nil
}

// sameOrigin refuses a redirect away from the remote's origin: a person's
// token goes to the remote only.
func sameOrigin(origin string) func(*http.Request, []*http.Request) error {
	return func(r *http.Request, _ []*http.Request) error {
		if r.URL.Scheme+"://"+r.URL.Host != origin {
			return http.ErrUseLastResponse
		}
		return nil
	}
}

// personBearer sends the session's person's token as the bearer of each
// request to the remote's origin, and no Authorization header elsewhere.
type personBearer struct {
	ps     *personSession
	origin string
	base   http.RoundTripper
}

func (t personBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Del("Authorization")
	if r.URL.Scheme+"://"+r.URL.Host == t.origin {
		if tok := t.ps.bearer(); tok != "" {
			r.Header.Set("Authorization", "Bearer "+tok)
		}
	}
	return t.base.RoundTrip(r)
}

// personAuth is a person's session's OAuth handler: the bearer is set by
// personBearer; a 401 says the remote refused the person's token, which
// the caller's side renews (the gateway in connect mode, the exchange in
// exchange mode).
type personAuth struct{}

func (personAuth) TokenSource(context.Context) (oauth2.TokenSource, error) { return nil, nil }

func (personAuth) Authorize(_ context.Context, _ *http.Request, resp *http.Response) error {
	status := 0
	if resp != nil {
		status = resp.StatusCode
		if resp.Body != nil {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
		}
	}
	if status == http.StatusUnauthorized {
		return errUpstreamUnauthorized
	}
	return errUpstreamForbidden
}

// errUpstreamForbidden says the remote answered a person's request with
// HTTP 403.
var errUpstreamForbidden = errors.New("The remote refused the request (HTTP 403 Forbidden): your account there may not do this.")
