package core

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spacefix/spacefix/core/internal/agentproto"
	"github.com/spacefix/spacefix/core/internal/textfmt"
)

// Call describes the call a handler is serving; see [CallFrom].
type Call struct {
	// ID is the gateway's id of the call, as in its call log.
	ID string
	// Kind is "tool", "resource" or "prompt".
	Kind string
	// Tool is the tool or prompt name as registered, or the resource URI.
	Tool string
	// KeyID and KeyName identify the client key that made the call. A call
	// through an OAuth app has the key the gateway made for the person's
	// grant (its name is the app's).
	KeyID   string
	KeyName string
	// Person is who made the call when it came with an OAuth token (a
	// person who connected an app); nil for a call with a client key, which
	// speaks for no one person.
	Person *Person
	// App is the OAuth client (the app the person connected) the call came
	// through; nil for a client key.
	App *App
	// Project is the name of the project the call was made in.
	Project string
	// Role is the person's role in the project: "viewer", "editor" or
	// "owner"; empty for a client key.
	Role string
	// Scopes are what the caller may do: "mcp:read" and, when it may write,
	// "mcp:write". An OAuth call has the scopes the person granted the app;
	// a client key those it allows (a read-only key: just "mcp:read").
	Scopes []string
	// IdentityToken is a short-lived JWT the gateway signed that says who is
	// calling, for your own backend to verify against the gateway's
	// /.well-known/jwks.json (see docs/identity.md); empty unless the
	// agent key was set to receive identity tokens. Pass it on; never the
	// client's own token, which no handler ever sees.
	IdentityToken string
	// UpstreamToken is set only for bridged per-person remotes (`spacefix
	// bridge --per-person`): the calling person's own access token at the
	// remote MCP server, which the bridge sends there as the bearer. Any
	// other agent gets "". It is a secret: never log it or send it
	// anywhere but that remote.
	UpstreamToken string
	// Deadline is when the gateway stops waiting for the result; zero when
	// the gateway sent none. The handler's context ends then at the
	// latest; a handler that wants to answer before the gateway gives up
	// stops a little earlier on a deadline of its own.
	Deadline time.Time
	// RetryOf is set when the gateway delivers this call again after an
	// unknown outcome: an earlier call of this tool with the same request id
	// (see [IdempotencyKey]) timed out or lost its agent before it answered,
	// so its write may or may not have happened. RetryOf is that call's id,
	// as in the call log, and RetryReason is "timeout" or "disconnected".
	// Look for what the earlier call did (your own record of the request
	// id) before doing it again. Both are empty on a first delivery.
	RetryOf     string
	RetryReason string
	// TraceParent and TraceState are the W3C trace context of the gateway's
	// span for the call ("traceparent" and "tracestate"), empty when the
	// gateway does not trace. The handler's context already carries it as
	// the remote parent (go.opentelemetry.io/otel/trace
	// SpanContextFromContext), so spans an OTel tracer starts from that
	// context join the gateway's trace; the strings are for other tracers
	// and for passing the context on by hand.
	TraceParent string
	TraceState  string
	// ClientCapabilities are the client capabilities that [Elicit],
	// [Sample] and [Roots] need and that the client declared for this call:
	// "elicitation", "sampling", "roots". Ask only for what is here to
	// avoid [ErrMissingCapability].
	ClientCapabilities []string
}

// Person is the person behind a call made through an OAuth app.
type Person struct {
	// ID is the person's id in the gateway: stable, never reused.
	ID string
	// Email is as the person's account has it now; Name is the name they
	// gave themselves on the dashboard (Your accounts, /me), "" until they give
	// one. Both reach agents within a minute of a change.
	Email string
	Name  string
}

// App is the OAuth client (an app a person connected) a call came through.
type App struct {
	// ID is the OAuth client id.
	ID string
	// Name is the name the app registered with.
	Name string
}

// setCaller copies who is calling from the wire into info; the wire's
// structs are the gateway's, so a handler gets copies it may keep.
func setCaller(info *Call, c *agentproto.Caller) {
	if c.Person != nil {
		info.Person = &Person{ID: c.Person.ID, Email: c.Person.Email, Name: c.Person.Name}
	}
	if c.App != nil {
		info.App = &App{ID: c.App.ID, Name: c.App.Name}
	}
	info.Project, info.Role, info.IdentityToken = c.Project, c.Role, c.IdentityToken
	info.UpstreamToken = c.UpstreamToken
	info.Scopes = slices.Clone(c.Scopes)
}

// ClientCan reports whether the client of the call the handler holding ctx
// serves declared capability ("elicitation", "sampling" or "roots").
func ClientCan(ctx context.Context, capability string) bool {
	c, ok := CallFrom(ctx)
	return ok && slices.Contains(c.ClientCapabilities, capability)
}

// CallFrom returns the call that the handler holding ctx is serving, and
// false outside a handler.
func CallFrom(ctx context.Context) (Call, bool) {
	c, ok := ctx.Value(callKey{}).(*call)
	if !ok {
		return Call{}, false
	}
	return c.info, true
}

// Progress sends a short progress line for the call that the handler
// holding ctx is serving; the client sees it if it asked for progress, and
// the dashboard's log shows it. A line is cut to 200 characters. At most 4
// lines a second go out per call: extra lines are held back and only the
// latest is sent when the second allows, unless the result went first.
// Outside a handler, Progress does nothing.
func Progress(ctx context.Context, msg string) {
	if c, ok := ctx.Value(callKey{}).(*call); ok {
		c.progress.line(msg)
	}
}

type callKey struct{}

// call is one running call.
type call struct {
	info     Call
	cancel   context.CancelCauseFunc
	progress *throttle

	cancelled atomic.Bool // by the gateway: its answer is not wanted

	// Questions to the user and the client (Confirm, Elicit, Sample, Roots).
	sess      *session
	confirmed chan agentproto.Message // the gateway's answers: confirmed and answered
	mu        sync.Mutex
	inputs    int // questions asked so far
}

// throttle passes progress lines to send at most MaxProgressPerSec in any
// second, holding back the latest extra line until the window allows.
type throttle struct {
	mu      sync.Mutex
	send    func(string) // called with mu held, so lines go out in order
	sent    [agentproto.MaxProgressPerSec]time.Time
	n       int // lines sent so far; sent[n%len] is the oldest of the last few
	pending string
	held    bool
	timer   *time.Timer
	done    bool
}

func newThrottle(send func(string)) *throttle { return &throttle{send: send} }

// line sends msg now, or holds it back if the window is full.
func (t *throttle) line(msg string) {
	msg = textfmt.Cut(msg, agentproto.MaxProgressLen)
	if msg == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return
	}
	if t.held {
		t.pending = msg // the latest wins
		return
	}
	now := time.Now()
	wait := t.wait(now)
	if wait <= 0 {
		t.emit(now, msg)
		return
	}
	t.pending, t.held = msg, true
	t.timer = time.AfterFunc(wait, t.flush)
}

// wait returns how long until another line may go out.
func (t *throttle) wait(now time.Time) time.Duration {
	if t.n < len(t.sent) {
		return 0
	}
	return t.sent[t.n%len(t.sent)].Add(time.Second).Sub(now)
}

func (t *throttle) emit(now time.Time, msg string) {
	t.sent[t.n%len(t.sent)] = now
	t.n++
	t.send(msg)
}

// flush sends the held line when its time has come.
func (t *throttle) flush() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done || !t.held {
		return
	}
	now := time.Now()
	if wait := t.wait(now); wait > 0 {
		t.timer = time.AfterFunc(wait, t.flush)
		return
	}
	t.held, t.timer = false, nil
	t.emit(now, t.pending)
	t.pending = ""
}

// stop drops any held line; no line goes out after stop returns.
func (t *throttle) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.done = true
	if t.timer != nil {
		t.timer.Stop()
	}
	t.held, t.pending = false, ""
}
