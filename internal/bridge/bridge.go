package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/core/bridging"
)

// Version is the bridge's version, sent to servers as its client version
// and to the gateway as the agent's.
const Version = core.SDKVersion

// Options configure a [Bridge]. The zero value is usable when SPACEFIX_URL
// and SPACEFIX_API_KEY are set (or default), as for any agent.
type Options struct {
	// GatewayURL is the gateway's base URL. Empty means SPACEFIX_URL, else
	// core.DefaultURL.
	GatewayURL string
	// APIKey is the agent key when the [Server] has none. Empty means
	// SPACEFIX_API_KEY.
	APIKey string
	// Logger receives the bridge's events and the child's stderr. Nil means
	// slog.Default().
	Logger *slog.Logger
	// KeepAlive is how often the bridge pings the server; a server that
	// does not answer is treated as gone (a hung child is restarted). Zero
	// means 15 s; negative turns pings off.
	KeepAlive time.Duration
	// TerminateDuration is how long a child has to exit after its stdin
	// closes before it gets SIGTERM. Zero means go-sdk's 5 s.
	TerminateDuration time.Duration
	// BackoffMin and BackoffMax bound the wait between restarts of a server
	// that went away or could not start: from BackoffMin, doubling up to
	// BackoffMax. Zero means 250 ms and 30 s.
	BackoffMin, BackoffMax time.Duration
	// HTTPTransport carries requests to a remote server and its
	// authorization server. Nil means http.DefaultTransport.
	HTTPTransport http.RoundTripper
	// TokenDir holds the OAuth sign-ins of remote servers (see
	// [Bridge.Login]). Empty means [DefaultTokenDir].
	TokenDir string
}

func (o *Options) httpTransport() http.RoundTripper {
	if o.HTTPTransport != nil {
		return o.HTTPTransport
	}
	return http.DefaultTransport
}

// A Bridge runs one MCP server as a Spacefix agent; see the package
// documentation.
type Bridge struct {
	srv  Server
	opts Options
	log  *slog.Logger

	// changed is told (without blocking) when the server says one of its
	// lists changed.
	changed chan struct{}

	// kill ends the current child process at once (stdio), and client is
	// the current session's client; set by connect, used by runOnce only.
	kill   func()
	client *mcp.Client

	// messages bounds how fast the server's log messages are logged.
	messages *logLimiter

	// tasks is the task support the server's tools declare.
	tasks taskSupports

	// people holds the per-person sessions of a per-person server (nil
	// for a shared one), and exchange its token exchange (exchange mode
	// only): perperson.go, exchange.go.
	people   *personPool
	exchange *exchanger

	mu       sync.Mutex
	progress map[string]*progressSink // by progress token
	nextTok  uint64
}

// New returns a bridge for srv. It fails when srv does not validate.
func New(srv Server, opts Options) (*Bridge, error) {
	if err := srv.Validate(); err != nil {
		return nil, err
	}
	if opts.KeepAlive == 0 {
		opts.KeepAlive = 15 * time.Second
	}
	if opts.BackoffMin <= 0 {
		opts.BackoffMin = 250 * time.Millisecond
	}
	if opts.BackoffMax <= 0 {
		opts.BackoffMax = 30 * time.Second
	}
	b := &Bridge{srv: srv, opts: opts, log: opts.Logger, changed: make(chan struct{}, 1), progress: map[string]*progressSink{}}
	if b.log == nil {
		b.log = slog.Default()
	}
	b.log = b.log.With("server", srv.Name)
	b.messages = newLogLimiter(b.log, srv.Name+"'s log messages")
	if srv.Mode() != ModeShared {
		b.people = newPersonPool(b.dialPerson)
	}
	if srv.TokenExchange != nil {
		b.exchange = newExchanger(*srv.TokenExchange, opts.httpTransport())
	}
	return b, nil
}

func (b *Bridge) clientOptions() *mcp.ClientOptions {
	changed := func() {
		select {
		case b.changed <- struct{}{}:
		default:
		}
	}
	// No go-sdk KeepAlive: on a failed ping it closes the session, and
	// that close waits for the calls in flight, which a hung server never
	// answers. runOnce pings instead (see watch).
	return &mcp.ClientOptions{
		Logger:                      slog.New(redactingHandler{b.log.Handler()}),
		ToolListChangedHandler:      func(context.Context, *mcp.ToolListChangedRequest) { changed() },
		PromptListChangedHandler:    func(context.Context, *mcp.PromptListChangedRequest) { changed() },
		ResourceListChangedHandler:  func(context.Context, *mcp.ResourceListChangedRequest) { changed() },
		ProgressNotificationHandler: b.onProgress,
		// The server's log messages go to the client of the call they
		// belong to (when the bridge can tell: see soleCall), and to the
		// bridge's log within logRate.
		//lint:ignore SA1019 deprecated in 2026-07-28; 2025 servers log this way
		LoggingMessageHandler: func(ctx context.Context, r *mcp.LoggingMessageRequest) {
			if b.messages.allow() {
				b.log.Log(ctx, slogLevel(r.Params.Level), "bridge: server log message", "logger", r.Params.Logger, "data", r.Params.Data)
			}
			if cctx, err := b.soleCall(r.Session); err == nil {
				core.Log(cctx, core.LogLevel(r.Params.Level), r.Params.Data)
			}
		},
		ElicitationHandler: b.onElicit,
		// A 2026-07-28 server's input_required results come back to the
		// bridge, which asks the call's client under the server's ids
		// (inputs.go); go-sdk would answer them from the handlers here,
		// under ids of the gateway's.
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		//lint:ignore SA1019 deprecated in 2026-07-28 (SEP-2577); 2025 servers sample this way
		CreateMessageHandler: b.onSample,
	}
}

// Run bridges the server until ctx ends, then drains the agent (running
// calls finish, as an SDK agent's do on SIGTERM) and stops the server. A
// server that goes away or cannot start is started again with backoff;
// Run returns nil after ctx ends, or an error when the bridge cannot run
// at all (no agent key).
func (b *Bridge) Run(ctx context.Context) error {
	if err := b.checkPerPerson(); err != nil {
		return err
	}
	if b.people != nil {
		// The people's sessions outlive ctx while running calls drain,
		// and close when Run returns.
		pctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		go func() { defer close(done); b.people.run(pctx) }()
		defer func() { stop(); <-done }()
	}
	attempt := 0
	for {
		served, err := b.runOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var fatal *fatalError
		if errors.As(err, &fatal) {
			return redactErr(fatal.err)
		}
		if served {
			attempt = 0
		}
		delay := b.backoff(attempt)
		attempt++
		b.log.Warn("bridge: the MCP server is not available; retrying", "err", redactErr(err), "attempt", attempt, "retry_in", delay.Round(time.Millisecond))
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// connectTimeout bounds starting or dialling a server and its handshake.
const connectTimeout = 60 * time.Second

// fatalError ends Run: retrying cannot help.
type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }

func (b *Bridge) backoff(attempt int) time.Duration {
	d := b.opts.BackoffMax
	if attempt < 20 {
		d = min(b.opts.BackoffMin<<attempt, b.opts.BackoffMax)
	}
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// runOnce connects to the server and offers it to the gateway until the
// server goes away or ctx ends. served says whether the handshake worked.
func (b *Bridge) runOnce(ctx context.Context) (served bool, err error) {
	// The transports keep the context of Connect for the session's life
	// (the SSE transport's GET stream), so it ends only after Close; the
	// handshake alone is bounded, and so is the wait when ctx ends first.
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	slow := time.AfterFunc(connectTimeout, cancel)
	stopEarly := context.AfterFunc(ctx, cancel)
	cs, transport, pid, err := b.connect(cctx)
	slow.Stop()
	stopEarly()
	if err != nil {
		return false, err
	}
	defer cs.Close()
	meta := bridging.Bridge{Transport: transport, Target: b.srv.Target(), Unprefixed: b.srv.Unprefixed, PerPerson: b.srv.registered()}
	if info := cs.InitializeResult(); info != nil && info.ServerInfo != nil {
		meta.Server, meta.ServerVersion = info.ServerInfo.Name, info.ServerInfo.Version
	}
	attrs := []any{"transport", transport, "target", meta.Target, "server_name", meta.Server, "server_version", meta.ServerVersion}
	if info := cs.InitializeResult(); info != nil {
		attrs = append(attrs, "protocol", info.ProtocolVersion)
	}
	if pid != 0 {
		attrs = append(attrs, "pid", pid)
	}
	b.log.Info("bridge: connected to the MCP server", attrs...)
	b.askForLogs(ctx, cs)

	sctx, hung := context.WithCancelCause(context.WithoutCancel(ctx))
	up := &upstream{cs: cs, client: b.client, ctx: sctx, modern: speaksModern(cs)}
	gone := make(chan error, 1)
	go func() { gone <- cs.Wait() }()
	watchDone := make(chan struct{})
	defer func() { hung(errGone); <-watchDone }()
	go func() { defer close(watchDone); b.watch(sctx, up, hung) }()
	return true, b.serve(ctx, up, meta, gone, hung)
}

// serve offers the server to the gateway, one generation per version of
// its lists, until ctx ends (nil), the server goes away or stops answering
// (the reason). Every generation has stopped when it returns.
func (b *Bridge) serve(ctx context.Context, up *upstream, meta bridging.Bridge, gone <-chan error, hung context.CancelCauseFunc) error {
	// Drop a change signal from before this session: its lists are read now.
	select {
	case <-b.changed:
	default:
	}
	var gens []*generation // every generation not yet stopped and waited for
	defer func() {
		for _, g := range gens {
			g.stop(false)
		}
		for _, g := range gens {
			<-g.done
		}
	}()
	for {
		next, err := b.offer(ctx, up, meta)
		if err != nil {
			return err
		}
		var prev *generation
		if len(gens) > 0 {
			prev = gens[len(gens)-1]
		}
		next.start(ctx, prev)
		gens = append(gens, next)
		select {
		case <-ctx.Done():
			return nil // the deferred stop drains: running calls finish while the server still runs
		case err := <-gone:
			hung(errGone) // calls still waiting on the server end now
			if err == nil {
				return errGone
			}
			return fmt.Errorf("%w: %v", errGone, err)
		case <-up.ctx.Done():
			// The server stopped answering pings: end the calls waiting on
			// it (done: up.ctx), stop the child, and start again.
			b.kill()
			return context.Cause(up.ctx)
		case <-b.changed:
			b.log.Info("bridge: the server's lists changed; registering again")
		}
		gens = slices.DeleteFunc(gens[:len(gens)-1], (*generation).finished)
		gens = append(gens, next)
	}
}

// askForLogs asks a server that can log for all its messages; they go to
// the bridge's log at the matching level, where the log's own level
// decides what is kept (see clientOptions).
func (b *Bridge) askForLogs(ctx context.Context, cs *mcp.ClientSession) {
	r := cs.InitializeResult()
	//lint:ignore SA1019 deprecated in 2026-07-28; 2025 servers declare logging this way
	if r == nil || r.Capabilities == nil || r.Capabilities.Logging == nil || speaksModern(cs) {
		return // a 2026-07-28 server takes the level with each request (callerMeta)
	}
	lctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	//lint:ignore SA1019 deprecated in 2026-07-28, still how 2025 servers start logging
	if err := cs.SetLoggingLevel(lctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		b.log.Debug("bridge: the server did not take logging/setLevel", "err", redactErr(err))
	}
}

// slogLevel maps an MCP log level (RFC 5424 names) onto slog's.
//
//lint:ignore SA1019 deprecated in 2026-07-28; 2025 servers log this way
func slogLevel(l mcp.LoggingLevel) slog.Level {
	switch l {
	case "debug":
		return slog.LevelDebug
	case "info", "notice":
		return slog.LevelInfo
	case "warning":
		return slog.LevelWarn
	}
	return slog.LevelError // error, critical, alert, emergency
}

// answered reports whether a failed request got the server's answer (a
// JSON-RPC error of its own): the server is alive. A 2026-07-28 server over
// HTTP answers ping, which that protocol removed, with an error.
func answered(err error) bool {
	return serverError(err) != nil
}

// codeRejected is the code of go-sdk's "rejected by transport" error
// (jsonrpc2.ErrRejected, internal to go-sdk), which wraps every request an
// HTTP transport could not deliver or got no JSON-RPC answer to (a 401
// whose sign-in failed, a server that is down) beside the cause.
const codeRejected = -32005

// serverError returns the JSON-RPC error the server answered with, looking
// past go-sdk's transport rejection that may wrap it; nil when there is
// none.
func serverError(err error) *jsonrpc.Error {
	switch e := err.(type) {
	case nil:
		return nil
	case *jsonrpc.Error:
		if e.Code != codeRejected {
			return e
		}
		return nil
	case interface{ Unwrap() []error }:
		for _, w := range e.Unwrap() {
			if rpc := serverError(w); rpc != nil {
				return rpc
			}
		}
		return nil
	case interface{ Unwrap() error }:
		return serverError(e.Unwrap())
	}
	return nil
}

// errHung says the server stopped answering pings.
var errHung = errors.New("the MCP server stopped answering pings")

// watch pings the server every KeepAlive; when a ping gets no answer
// within KeepAlive, twice in a row, it calls hung. It returns when ctx ends.
func (b *Bridge) watch(ctx context.Context, up *upstream, hung context.CancelCauseFunc) {
	if b.opts.KeepAlive < 0 {
		<-ctx.Done()
		return
	}
	t := time.NewTicker(b.opts.KeepAlive)
	defer t.Stop()
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, b.opts.KeepAlive)
		err := up.cs.Ping(pctx, nil)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil || answered(err):
			failures = 0
			continue
		}
		failures++
		if failures >= 2 {
			b.log.Error("bridge: the MCP server stopped answering pings; restarting it", "err", redactErr(err))
			hung(errHung)
			return
		}
	}
}
