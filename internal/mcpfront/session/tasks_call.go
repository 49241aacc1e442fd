package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/mcpfront/pipeline"
	"github.com/spacefix/spacefix/internal/mcpfront/wire"
	"github.com/spacefix/spacefix/internal/route"
	"github.com/spacefix/spacefix/internal/tasks"
)

// taskCall is a tools/call of a 2025-11-25 session as answerTaskCall reads
// it.
type taskCall struct {
	id   []byte // as sent: an integer or a plain string
	name string
	args json.RawMessage
	meta json.RawMessage
	task json.RawMessage // params.task; nil or null: a plain call
}

// parseTaskCall reads a tools/call; ok is false for anything else, or a
// request go-sdk must answer (an id it would not echo as sent, a member it
// would read twice).
func parseTaskCall(req *wire.Request) (c taskCall, ok bool) {
	if !req.Plain || string(req.MethodRaw) != `"tools/call"` || !wire.PlainID(req.ID) || len(req.Params) == 0 || req.Params[0] != '{' {
		return c, false
	}
	c.id, c.args, c.meta, c.task = req.ID, req.Args, req.Meta, req.Task
	if c.name, ok = wire.JSONString(req.Name); !ok || c.name == "" {
		return c, false
	}
	if string(c.task) == "null" {
		c.task = nil
	}
	return c, true
}

// taskTTL reads params.task's ttl (milliseconds; absent is 0, the
// project's cap).
func taskTTL(task json.RawMessage) (time.Duration, bool) {
	var p struct {
		TTL *float64 `json:"ttl"`
	}
	if len(task) == 0 || task[0] != '{' || json.Unmarshal(task, &p) != nil {
		return 0, false
	}
	if p.TTL == nil {
		return 0, true
	}
	if *p.TTL < 0 {
		return 0, false
	}
	const most = 1e12 // ms, some 31 years: past any cap, short of overflow
	return time.Duration(min(*p.TTL, most)) * time.Millisecond, true
}

// AnswerTaskCall answers, before go-sdk, a tools/call of a 2025-11-25
// session that concerns tasks: one with params.task (go-sdk would drop
// it), and one without to a tool whose task support is required. It
// reports whether it answered; anything else goes on to the early path or
// go-sdk.
func (f *Era) AnswerTaskCall(w http.ResponseWriter, r *http.Request, req *wire.Request, v *Sessions, sessionID string) bool {
	if f.tasks == nil || !wire.PlainHeaders(r, false) {
		return false
	}
	call, ok := parseTaskCall(req)
	if !ok {
		return false
	}
	ss := v.SessionOf(sessionID)
	if !taskSession(ss) {
		return false
	}
	// Whether the call concerns tasks at all: looked up without counting
	// the rate limit, which the call's own path counts.
	c := f.controls.Get(r.Context(), v.key.ProjectID)
	t := f.reg.Snapshot(v.key.ProjectID).Tools[call.name]
	if t == nil || !f.pipe.Permits(r.Context(), v.key, c, t) {
		return false // go-sdk's path says "not found"
	}
	support := t.Def.TaskSupport()
	out := &wire.SSEStream{W: w}
	switch {
	case call.task == nil && (support != agentproto.TaskRequired || !v.declaredTasks(sessionID)):
		// A client that does not speak tasks gets a required tool as a
		// job (pipeline/jobs.go), on the call's own path.
		return false
	case call.task == nil:
		wire.WriteCallAnswer(out, call.id, nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf(msgTaskRequired, t.Name)}, false, f.impl, f.log)
		return true
	case support != agentproto.TaskOptional && support != agentproto.TaskRequired:
		wire.WriteCallAnswer(out, call.id, nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf(msgTaskRefused, t.Name)}, false, f.impl, f.log)
		return true
	}
	task, err := f.startSessionTask(r.Context(), v, ss, call)
	if err != nil {
		wire.WriteCallAnswer(out, call.id, nil, err, false, f.impl, f.log)
		return true
	}
	b, err := wire.MarshalPlain(map[string]taskWire{"task": wireTask(task)})
	if err != nil {
		wire.WriteCallAnswer(out, call.id, nil, err, false, f.impl, f.log)
		return true
	}
	v.watchTask(ss, task.ID)
	out.Event(wire.ResultMessage(call.id, b))
	return true
}

// startSessionTask makes the checks of a plain call for call, then has the
// runtime start it as a task. The error is the JSON-RPC error to answer:
// a task-augmented request gets a task or an error, never a tool result.
func (f *Era) startSessionTask(ctx context.Context, v *Sessions, ss *mcp.ServerSession, call taskCall) (tasks.Task, error) {
	ttl, ok := taskTTL(call.task)
	if !ok {
		return tasks.Task{}, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msgTaskTTL}
	}
	t, ctl, refused, err := f.pipe.AdmitCall(ctx, v.key, call.name, false)
	if err != nil {
		return tasks.Task{}, err
	}
	if refused != nil {
		return tasks.Task{}, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: pipeline.FirstText(refused)}
	}
	var meta mcp.Meta
	if call.meta != nil {
		if err := json.Unmarshal(call.meta, &meta); err != nil {
			return tasks.Task{}, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "params._meta must be an object."}
		}
	}
	// The call pipeline resolves it and starts the task.
	st := f.pipe.StartTask(ctx, v.key, t, ctl, &pipeline.Request{
		Name: call.name, Args: call.args, Meta: meta, Session: ss,
	}, tasksVersion, ttl)
	switch {
	case st.RPCErr != nil:
		return tasks.Task{}, st.RPCErr
	case st.Refused != nil:
		return tasks.Task{}, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: pipeline.FirstText(st.Refused)}
	case st.Unpicked != nil && st.Unpicked.Outcome == route.NoReplica:
		return tasks.Task{}, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: st.Unpicked.Detail}
	case st.Unpicked != nil:
		return tasks.Task{}, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Tool " + pipeline.TrimName(call.name) + " not found"}
	}
	task, err := st.Task, st.Err
	if errors.Is(err, tasks.ErrTooManyTasks) {
		// A task or an error: refused as the project's controls refuse.
		return tasks.Task{}, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: err.Error()}
	}
	if err != nil {
		f.log.Error("start a task", "tool", t.Name, "key", v.key.ID, "err", err)
		return tasks.Task{}, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "The gateway could not start the task; try again in a moment."}
	}
	return task, nil
}

// TaskHangUp ends a tasks/result wait when its client hangs up: go-sdk
// runs a session's requests in the session's context, not the HTTP
// request's (see pipeline.HangUp).
func (v *Sessions) TaskHangUp(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tasks/result" {
			return next(ctx, method, req)
		}
		sr, ok := req.(*mcp.ServerRequest[*taskIDParams])
		if !ok {
			return next(ctx, method, req)
		}
		if hung := pipeline.HangUp(pipeline.TokenOf(sr.Extra)); hung != nil {
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			defer cancel()
			defer context.AfterFunc(hung, cancel)()
		}
		return next(ctx, method, req)
	}
}
