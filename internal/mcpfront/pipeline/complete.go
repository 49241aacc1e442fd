package pipeline

import (
	"context"
	"encoding/json"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
)

// maxCompletions is how many suggestions one answer carries (MCP's limit).
const maxCompletions = 100

// CompletionHandler answers completion/complete: suggestions for a prompt
// argument or a resource template's variable, from the agent when it
// registered a completer for it (a call of kind complete), else none.
func (f *Pipeline) CompletionHandler(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	none := &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{}}}
	key, _ := KeyFrom(req.Extra.TokenInfo)
	if req.Params == nil || req.Params.Ref == nil || req.Params.Argument.Name == "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "completion/complete needs a ref and an argument name"}
	}
	snap := f.reg.Snapshot(key.ProjectID)
	var (
		registered, exposed, agentKey string
		completable                   bool
		target                        func(*agents.Snapshot) ([]*agents.Replica, time.Time, bool)
	)
	switch ref := req.Params.Ref; ref.Type {
	case "ref/prompt":
		p := snap.Prompts[ref.Name]
		if p == nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Prompt " + TrimName(ref.Name) + " not found"}
		}
		for _, a := range p.Def.Arguments {
			if a.Name == req.Params.Argument.Name {
				completable = a.Completable
			}
		}
		registered, exposed, agentKey = p.Def.Name, p.Name, p.AgentKey
		name := p.Name
		target = func(s *agents.Snapshot) ([]*agents.Replica, time.Time, bool) {
			p := s.Prompts[name]
			if p == nil {
				return nil, time.Time{}, false
			}
			return p.Replicas, p.GraceUntil, true
		}
	case "ref/resource":
		r := snap.Resources[ref.URI]
		if r == nil || !r.Def.Template {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Resource template " + TrimName(ref.URI) + " not found"}
		}
		completable = r.Def.Completable
		registered, exposed, agentKey = r.Def.URI, r.Def.URI, r.AgentKey
		uri := r.Def.URI
		target = func(s *agents.Snapshot) ([]*agents.Replica, time.Time, bool) {
			r := s.Resources[uri]
			if r == nil || !r.Def.Template {
				return nil, time.Time{}, false
			}
			return r.Replicas, r.GraceUntil, true
		}
	default:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "completion/complete: ref.type must be ref/prompt or ref/resource"}
	}
	if !completable {
		return none, nil
	}
	var context map[string]string
	if req.Params.Context != nil {
		context = req.Params.Context.Arguments
	}
	args, _ := json.Marshal(map[string]any{"argument": req.Params.Argument.Name, "value": req.Params.Argument.Value, "context": context})
	raw, err := f.deliverRead(ctx, key, agentproto.KindComplete, exposed, registered, agentKey, args, target, nil)
	if err != nil {
		return nil, err
	}
	var out struct {
		Values []string `json:"values"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "The agent sent suggestions the gateway could not read: " + err.Error()}
	}
	res := &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: out.Values, Total: len(out.Values)}}
	if res.Completion.Values == nil {
		res.Completion.Values = []string{}
	}
	if len(out.Values) > maxCompletions {
		res.Completion.Values, res.Completion.HasMore = out.Values[:maxCompletions], true
	}
	return res, nil
}
