//lint:file-ignore SA1019 sampling and roots are deprecated in 2026-07-28 (SEP-2577) but still part of 2025-11-25, where a task's handler may ask for them
package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/mcpfront/pipeline"
	"github.com/spacefix/spacefix/internal/mcpfront/wire"
	"github.com/spacefix/spacefix/internal/tasks"
)

// Tasks in 2025-11-25 sessions (experimental; spec basic/utilities/tasks).
// The runtime ([tasks.Manager]) runs and keeps them; this file is their
// 2025-11-25 face:
//
//   - initialize answers the capability tasks {list, cancel,
//     requests.tools.call} to a session of that version (go-sdk's
//     ServerCapabilities has no such field: [initWithTasks] adds it);
//   - a tools/call with params.task, which go-sdk would drop, is answered
//     before go-sdk ([Era.AnswerTaskCall], from serveSession): after the
//     checks of a plain call ([pipeline.Pipeline.AdmitCall], [pipeline.Pipeline.pickCall]) the call
//     goes to [tasks.Manager.Run], which stores the task before it returns,
//     and the client gets CreateTaskResult {task} at once. A forbidden
//     tool called as a task, and a required one called without, get -32601;
//   - tasks/get, tasks/result, tasks/list and tasks/cancel are go-sdk custom
//     methods of each view's server ([Sessions.AddTaskMethods]), so that what
//     the tasks/result handler asks the client with its session
//     (elicitation/create, sampling/createMessage, roots/list, through
//     [pipeline.Fulfil]) goes out on the tasks/result stream, as the spec asks for a
//     task in input_required; the answers go to [tasks.Manager.Answer] in
//     the 2026-07-28 inputResponses shape;
//   - notifications/tasks/status goes to the GET streams of the session
//     that created the task whenever its status changes ([Sessions.watchTask];
//     go-sdk sends no notification it does not know, so the gateway
//     writes it between go-sdk's events: [taskStream], in
//     tasks_notify.go).
//
// A task is its owner's ([tasks.Manager.OwnerOf]: the key, or the person
// behind an OAuth grant): another caller's task id gets exactly the error
// of an unknown one. At this version an isError result ends the task
// failed; the runtime keeps it as its Result and tasks/result returns it.

// tasksVersion is the protocol version whose sessions speak tasks.
const tasksVersion = "2025-11-25"

// metaRelatedTask is the _meta key that ties a message to its task.
const metaRelatedTask = "io.modelcontextprotocol/related-task"

// tasksPageSize is how many tasks one tasks/list page holds.
const tasksPageSize = 50

// tasksCapability is the server capability a 2025-11-25 session is told.
var tasksCapability = json.RawMessage(`{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`)

// taskSession reports whether ss speaks tasks as 2025-11-25 spells them.
func taskSession(ss *mcp.ServerSession) bool {
	if ss == nil {
		return false
	}
	ip := ss.InitializeParams()
	return ip != nil && ip.ProtocolVersion >= tasksVersion && ip.ProtocolVersion < wire.ModernVersion
}

// WithTasksCapability adds the tasks capability to the initialize result of
// a 2025-11-25 session when the gateway runs tasks.
func (f *Era) WithTasksCapability(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if method != "initialize" || err != nil || f.tasks == nil {
			return res, err
		}
		if ir, ok := res.(*mcp.InitializeResult); ok && ir.ProtocolVersion == tasksVersion {
			return initWithTasks{ir}, nil
		}
		return res, nil
	}
}

// initWithTasks is an initialize result that declares the tasks capability.
type initWithTasks struct{ *mcp.InitializeResult }

func (r initWithTasks) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(r.InitializeResult)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	caps := map[string]json.RawMessage{}
	if raw := m["capabilities"]; len(raw) > 0 {
		if err := json.Unmarshal(raw, &caps); err != nil {
			return nil, err
		}
	}
	caps["tasks"] = tasksCapability
	if m["capabilities"], err = json.Marshal(caps); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

// AddTaskMethods registers the tasks/* methods on the view's server. Each
// answers only a 2025-11-25 session; at any other version they do not
// exist (-32601).
func (v *Sessions) AddTaskMethods() {
	if v.era.tasks == nil {
		return
	}
	// The names are not go-sdk's standard methods: these never fail.
	_ = mcp.AddReceivingCustomMethod(v.server, "tasks/get", v.taskGet)
	_ = mcp.AddReceivingCustomMethod(v.server, "tasks/result", v.taskPayload)
	_ = mcp.AddReceivingCustomMethod(v.server, "tasks/list", v.taskList)
	_ = mcp.AddReceivingCustomMethod(v.server, "tasks/cancel", v.taskCancel)
}

// taskOwner returns who the view's key's tasks belong to, for a request of
// session ss; the error is the JSON-RPC error to answer.
func (v *Sessions) taskOwner(ctx context.Context, ss *mcp.ServerSession, method string) (tasks.Owner, error) {
	if !taskSession(ss) {
		return "", &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "Method " + method + " not found: tasks are spoken in sessions of protocol version " + tasksVersion + "."}
	}
	o, err := v.era.tasks.OwnerOf(ctx, v.key)
	if err != nil {
		v.era.log.Error("task owner", "key", v.key.ID, "err", err)
		return "", &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msgTaskTrouble}
	}
	return o, nil
}

// taskError is the JSON-RPC error a client gets when the runtime answered
// err for task id.
func (v *Sessions) taskError(id string, err error) error {
	var jerr *jsonrpc.Error
	switch {
	case errors.Is(err, tasks.ErrNotFound):
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(msgTaskNotFound, pipeline.TrimName(id))}
	case errors.As(err, &jerr):
		return jerr
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	v.era.log.Error("task", "task", id, "key", v.key.ID, "err", err)
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msgTaskTrouble}
}

// taskCaller is the owner a request about one task (p) acts as, or the
// error to answer: no tasks here, or no task id.
func (v *Sessions) taskCaller(ctx context.Context, ss *mcp.ServerSession, method string, p *taskIDParams) (tasks.Owner, error) {
	owner, err := v.taskOwner(ctx, ss, method)
	if err == nil && (p == nil || p.TaskID == "") {
		err = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msgTaskNoID}
	}
	return owner, err
}

func (v *Sessions) taskGet(ctx context.Context, ss *mcp.ServerSession, p *taskIDParams) (*taskResult, error) {
	owner, err := v.taskCaller(ctx, ss, "tasks/get", p)
	if err != nil {
		return nil, err
	}
	t, err := v.era.tasks.Get(ctx, owner, v.key.ProjectID, p.TaskID)
	if err != nil {
		return nil, v.taskError(p.TaskID, err)
	}
	return &taskResult{taskWire: wireTask(t)}, nil
}

func (v *Sessions) taskList(ctx context.Context, ss *mcp.ServerSession, p *taskListParams) (*taskList, error) {
	owner, err := v.taskOwner(ctx, ss, "tasks/list")
	if err != nil {
		return nil, err
	}
	cursor := ""
	if p != nil {
		cursor = p.Cursor
	}
	ts, next, err := v.era.tasks.List(ctx, owner, v.key.ProjectID, cursor, tasksPageSize)
	if err != nil {
		if cursor != "" && errors.Is(err, tasks.ErrNotFound) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Invalid cursor: pass the nextCursor of the previous tasks/list, or none for the first page."}
		}
		return nil, v.taskError("", err)
	}
	out := &taskList{Tasks: make([]taskWire, 0, len(ts)), NextCursor: next}
	for _, t := range ts {
		out.Tasks = append(out.Tasks, wireTask(t))
	}
	return out, nil
}

func (v *Sessions) taskCancel(ctx context.Context, ss *mcp.ServerSession, p *taskIDParams) (*taskResult, error) {
	owner, err := v.taskCaller(ctx, ss, "tasks/cancel", p)
	if err != nil {
		return nil, err
	}
	t, err := v.era.tasks.Get(ctx, owner, v.key.ProjectID, p.TaskID)
	if err != nil {
		return nil, v.taskError(p.TaskID, err)
	}
	// The spec refuses to cancel an ended task (-32602); the runtime would
	// leave it as it is.
	if status, _ := sessionStatus(t); status.Terminal() {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(msgTaskTerminal, t.ID, status)}
	}
	if t, err = v.era.tasks.Cancel(ctx, owner, v.key.ProjectID, p.TaskID); err != nil {
		return nil, v.taskError(p.TaskID, err)
	}
	return &taskResult{taskWire: wireTask(t)}, nil
}

// taskPayload answers tasks/result: it waits until the task ends and
// answers what the call would have answered, with the related-task _meta.
// While the task waits for input, its questions go to the client on this
// request's stream (go-sdk sends a request made with ss in this handler's
// context there), and the answers to the runtime.
func (v *Sessions) taskPayload(ctx context.Context, ss *mcp.ServerSession, p *taskIDParams) (*rawResult, error) {
	owner, err := v.taskCaller(ctx, ss, "tasks/result", p)
	if err != nil {
		return nil, err
	}
	id := p.TaskID
	asked := map[string]bool{} // input request ids answered by this request
	for {
		t, err := v.era.tasks.Wait(ctx, owner, v.key.ProjectID, id)
		if err != nil {
			return nil, v.taskError(id, err)
		}
		if t.Status.Terminal() {
			return taskOutcome(t)
		}
		if t.Status == tasks.InputRequired {
			if reqs := unasked(t.InputRequests, asked); len(reqs) > 0 {
				responses := v.askForTask(ctx, ss, t, reqs)
				if err := v.era.tasks.Answer(ctx, owner, v.key.ProjectID, id, responses); err != nil && !errors.Is(err, tasks.ErrNotFound) {
					v.era.log.Warn("answer a task's input requests", "task", id, "err", err)
				}
				continue
			}
		}
		// The runtime has not moved the task on from what was answered
		// yet: look again after its poll interval.
		if err := pause(ctx, t.PollInterval); err != nil {
			return nil, err
		}
	}
}

// pause waits d (at least 50 ms, at most 2 s), or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	d = min(max(d, 50*time.Millisecond), 2*time.Second)
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// unasked returns the input requests of raw (the inputRequests map) whose
// ids are not in asked, and adds them to asked. Input request ids are
// unique for a task's life, so an id asked once is answered once.
func unasked(raw json.RawMessage, asked map[string]bool) mcp.InputRequestMap {
	var all mcp.InputRequestMap
	if len(raw) == 0 || json.Unmarshal(raw, &all) != nil {
		return nil
	}
	out := mcp.InputRequestMap{}
	for id, ir := range all {
		if !asked[id] {
			asked[id] = true
			out[id] = ir
		}
	}
	return out
}

// askForTask asks the client of session ss the input requests of task t,
// each tied to the task by its _meta, and returns the responses as the
// runtime takes them. A request the client could not answer has no
// response: the runtime tells the handler so.
func (v *Sessions) askForTask(ctx context.Context, ss *mcp.ServerSession, t tasks.Task, reqs mcp.InputRequestMap) map[string]json.RawMessage {
	related := map[string]any{"taskId": t.ID}
	for _, ir := range reqs {
		switch p := ir.(type) {
		case *mcp.ElicitParams:
			p.Meta = withMeta(p.Meta, metaRelatedTask, related)
		case *mcp.CreateMessageWithToolsParams:
			p.Meta = withMeta(p.Meta, metaRelatedTask, related)
		case *mcp.ListRootsParams:
			p.Meta = withMeta(p.Meta, metaRelatedTask, related)
		}
	}
	deadline := t.Deadline
	if deadline.IsZero() {
		deadline = time.Now().Add(24 * time.Hour)
	}
	raw, problem, _ := pipeline.Fulfil(ctx, ss, reqs, deadline)
	out := map[string]json.RawMessage{}
	if problem != "" {
		v.era.log.Info("task input not given", "task", t.ID, "why", problem)
		return out
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		v.era.log.Error("task input responses", "task", t.ID, "err", err)
	}
	return out
}

func withMeta(m mcp.Meta, key string, val any) mcp.Meta {
	if m == nil {
		m = mcp.Meta{}
	}
	m[key] = val
	return m
}

// taskOutcome is what tasks/result answers for ended task t: exactly what
// the call would have answered, with the related-task _meta on a result.
func taskOutcome(t tasks.Task) (*rawResult, error) {
	switch {
	case t.Status == tasks.Cancelled:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf(msgTaskStopped, t.ID)}
	case t.Error != nil:
		return nil, &jsonrpc.Error{Code: int64(t.Error.Code), Message: t.Error.Message, Data: t.Error.Data}
	}
	result := t.Result
	if len(result) == 0 {
		// Failed without a result of the agent's (it disconnected, ran too
		// long, its gateway stopped): what a plain call would answer.
		b, err := json.Marshal(pipeline.ErrorResult(t.StatusMessage))
		if err != nil {
			return nil, err
		}
		result = b
	}
	raw, err := relatedResult(result, t.ID)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "The task's result could not be read: " + err.Error()}
	}
	return &rawResult{raw: raw}, nil
}

// relatedResult is result (a JSON object) with _meta[related-task] set to
// task id.
func relatedResult(result json.RawMessage, id string) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(result, &m); err != nil {
		return nil, err
	}
	meta := map[string]json.RawMessage{}
	if raw := m["_meta"]; len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &meta); err != nil {
			return nil, err
		}
	}
	rel, _ := json.Marshal(map[string]string{"taskId": id})
	meta[metaRelatedTask] = rel
	var err error
	if m["_meta"], err = json.Marshal(meta); err != nil {
		return nil, err
	}
	if _, ok := m["content"]; !ok {
		m["content"] = json.RawMessage("[]")
	}
	return wire.MarshalPlain(m)
}
