//lint:file-ignore SA1019 sampling and roots are deprecated in 2026-07-28 (SEP-2577) but still input requests a server may make; the bridge relays them
package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
)

// A server that speaks 2026-07-28 asks for input by answering a request
// with resultType "input_required": input requests by id and an opaque
// requestState (SEP-2322). The bridge asks the gateway's client for them
// through core.Together under the server's own ids, so the client sees the
// server's inputRequests, and retries the request with the client's
// responses and the server's requestState until the server completes it.
// Each request carries the capabilities the call's client declared, so the
// server asks only for what that client can give, and refuses (-32021) as
// it would refuse the client itself.

// maxInputRounds bounds the input_required rounds of one request, as
// go-sdk's client does.
const maxInputRounds = 10

// callerMeta is the _meta of a request the bridge makes to a 2026-07-28
// server for the call ctx serves: the capabilities the call's client
// declared (elicitation, sampling, roots; none outside a call or for a
// resource read), in place of the bridge's own, and every log message
// (the bridge's log keeps what its level says; see clientOptions).
func callerMeta(ctx context.Context) mcp.Meta {
	caps := map[string]any{}
	c, _ := core.CallFrom(ctx)
	for _, name := range c.ClientCapabilities {
		switch name {
		case "elicitation":
			caps[name] = map[string]any{"form": map[string]any{}} // the bridge relays forms only
		case "sampling", "roots":
			caps[name] = map[string]any{}
		}
	}
	return mcp.Meta{mcp.MetaKeyClientCapabilities: caps, mcp.MetaKeyLogLevel: "debug"}
}

// answer asks the client of the call ctx serves for a server's input
// requests and returns its responses by the server's ids. Requests of one
// kind (a form, a message from the model, the roots) go one to a round,
// so a server that asks for two forms at once gets them after two rounds
// with the client.
func answer(ctx context.Context, reqs mcp.InputRequestMap) (mcp.InputResponseMap, error) {
	if len(reqs) == 0 {
		return nil, errors.New("The MCP server is busy (it asked for no input and no result); try again later.")
	}
	var rounds []*round
	ids := make([]string, 0, len(reqs))
	for id := range reqs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if err := relayable(id, reqs[id]); err != nil {
			return nil, err
		}
		placed := false
		for _, r := range rounds {
			if placed = r.add(id, reqs[id]); placed {
				break
			}
		}
		if !placed {
			r := new(round)
			r.add(id, reqs[id])
			rounds = append(rounds, r)
		}
	}
	out := make(mcp.InputResponseMap, len(reqs))
	for _, r := range rounds {
		a, err := core.Together(ctx, r.in)
		if err != nil {
			return nil, err
		}
		r.responses(a, out)
	}
	return out, nil
}

// round is one core.Together: at most one request of each kind.
type round struct {
	in     core.Inputs
	elicit string // the server's ids of what in asks
	sample string
	roots  string
	has    [3]bool
}

// relayable says why the server's input request ir cannot be relayed, if
// it cannot.
func relayable(id string, ir mcp.InputRequest) error {
	switch p := ir.(type) {
	case *mcp.ElicitParams:
		if p.Mode == "url" {
			return fmt.Errorf("The MCP server asked for a URL elicitation (input request %q); the bridge relays form elicitation only.", id)
		}
	case *mcp.CreateMessageWithToolsParams:
		if len(p.Tools) > 0 {
			return fmt.Errorf("The MCP server asked the client's model to use tools (input request %q); the bridge relays sampling without tools only.", id)
		}
	case *mcp.ListRootsParams:
	default:
		return fmt.Errorf("The MCP server made an input request the bridge does not know (%q, %T).", id, ir)
	}
	return nil
}

// add puts ir in the round unless the round already has one of its kind.
func (r *round) add(id string, ir mcp.InputRequest) bool {
	switch p := ir.(type) {
	case *mcp.ElicitParams:
		if r.has[0] {
			return false
		}
		r.has[0], r.elicit = true, id
		r.in.Elicit, r.in.ElicitID = &core.ElicitRequest{Message: p.Message, Schema: p.RequestedSchema}, id
	case *mcp.CreateMessageWithToolsParams:
		if r.has[1] {
			return false
		}
		r.has[1], r.sample = true, id
		r.in.Sample, r.in.SampleID = sampleRequest(p), id
	case *mcp.ListRootsParams:
		if r.has[2] {
			return false
		}
		r.has[2], r.roots = true, id
		r.in.Roots, r.in.RootsID = true, id
	default:
		return false
	}
	return true
}

// responses puts the client's answers to the round into out by the
// server's ids.
func (r *round) responses(a core.Answers, out mcp.InputResponseMap) {
	if r.has[0] {
		out[r.elicit] = &mcp.ElicitResult{Action: a.Elicit.Action, Content: a.Elicit.Content}
	}
	if r.has[1] {
		res := &mcp.CreateMessageWithToolsResult{Role: mcp.Role(a.Sample.Role), Model: a.Sample.Model, StopReason: a.Sample.StopReason}
		for _, c := range a.Sample.Content {
			res.Content = append(res.Content, mcpContent(c))
		}
		out[r.sample] = res
	}
	if r.has[2] {
		roots := &mcp.ListRootsResult{Roots: []*mcp.Root{}}
		for _, root := range a.Roots {
			roots.Roots = append(roots.Roots, &mcp.Root{URI: root.URI, Name: root.Name})
		}
		out[r.roots] = roots
	}
}

// sampleRequest converts a server's sampling input request into core's; a
// message of several content parts becomes as many messages of its role.
func sampleRequest(p *mcp.CreateMessageWithToolsParams) *core.SampleRequest {
	req := &core.SampleRequest{SystemPrompt: p.SystemPrompt, MaxTokens: int(p.MaxTokens), Temperature: p.Temperature,
		StopSequences: p.StopSequences, IncludeContext: p.IncludeContext, ModelPreferences: modelPreferences(p.ModelPreferences)}
	for _, m := range p.Messages {
		for _, c := range m.Content {
			req.Messages = append(req.Messages, core.SamplingMessage{Role: string(m.Role), Content: content(c)})
		}
	}
	return req
}

func modelPreferences(mp *mcp.ModelPreferences) *core.ModelPreferences {
	if mp == nil {
		return nil
	}
	out := &core.ModelPreferences{CostPriority: mp.CostPriority, SpeedPriority: mp.SpeedPriority, IntelligencePriority: mp.IntelligencePriority}
	for _, h := range mp.Hints {
		out.Hints = append(out.Hints, core.ModelHint{Name: h.Name})
	}
	return out
}

// missingCapability passes a 2026-07-28 server's -32021 (the call's client
// did not declare a capability the request needs) on to the client. The
// agent protocol has no error with a JSON-RPC code; it has the gateway's
// own refusal of an ask for what the client did not declare, which on
// 2026-07-28 fails the client's request with -32021 and
// data.requiredCapabilities naming what is missing. So the bridge asks,
// through core.Together, for exactly the capabilities the server requires
// and the client lacks: the gateway checks the capabilities before
// anything reaches the client, and refuses. 2025 clients, whose request
// goes on, and servers that require something else get the server's
// message as the call's error.
func missingCapability(ctx context.Context, rpc *jsonrpc.Error) error {
	msg := errors.New(rpc.Message)
	c, ok := core.CallFrom(ctx)
	if !ok || (c.Kind != "tool" && c.Kind != "prompt") {
		return msg // the gateway takes asks from tool calls and prompts only
	}
	var data struct {
		Required map[string]json.RawMessage `json:"requiredCapabilities"`
	}
	_ = json.Unmarshal(rpc.Data, &data)
	var in core.Inputs
	asked := false
	lacks := func(name string) bool {
		_, required := data.Required[name]
		return required && !slices.Contains(c.ClientCapabilities, name)
	}
	if lacks("elicitation") {
		in.Elicit, asked = &core.ElicitRequest{Message: rpc.Message, Schema: map[string]any{"type": "object", "properties": map[string]any{}}}, true
	}
	if lacks("sampling") {
		in.Sample = &core.SampleRequest{MaxTokens: 1, Messages: []core.SamplingMessage{{Role: "user", Content: core.Text(rpc.Message)}}}
		asked = true
	}
	if lacks("roots") {
		in.Roots, asked = true, true
	}
	if asked {
		_, _ = core.Together(ctx, in) // refused: the client declared none of these
	}
	return msg
}
