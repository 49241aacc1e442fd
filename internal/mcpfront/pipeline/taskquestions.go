package pipeline

import (
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/route"
	"github.com/spacefix/spacefix/internal/tasks"
)

// TaskQuestions is the front's conversion of an agent's questions for the
// task runtime ([tasks.Options.Questions]): a task's questions reach its
// client as 2026-07-28 inputRequests (in tasks/get, and through tasks/result
// in a 2025-11-25 session), in the very shapes a plain call's do — a
// confirm as the form of [question], an ask as its own input requests,
// checked as [parseAsk] checks them — and the client's inputResponses go
// back to the agent checked as a plain call's retry is ([collect],
// [confirmed]). It holds nothing: one value serves every task.
type TaskQuestions struct{}

var _ tasks.Questions = TaskQuestions{}

// InputRequests returns the inputRequests map of question q.
func (TaskQuestions) InputRequests(q *agentproto.Message) (json.RawMessage, error) {
	switch q.Type {
	case agentproto.TypeConfirm:
		return json.Marshal(question(q))
	case agentproto.TypeAsk:
		reqs, _, err := parseAsk(q)
		if err != nil {
			return nil, err
		}
		return json.Marshal(reqs)
	}
	return nil, fmt.Errorf("the gateway cannot pass a %q question to a task's client", q.Type)
}

// Answer gives call the client's responses to question q (asked as asked),
// or tells the agent why they do not answer it.
func (TaskQuestions) Answer(call *route.Call, q *agentproto.Message, asked json.RawMessage, responses map[string]json.RawMessage) {
	raw, err := json.Marshal(responses)
	var rs mcp.InputResponseMap
	if err == nil {
		err = json.Unmarshal(raw, &rs)
	}
	if q.Type == agentproto.TypeConfirm {
		r, ok := rs[q.Input].(*mcp.ElicitResult)
		if err != nil || !ok {
			call.Answer(q.Input, false, errNoAnswer)
			return
		}
		accepted, err := confirmed(r)
		call.Answer(q.Input, accepted, err)
		return
	}
	var reqs mcp.InputRequestMap
	if err == nil {
		err = json.Unmarshal(asked, &reqs)
	}
	if err != nil {
		call.Respond(nil, "the client's responses could not be read: "+err.Error(), jsonrpc.CodeInvalidParams)
		return
	}
	out, err := collect(rs, reqs)
	if err != nil {
		call.Respond(nil, err.Error(), jsonrpc.CodeInvalidParams)
		return
	}
	call.Respond(out, "", 0)
}
