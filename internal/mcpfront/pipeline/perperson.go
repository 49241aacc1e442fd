package pipeline

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/access"
	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/route"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/upstream"
)

// Per-person bridged remotes (docs/bridge.md, "Each person's own
// account"). A bridge whose registration has Bridge.PerPerson acts on its
// remote as each caller's own account. Once a call (a tool call, a
// resource read, a prompt get) is picked for such a replica,
// [Pipeline.checkUpstream] decides:
//
//   - a call without a person (a client key) is refused, unless the
//     bridge falls back to its shared account;
//   - in connect mode, a person's call carries their upstream access
//     token (agentproto.Caller.UpstreamToken), from [Upstream]; a person
//     with no account (or one to connect again) gets a URL-mode
//     elicitation of the gateway's connect page (-32042) when the client
//     declared elicitation.url, else the link and one sentence;
//   - in exchange mode the bridge gets its token itself.
//
// A call the remote refused for its token (agentproto.CodeUpstreamUnauthorized:
// the remote did nothing) has the account refreshed and is delivered once
// more; a second refusal, or a refresh that fails, gets the connect answer.
// That code never reaches a client. The refused delivery is neither logged
// nor billed. A task (or a job) whose call is refused gets the answer as
// an isError result instead (after a refresh, so that calling again
// works): it is not delivered again. Results of per-person tools are never
// cached, and their request ids (repeat.go) are kept per person.

// Upstream is the gateway's per-person upstream accounts as the front uses
// them: *upstream.Service.
type Upstream interface {
	// Token returns the person's access token at the agent key's
	// remote, refreshed first when it is about to expire;
	// upstream.ErrNotConnected or upstream.ErrReconnect when the person
	// must connect. resource is the remote the picked replica's bridge
	// reaches (its per-person URL): an account connected for another is
	// not used, nor refreshed.
	Token(ctx context.Context, projectID int64, agentKeyID string, userID int64, resource string) (string, error)
	// Refresh refreshes the account at resource after the remote refused
	// stale.
	Refresh(ctx context.Context, projectID int64, agentKeyID string, userID int64, resource, stale string) (string, error)
	// ConnectURL is the gateway's page where a person connects their
	// account at the agent key's remote.
	ConnectURL(agentKeyID string) string
}

// Messages a model (or a person) reads.
const (
	msgPerPersonKey = "%s acts on %s as each person's own account, and this call comes with an agent key, not a person. " +
		"Call it through an MCP client signed in with OAuth, or ask the bridge's operator to set \"fallback\": \"shared\"."
	msgConnect        = "Connect your %s account to use %s."
	msgConnectLink    = "Connect your %s account to use %s: open %s, sign in there, then call %s again."
	msgReconnectLink  = "Your %s account needs connecting again: open %s, sign in there, then call %s again."
	msgUpstreamFailed = "The gateway could not get your %s account's token. Try again in a moment."
	msgRefreshed      = "%s refused your account's token, and the gateway has refreshed it: call %s again."
	msgUpstreamLate   = "The remote refused your account's token during the call. Call it again; if that fails too, connect your account again."
)

var _ Upstream = (*upstream.Service)(nil)

// What [Upstream] returns when a person must connect their account.
var (
	errUpstreamNotConnected = upstream.ErrNotConnected
	errUpstreamReconnect    = upstream.ErrReconnect
)

// upstreamTimeout bounds a token's look-up or refresh on a call's path.
const upstreamTimeout = 20 * time.Second

// perPersonOf returns the per-person mode of rep's bridge, nil if none.
func perPersonOf(rep *agents.Replica) *agentproto.PerPerson {
	if rep == nil {
		return nil
	}
	return regPerPerson(rep.Reg)
}

func regPerPerson(reg *agentproto.Registration) *agentproto.PerPerson {
	if reg == nil || reg.Bridge == nil {
		return nil
	}
	return reg.Bridge.PerPerson
}

// perPersonTool reports whether a replica of a per-person bridge offers t
// (or did, newest): its results depend on who calls.
func perPersonTool(t *agents.Tool) bool {
	if regPerPerson(t.Reg) != nil {
		return true
	}
	return slices.ContainsFunc(t.Replicas, func(r *agents.Replica) bool { return perPersonOf(r) != nil })
}

// CacheFor is how long results of t are cached: never for a per-person
// tool, whose result is the calling person's. c may be nil.
func (f *Pipeline) CacheFor(c *access.Controls, t *agents.Tool) time.Duration {
	if c == nil || perPersonTool(t) {
		return 0
	}
	return c.CacheFor(t)
}

// upstreamHost names a per-person remote for people: its URL's host.
func upstreamHost(rep *agents.Replica, pp *agentproto.PerPerson) string {
	for _, s := range []string{pp.URL, rep.Reg.Bridge.Target} {
		if u, err := url.Parse(s); err == nil && u.Host != "" {
			return u.Host
		}
	}
	if rep.Reg.Bridge.Server != "" {
		return rep.Reg.Bridge.Server
	}
	return rep.Reg.Name
}

// upstreamRefusal is why a call to a per-person remote does not go out,
// or ends without its result: a sentence, or, for a client that can open
// one, a URL-mode elicitation.
type upstreamRefusal struct {
	msg    string
	elicit *mcp.ElicitParams
}

// toolAnswer is the refusal as a tools/call answer: -32042, or an isError
// result.
func (r *upstreamRefusal) toolAnswer() (*mcp.CallToolResult, error) {
	if r.elicit != nil {
		return nil, r.rpcError()
	}
	return ErrorResult(r.msg), nil
}

// rpcError is the refusal as a JSON-RPC error: -32042 with the
// elicitation, or the sentence (a resource read, a prompt get, a task).
func (r *upstreamRefusal) rpcError() error {
	if r.elicit != nil {
		return mcp.URLElicitationRequiredError([]*mcp.ElicitParams{r.elicit})
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: r.msg}
}

// personID returns the user id of the caller's person; ok is false for a
// call without one.
func personID(caller agentproto.Caller) (int64, bool) {
	if caller.Person == nil {
		return 0, false
	}
	id, err := strconv.ParseInt(caller.Person.ID, 10, 64)
	return id, err == nil
}

// checkUpstream is the per-person check of call, picked and not yet sent,
// of name (a tool, a resource's URI, a prompt) by caller, whose client
// declared caps: nil when the call may go (with the person's token set on
// it in connect mode), else the refusal. token, if not "", is the
// person's token already got (a refresh's): it is used when the account
// is still the one of the picked replica's remote.
func (f *Pipeline) checkUpstream(ctx context.Context, call *route.Call, projectID int64, caller agentproto.Caller, name string, caps []string, token string) *upstreamRefusal {
	rep := call.Replica()
	pp := perPersonOf(rep)
	if pp == nil {
		return nil
	}
	host := upstreamHost(rep, pp)
	userID, person := personID(caller)
	switch {
	case caller.Person == nil:
		if pp.Fallback == agentproto.FallbackShared {
			return nil
		}
		return &upstreamRefusal{msg: fmt.Sprintf(msgPerPersonKey, name, host)}
	case pp.Mode != agentproto.PerPersonConnect:
		return nil // exchange: the bridge exchanges the identity token
	case !person || f.upstream == nil:
		f.log.Error("a per-person remote's call has no upstream accounts to use", "agent", rep.AgentKey, "person", caller.Person.ID)
		return &upstreamRefusal{msg: fmt.Sprintf(msgUpstreamFailed, host)}
	}
	// The account is bound to the remote it was connected at: a replica
	// whose bridge reaches another (restarted with another --remote) gets
	// the connect answer, also on a retry that picked it.
	ctx, cancel := context.WithTimeout(ctx, upstreamTimeout)
	defer cancel()
	current, err := f.upstream.Token(ctx, projectID, rep.AgentKey, userID, pp.URL)
	if err != nil {
		return f.upstreamError(err, rep.AgentKey, host, name, caps)
	}
	call.SetUpstreamToken(cmp.Or(token, current))
	return nil
}

// upstreamError is the answer to a person whose token could not be got
// (err, from Token or Refresh).
func (f *Pipeline) upstreamError(err error, agentKey, host, name string, caps []string) *upstreamRefusal {
	switch {
	case errors.Is(err, errUpstreamNotConnected):
		return f.connectAnswer(agentKey, host, name, caps, false)
	case errors.Is(err, errUpstreamReconnect):
		return f.connectAnswer(agentKey, host, name, caps, true)
	}
	f.log.Error("get a person's upstream token", "agent", agentKey, "err", err)
	return &upstreamRefusal{msg: fmt.Sprintf(msgUpstreamFailed, host)}
}

// connectAnswer asks the person to connect their account at host (again,
// if reconnect) to use name: a URL-mode elicitation of the connect page
// when the client declared elicitation.url, else the link and what to do.
func (f *Pipeline) connectAnswer(agentKey, host, name string, caps []string, reconnect bool) *upstreamRefusal {
	link := f.upstream.ConnectURL(agentKey)
	r := &upstreamRefusal{msg: fmt.Sprintf(msgConnectLink, host, name, link, name)}
	if reconnect {
		r.msg = fmt.Sprintf(msgReconnectLink, host, link, name)
	}
	if slices.Contains(caps, capElicitURL) {
		r.elicit = &mcp.ElicitParams{Mode: "url", ElicitationID: rand.Text(), URL: link, Message: fmt.Sprintf(msgConnect, host, name)}
	}
	return r
}

// upstreamRefused reports whether a call ended because the remote refused
// the person's upstream token.
func upstreamRefused(res route.Result) bool {
	return res.Outcome == route.ToolError && res.Code == agentproto.CodeUpstreamUnauthorized
}

// refreshUpstream refreshes the account of caller's person after the
// per-person remote of rep refused stale, the token a call carried: the
// new token, for one more delivery, or the answer when there is none.
func (f *Pipeline) refreshUpstream(ctx context.Context, rep *agents.Replica, projectID int64, caller agentproto.Caller, name string, caps []string, stale string) (string, *upstreamRefusal) {
	pp := perPersonOf(rep)
	userID, ok := personID(caller)
	if pp == nil || !ok || f.upstream == nil || stale == "" {
		// Not a call the gateway gave a token: nothing to refresh.
		f.log.Warn("a call without a person's upstream token ended as refused upstream", "name", name)
		return "", &upstreamRefusal{msg: fmt.Sprintf(msgUpstreamFailed, "upstream")}
	}
	host := upstreamHost(rep, pp)
	ctx, cancel := context.WithTimeout(ctx, upstreamTimeout)
	defer cancel()
	token, err := f.upstream.Refresh(ctx, projectID, rep.AgentKey, userID, pp.URL, stale)
	if err != nil {
		if !errors.Is(err, errUpstreamNotConnected) && !errors.Is(err, errUpstreamReconnect) {
			f.log.Warn("refresh a person's upstream account", "agent", rep.AgentKey, "err", err)
		}
		return "", f.connectAnswer(rep.AgentKey, host, name, caps, !errors.Is(err, errUpstreamNotConnected))
	}
	if token == "" || token == stale {
		return "", f.connectAnswer(rep.AgentKey, host, name, caps, true)
	}
	return token, nil
}

// refusedAgain is the answer when the remote refused the person's token
// once more, after a refresh.
func (f *Pipeline) refusedAgain(rep *agents.Replica, name string, caps []string) *upstreamRefusal {
	pp := perPersonOf(rep)
	if pp == nil || f.upstream == nil {
		return &upstreamRefusal{msg: fmt.Sprintf(msgUpstreamFailed, "upstream")}
	}
	return f.connectAnswer(rep.AgentKey, upstreamHost(rep, pp), name, caps, true)
}

// retryTool delivers a tool call once more after its remote refused the
// person's token (first, the call that ended so): the account is
// refreshed, the call picked again within what is left of its wait and
// sent. It returns the new call and how it is going (for [Pipeline.await]),
// or the answer. A repeat-safe tool's request id goes on with the new
// call.
func (f *Pipeline) retryTool(ctx context.Context, req *Request, p pickRequest, first *route.Call, res route.Result) (*route.Call, route.Result, *mcp.CallToolResult, error) {
	t, rep := p.Tool, first.Replica()
	caller, err := f.Caller(ctx, p.Key, nil)
	if err != nil {
		f.repeats.end(first.ID(), res, nil, "")
		return nil, res, ErrorResult(err.Error()), nil
	}
	token, refusal := f.refreshUpstream(ctx, rep, p.Key.ProjectID, caller, t.Name, p.Caps, first.UpstreamToken())
	if refusal != nil {
		f.repeats.end(first.ID(), res, nil, "") // a protocol error: the id is let go
		out, err := refusal.toolAnswer()
		return nil, res, out, err
	}
	p.Wait = max(time.Until(first.Deadline()), time.Millisecond)
	p.token = token
	call, res2, _, refused, rpcErr := f.pickCall(ctx, p)
	switch {
	case refused != nil || rpcErr != nil:
		f.repeats.end(first.ID(), res, nil, "")
		return nil, res2, refused, rpcErr
	case call == nil:
		f.repeats.end(first.ID(), res, nil, "")
		return nil, res2, nil, nil
	}
	if t.Def.IdempotencyKey != "" {
		f.repeats.moveCall(first.ID(), call.ID())
	}
	call, res2 = call.Send(ctx)
	if call != nil {
		res2 = waitOn(ctx, req, call)
	}
	if call != nil && upstreamRefused(res2) {
		f.repeats.end(call.ID(), res2, nil, "")
		out, err := f.refusedAgain(call.Replica(), t.Name, p.Caps).toolAnswer()
		return nil, res2, out, err
	}
	return call, res2, nil, nil
}

// taskUnauthorized is what a task (or a job) of a call picked for key
// answers if the remote refuses the person's token: the account is
// refreshed, and the person is told to call again, or to connect. Nil
// when the call carries no token of the gateway's.
func (f *Pipeline) taskUnauthorized(key store.Key, call *route.Call, name string) func(ctx context.Context) string {
	stale := call.UpstreamToken()
	if stale == "" {
		return nil
	}
	rep := call.Replica()
	return func(ctx context.Context) string {
		caller, err := f.Caller(ctx, key, nil)
		if err != nil {
			return err.Error()
		}
		if _, refusal := f.refreshUpstream(ctx, rep, key.ProjectID, caller, name, nil, stale); refusal != nil {
			return refusal.msg
		}
		return fmt.Sprintf(msgRefreshed, upstreamHost(rep, perPersonOf(rep)), name)
	}
}
