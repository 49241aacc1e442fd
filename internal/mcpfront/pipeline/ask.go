//lint:file-ignore SA1019 sampling and roots are deprecated in 2026-07-28 (SEP-2577) but still part of every protocol version the gateway serves; agents may use them
package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/mcpfront/wire"
	"github.com/spacefix/spacefix/internal/route"
	"github.com/spacefix/spacefix/internal/schema"
	"github.com/spacefix/spacefix/internal/textfmt"
)

// An agent's ask (core.Elicit, core.Sample, core.Roots) is a set of MCP
// input requests for the call's client. They reach the client as a
// 2026-07-28 input_required result (go-sdk turns it into elicitation/create,
// sampling/createMessage and roots/list requests for older sessions), and
// the client's responses go back to the agent as one answered message,
// while the call keeps running there, as for Confirm (see confirm.go).

// Limits of one ask.
const (
	maxAskRequests = 8
	maxAskBytes    = 256 << 10
)

// askedLine is what the call log keeps of an ask: what was asked, never
// the answers.
func askedLine(reqs mcp.InputRequestMap) string {
	ids := make([]string, 0, len(reqs))
	for id := range reqs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	parts := make([]string, 0, len(ids))
	for _, id := range ids {
		switch p := reqs[id].(type) {
		case *mcp.ElicitParams:
			parts = append(parts, fmt.Sprintf("a form (%s)", textfmt.Cut(p.Message, 80)))
		case *mcp.CreateMessageWithToolsParams:
			msgs := "messages"
			if len(p.Messages) == 1 {
				msgs = "message"
			}
			parts = append(parts, fmt.Sprintf("a message from its model (%d %s, up to %d tokens)", len(p.Messages), msgs, p.MaxTokens))
		default:
			parts = append(parts, "its roots")
		}
	}
	return "asked the client for " + strings.Join(parts, ", ")
}

// capabilityOf is the client capability each input request needs.
var capabilityOf = map[string]string{
	"elicitation/create":     "elicitation",
	"sampling/createMessage": "sampling",
	"roots/list":             "roots",
}

// parseAsk reads an ask's input requests, with the methods they name.
func parseAsk(q *agentproto.Message) (mcp.InputRequestMap, map[string]string, error) {
	if len(q.Requests) > maxAskBytes {
		return nil, nil, fmt.Errorf("the input requests are %d bytes; at most %d are passed on", len(q.Requests), maxAskBytes)
	}
	var methods map[string]struct {
		Method string `json:"method"`
	}
	if err := json.Unmarshal(q.Requests, &methods); err != nil {
		return nil, nil, fmt.Errorf("the input requests are not a JSON object of {method, params} by id: %v", err)
	}
	if len(methods) == 0 || len(methods) > maxAskRequests {
		return nil, nil, fmt.Errorf("an ask carries 1 to %d input requests, not %d", maxAskRequests, len(methods))
	}
	out := make(map[string]string, len(methods))
	for id, m := range methods {
		if capabilityOf[m.Method] == "" {
			return nil, nil, fmt.Errorf("input request %q has method %q; the methods are elicitation/create, sampling/createMessage and roots/list", id, m.Method)
		}
		out[id] = m.Method
	}
	var reqs mcp.InputRequestMap
	if err := json.Unmarshal(q.Requests, &reqs); err != nil {
		return nil, nil, fmt.Errorf("the input requests do not read as MCP requests: %v", err)
	}
	// A form whose answer the gateway could not check is not asked: the
	// agent would read whatever the client sent.
	for id, ir := range reqs {
		if ep, ok := ir.(*mcp.ElicitParams); ok && ep.RequestedSchema != nil {
			if _, err := compileForm(ep.RequestedSchema); err != nil {
				return nil, nil, fmt.Errorf("input request %q: %v", id, err)
			}
		}
	}
	return reqs, out, nil
}

// capElicitURL is in a caller's capabilities when the client declared
// elicitation.url: it can open a URL-mode elicitation (perperson.go).
const capElicitURL = "elicitation.url"

// declared lists the capabilities input requests need that the client
// declared — its session's at initialize, or a 2026-07-28 request's own —,
// sorted: what the agent's handler may ask for; and whether the request is
// of the stateless protocol. It is on every tools/call's path (the caller's
// capabilities go with the call), so it reads go-sdk's types directly.
func declared(ss *mcp.ServerSession, meta mcp.Meta) (caps []string, modern bool) {
	v, _ := meta[mcp.MetaKeyProtocolVersion].(string)
	if ss != nil {
		if ip := ss.InitializeParams(); ip != nil {
			modern = v >= wire.ModernVersion || ip.ProtocolVersion >= wire.ModernVersion
			c := ip.Capabilities
			if c == nil {
				return nil, modern
			}
			if c.Elicitation != nil {
				caps = append(caps, "elicitation")
				if c.Elicitation.URL != nil {
					caps = append(caps, capElicitURL)
				}
			}
			// go-sdk keeps a session's roots capability as a struct that
			// cannot say it is absent: a session counts as declaring it.
			caps = append(caps, "roots")
			if c.Sampling != nil {
				caps = append(caps, "sampling")
			}
			return caps, modern
		}
	}
	// A 2026-07-28 request answered before go-sdk made it a session (see
	// mcpfront/early.go): its own capabilities, read as go-sdk's session would.
	m, _ := meta[mcp.MetaKeyClientCapabilities].(map[string]any)
	if e := m["elicitation"]; e != nil {
		caps = append(caps, "elicitation")
		if e, _ := e.(map[string]any); e["url"] != nil {
			caps = append(caps, capElicitURL)
		}
	}
	caps = append(caps, "roots")
	if m["sampling"] != nil {
		caps = append(caps, "sampling")
	}
	return caps, true
}

// callerCaps is what declared lists, for a call's caller.
func callerCaps(ss *mcp.ServerSession, meta mcp.Meta) []string {
	caps, _ := declared(ss, meta)
	return caps
}

// missingCaps lists the capabilities the requests need that the client did
// not declare, sorted.
func missingCaps(have []string, methods map[string]string) []string {
	var missing []string
	for _, m := range methods {
		c := capabilityOf[m]
		if !slices.Contains(have, c) && !slices.Contains(missing, c) {
			missing = append(missing, c)
		}
	}
	sort.Strings(missing)
	return missing
}

// errMissingCaps is the JSON-RPC error of a 2026-07-28 call whose handler
// asked for what the client cannot give (SEP-2575): -32021 with the
// capabilities required.
func errMissingCaps(missing []string) error {
	required := map[string]any{}
	for _, c := range missing {
		required[c] = map[string]any{}
	}
	data, _ := json.Marshal(map[string]any{"requiredCapabilities": required})
	return &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities, Data: data,
		Message: fmt.Sprintf("The tool needs the client's %s capability, which this request did not declare.", strings.Join(missing, " and "))}
}

// collect reads the client's responses to an ask from its retried call,
// checking elicitation answers against the schema asked for. The error
// says, for the agent's developer, why there are none.
func collect(responses mcp.InputResponseMap, asked mcp.InputRequestMap) (json.RawMessage, error) {
	out := make(map[string]mcp.InputResponse, len(asked))
	for id, ir := range asked {
		resp, ok := responses[id]
		if !ok {
			return nil, fmt.Errorf("the client retried the call without a response to input request %q", id)
		}
		if err := checkResponse(id, ir, resp); err != nil {
			return nil, err
		}
		out[id] = resp
	}
	return json.Marshal(out)
}

// checkResponse checks a client's response to input request id (ir), as
// the agent is to read it: an elicitation's answer must be one (checked by
// checkElicited). The error says what is wrong.
func checkResponse(id string, ir mcp.InputRequest, resp mcp.InputResponse) error {
	ep, ok := ir.(*mcp.ElicitParams)
	if !ok {
		return nil
	}
	er, ok := resp.(*mcp.ElicitResult)
	if !ok || er == nil {
		return fmt.Errorf("the client's response to input request %q is not an elicitation result", id)
	}
	switch er.Action {
	case "accept", "decline", "cancel":
	default:
		return fmt.Errorf("the client's response to input request %q has action %q, which is none of accept, decline and cancel", id, textfmt.Cut(er.Action, 40))
	}
	if err := checkElicited(ep, er); err != nil {
		return fmt.Errorf("the user's answer to input request %q does not match the schema asked for: %w", id, err)
	}
	return nil
}

// checkElicited checks an elicitation's answer with the gateway's own
// validator: an accepted form's content (none counts as {}) against the
// requested schema; a decline or cancel passes as such, without content;
// any other action is refused.
func checkElicited(ep *mcp.ElicitParams, er *mcp.ElicitResult) error {
	switch er.Action {
	case "decline", "cancel":
		er.Content = nil // not the user's answer: none reaches the agent
		return nil
	case "accept":
	default:
		return fmt.Errorf("action %q is none of accept, decline and cancel", textfmt.Cut(er.Action, 40))
	}
	if ep.RequestedSchema == nil {
		return nil // a URL-mode elicitation: no form
	}
	s, err := compileForm(ep.RequestedSchema)
	if err != nil {
		return err
	}
	content := []byte("{}")
	if er.Content != nil {
		if content, err = json.Marshal(er.Content); err != nil {
			return fmt.Errorf("the content could not be read: %v", err)
		}
	}
	return s.Validate(content)
}

// compileForm compiles an elicitation's requested schema with the
// gateway's validator.
func compileForm(requested any) (*schema.Schema, error) {
	raw, err := json.Marshal(requested)
	if err != nil {
		return nil, fmt.Errorf("the requested schema is not JSON: %v", err)
	}
	s, err := schema.Compile(raw)
	if err != nil {
		return nil, fmt.Errorf("the requested schema cannot be checked: %v", err)
	}
	return s, nil
}

// Fulfil asks a 2025 session's client for every input request at once and
// returns the responses for the agent, or why there are none (a message and
// a JSON-RPC code), as [route.Call.Respond] takes them.
func Fulfil(ctx context.Context, ss Asker, reqs mcp.InputRequestMap, deadline time.Time) (json.RawMessage, string, int) {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	type answer struct {
		id   string
		resp mcp.InputResponse
		err  error
	}
	answers := make(chan answer, len(reqs))
	for id, ir := range reqs {
		go func() {
			var (
				resp mcp.InputResponse
				err  error
			)
			switch p := ir.(type) {
			case *mcp.ElicitParams:
				resp, err = ss.Elicit(ctx, p)
			case *mcp.CreateMessageWithToolsParams:
				resp, err = ss.CreateMessageWithTools(ctx, p)
			case *mcp.ListRootsParams:
				resp, err = ss.ListRoots(ctx, p)
			default:
				err = fmt.Errorf("unknown input request %T", ir)
			}
			answers <- answer{id, resp, err}
		}()
	}
	out := make(map[string]mcp.InputResponse, len(reqs))
	var problems, malformed []string
	for range reqs {
		a := <-answers
		if a.err != nil {
			problems = append(problems, fmt.Sprintf("input request %q: %v", a.id, a.err))
			continue
		}
		// go-sdk checked a form's content, if there was any; the agent
		// reads only what the gateway's own check lets through.
		if err := checkResponse(a.id, reqs[a.id], a.resp); err != nil {
			malformed = append(malformed, err.Error())
			continue
		}
		out[a.id] = a.resp
	}
	if problems != nil {
		sort.Strings(problems)
		return nil, "the client could not answer: " + strings.Join(problems, "; "), jsonrpc.CodeInvalidParams
	}
	if malformed != nil {
		sort.Strings(malformed)
		return nil, strings.Join(malformed, "; "), jsonrpc.CodeInvalidParams
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, "the client's responses could not be passed on: " + err.Error(), jsonrpc.CodeInternalError
	}
	return b, "", 0
}

// respond gives the agent of a held ask the client's responses from its
// retried request, or why there are none.
func (h *held) respond(responses mcp.InputResponseMap) {
	if out, err := collect(responses, h.asked); err != nil {
		h.call.Respond(nil, err.Error(), jsonrpc.CodeInvalidParams)
	} else {
		h.call.Respond(out, "", 0)
	}
}

// askClient passes an agent's ask (q) to the client of the request, for a
// tool call or a prompt. With again true the agent has been answered (or
// told why not) and the caller waits for the call's next event. Otherwise
// the request ends here: with err (-32021 on 2026-07-28 when the client
// lacks a capability; ended has logged the call), or, on 2026-07-28, with
// the input requests and the sealed state of the call now held for the
// client's retry (ended logs it if the retry never comes).
func (f *Pipeline) askClient(ctx context.Context, ss *mcp.ServerSession, meta mcp.Meta, call *route.Call, q *agentproto.Message,
	keyID, name string, start time.Time, ended func(route.Result, time.Time)) (reqs mcp.InputRequestMap, state string, again bool, err error) {
	reqs, methods, err := parseAsk(q)
	if err != nil {
		call.Respond(nil, err.Error(), jsonrpc.CodeInvalidParams)
		return nil, "", true, nil
	}
	call.Note(askedLine(reqs))
	caps, modern := declared(ss, meta)
	if missing := missingCaps(caps, methods); missing != nil {
		msg := fmt.Sprintf("the MCP client did not declare the %s capability, so it cannot answer", strings.Join(missing, " and "))
		call.Respond(nil, msg, mcp.CodeMissingRequiredClientCapabilities)
		if !modern {
			return nil, "", true, nil
		}
		// 2026-07-28: the request fails with -32021, so that the client
		// can declare the capability and call again.
		ended(call.Abandon(agentproto.ReasonCancelled), start)
		return nil, "", false, errMissingCaps(missing)
	}
	if !modern && ss != nil {
		// A 2025 session: ask the client over the session now, so that
		// whatever goes wrong reaches the agent as an answer.
		call.Respond(Fulfil(ctx, askerFor(ctx, ss), reqs, call.Deadline()))
		return nil, "", true, nil
	}
	state = f.held.hold(&held{call: call, asked: reqs, keyID: keyID, name: name, start: start}, func(h *held, res route.Result) {
		ended(res, h.start) // the client never answered: log the timeout
	})
	return reqs, state, false, nil
}

// Asker puts a 2025 session's server-to-client requests to its client: the
// *mcp.ServerSession in go-sdk's handlers, an Asker of the session era on an early
// call's own stream ([Call.OnStream]).
type Asker interface {
	Elicit(context.Context, *mcp.ElicitParams) (*mcp.ElicitResult, error)
	CreateMessageWithTools(context.Context, *mcp.CreateMessageWithToolsParams) (*mcp.CreateMessageWithToolsResult, error)
	ListRoots(context.Context, *mcp.ListRootsParams) (*mcp.ListRootsResult, error)
}

var _ Asker = (*mcp.ServerSession)(nil)

// askerFor returns who puts the questions of ctx's call to session ss's
// client: the call's own stream when the early path answers it, else ss.
func askerFor(ctx context.Context, ss *mcp.ServerSession) Asker {
	if c := toolCallFrom(ctx); c != nil && c.ask != nil {
		return c.ask
	}
	return ss
}
