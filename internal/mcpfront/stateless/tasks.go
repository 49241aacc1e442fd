package stateless

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/mcpfront/pipeline"
	"github.com/spacefix/spacefix/internal/mcpfront/wire"
	"github.com/spacefix/spacefix/internal/recovery"
	"github.com/spacefix/spacefix/internal/route"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/tasks"
)

// The 2026-07-28 tasks extension, io.modelcontextprotocol/tasks (SEP-2663;
// spec text in modelcontextprotocol/ext-tasks), served before go-sdk,
// which knows none of it:
//
//   - server/discover advertises the extension (mcpfront/view.go);
//   - a tools/call of a tool with execution.taskSupport optional or
//     required, from a request whose client declared the extension in
//     _meta["io.modelcontextprotocol/clientCapabilities"].extensions,
//     passes the checks of a plain call (admitCall, pickCall), becomes a
//     task (tasks.Manager.Run stores it before the call is sent) and is
//     answered with a CreateTaskResult; the request's `task` parameter
//     (the 2025 shape) is ignored. A required tool called without the
//     extension gets -32021; an optional one runs as a plain call;
//   - tasks/get answers the DetailedTask (the result, the JSON-RPC error
//     or the input requests inline), tasks/update passes inputResponses to
//     the task's handler (responses to requests not outstanding are
//     ignored, as the extension says), tasks/cancel cancels it; both
//     answer an empty result. An unknown id, an expired task and another client's all get
//     the same -32602. tasks/result and tasks/list are gone at this
//     version (-32601). Mcp-Name must be params.taskId (-32020);
//   - subscriptions/listen naming task ids streams notifications/tasks,
//     each a full DetailedTask, for the caller's tasks among them.
//
// A tool that runs only as a task may ask its first questions before the
// client gets the task (SEP-2663: resolve multi round-trip input before
// creating the task): questions its handler asks within extAskFirst of
// the start come back as an input_required result whose requestState names
// the task, and the retry that answers them gets the CreateTaskResult.
// The task exists from the first request on, so the durability rule (no
// CreateTaskResult before tasks/get finds the task) holds either way.
//
// Everything else about a modern request — a malformed one, a method
// header that disagrees with the body, a tool without task support — goes
// on to the early path and go-sdk as before.

// tasksExtension is the extension's name, in capabilities and _meta.
const tasksExtension = "io.modelcontextprotocol/tasks"

// extAskFirst is how long a required-task tool's handler has to ask its
// first question before its client gets the task (see above). Short: a
// required task that asks nothing gets its CreateTaskResult this much
// later, at most.
const extAskFirst = 500 * time.Millisecond

// Messages a client reads.
const (
	msgExtTaskNotFound = "Task not found: no task with this id belongs to this client (it may have expired). Start the call again."
	msgExtGone         = "Method not found: %s is not part of the io.modelcontextprotocol/tasks extension at protocol 2026-07-28; the result is inline in tasks/get."
	msgExtInternal     = "The gateway could not reach its task store; try again in a moment."
)

// extRequest is a JSON-RPC request the extension answers.
type extRequest struct {
	JSONRPC string
	ID      json.RawMessage
	Method  string
	Params  extParams
	// rawResponses is params.inputResponses as sent: null and absent
	// differ from {}.
	rawResponses json.RawMessage
}

// extParams are the params of a request the extension answers.
type extParams struct {
	Meta           map[string]any             `json:"_meta"`
	TaskID         *string                    `json:"taskId"`
	InputResponses map[string]json.RawMessage `json:"-"` // decoded from rawResponses
	Name           string                     `json:"name"`
	Arguments      json.RawMessage            `json:"arguments"`
	RequestState   string                     `json:"requestState"`
	Notifications  *struct {
		TaskIDs []string `json:"taskIds"`
	} `json:"notifications"`
}

// Serve answers a 2026-07-28 request of the tasks extension
// (see above) and reports whether it did; false leaves the request, its
// body unread, to the early path and go-sdk.
func (f *Tasks) Serve(w http.ResponseWriter, r *http.Request, msg *wire.Request, key store.Key) bool {
	if f.tasks == nil {
		return false
	}
	method := r.Header.Get("Mcp-Method")
	switch {
	case strings.HasPrefix(method, "tasks/"), method == "subscriptions/listen":
	case method == "tools/call":
		// Only a tool with task support is ours: the header names it
		// (go-sdk refuses a request whose body names another).
		t := f.reg.Snapshot(key.ProjectID).Tools[strings.TrimSpace(r.Header.Get("Mcp-Name"))]
		if t == nil || t.Def.TaskSupport() == agentproto.TaskForbidden {
			return false
		}
	default:
		return false
	}
	req, ok := parseExtRequest(msg, r, method)
	if !ok {
		return false // go-sdk says what is wrong with it
	}
	defer pipeline.Recovered(f.log, method, func(mcp.Result, error) {
		f.writeExtError(w, req.ID, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: recovery.Message})
	})
	recovery.Hook("mcp " + method)
	switch method {
	case "tools/call":
		return f.extTaskCall(w, r, key, req)
	case "subscriptions/listen":
		if req.Params.Notifications == nil || req.Params.Notifications.TaskIDs == nil {
			return false // list changes only: go-sdk's
		}
		if !declaresExt(req.Params.Meta) {
			f.writeExtError(w, req.ID, errExtUndeclared("Task notifications need"))
			return true
		}
		f.listenExtTasks(w, r, key, req)
		return true
	case "tasks/get", "tasks/update", "tasks/cancel":
	default:
		f.writeExtError(w, req.ID, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf(msgExtGone, pipeline.TrimName(method))})
		return true
	}
	if req.Params.TaskID == nil {
		f.writeExtError(w, req.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Invalid params: " + method + " needs params.taskId, the id of the task."})
		return true
	}
	id := *req.Params.TaskID
	if name := strings.TrimSpace(r.Header.Get("Mcp-Name")); name != id {
		f.writeExtError(w, req.ID, &jsonrpc.Error{Code: mcp.CodeHeaderMismatch,
			Message: fmt.Sprintf("header mismatch: the Mcp-Name header (%q) must be params.taskId (%q)", pipeline.TrimName(name), pipeline.TrimName(id))})
		return true
	}
	if !declaresExt(req.Params.Meta) {
		f.writeExtError(w, req.ID, errExtUndeclared(method+" needs"))
		return true
	}
	owner, err := f.tasks.OwnerOf(r.Context(), key)
	if err != nil {
		f.log.Error("find a task's owner", "key", key.ID, "err", err)
		f.writeExtError(w, req.ID, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msgExtInternal})
		return true
	}
	switch method {
	case "tasks/get":
		t, err := f.tasks.Get(r.Context(), owner, key.ProjectID, id)
		if err != nil {
			f.writeExtError(w, req.ID, f.extTaskErr(err, id))
			return true
		}
		f.writeExtResult(w, req.ID, f.extDetailedTask(t, "complete"))
	case "tasks/update":
		if len(req.rawResponses) == 0 || req.rawResponses[0] != '{' {
			f.writeExtError(w, req.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
				Message: "Invalid params: tasks/update needs params.inputResponses, an object of responses by the keys of the task's inputRequests."})
			return true
		}
		if err := f.answerOutstanding(r.Context(), owner, key.ProjectID, id, req.Params.InputResponses); err != nil {
			f.writeExtError(w, req.ID, f.extTaskErr(err, id))
			return true
		}
		f.writeExtResult(w, req.ID, f.extAck())
	case "tasks/cancel":
		if _, err := f.tasks.Cancel(r.Context(), owner, key.ProjectID, id); err != nil {
			f.writeExtError(w, req.ID, f.extTaskErr(err, id))
			return true
		}
		f.writeExtResult(w, req.ID, f.extAck())
	}
	return true
}

// answerOutstanding gives task id the responses to its outstanding input
// requests and ignores the others — keys never asked, answered already or
// superseded — as SEP-2663 says a server should (the update is
// acknowledged all the same; the task's next tasks/get shows what it still
// waits for).
func (f *Tasks) answerOutstanding(ctx context.Context, owner tasks.Owner, projectID int64, id string, responses map[string]json.RawMessage) error {
	err := f.tasks.Answer(ctx, owner, projectID, id, responses)
	if !errors.Is(err, tasks.ErrBadResponses) {
		return err
	}
	t, err := f.tasks.Get(ctx, owner, projectID, id)
	if err != nil {
		return err
	}
	var outstanding map[string]json.RawMessage
	if json.Unmarshal(t.InputRequests, &outstanding) != nil {
		return nil
	}
	known := make(map[string]json.RawMessage, len(responses))
	for k, v := range responses {
		if _, ok := outstanding[k]; ok {
			known[k] = v
		}
	}
	if len(known) == 0 {
		return nil
	}
	if err := f.tasks.Answer(ctx, owner, projectID, id, known); !errors.Is(err, tasks.ErrBadResponses) {
		return err
	}
	return nil // the task moved on meanwhile
}

// parseExtRequest reads a request the extension may answer: a JSON-RPC
// request with an id, of the method its Mcp-Method header names, whose
// _meta gives the protocol version of its header and the client's
// capabilities, as go-sdk requires of a stateless request. ok is false for
// anything else. Of the request read in dispatch, only params are
// decoded, once.
func parseExtRequest(msg *wire.Request, r *http.Request, method string) (req extRequest, ok bool) {
	if rpc, _ := wire.JSONString(msg.RPC); rpc != "2.0" || msg.Method != method || len(msg.Params) == 0 {
		return req, false
	}
	var params struct {
		extParams
		InputResponses json.RawMessage `json:"inputResponses"`
	}
	if err := json.Unmarshal(msg.Params, &params); err != nil {
		return req, false
	}
	req.JSONRPC, req.ID, req.Method, req.Params = "2.0", json.RawMessage(msg.ID), method, params.extParams
	if len(req.ID) == 0 || (req.ID[0] != '"' && (req.ID[0] < '0' || req.ID[0] > '9') && req.ID[0] != '-') {
		return req, false // a notification, or an id go-sdk refuses
	}
	req.rawResponses = bytes.TrimSpace(params.InputResponses)
	if len(req.rawResponses) > 0 && json.Unmarshal(req.rawResponses, &req.Params.InputResponses) != nil {
		return req, false
	}
	if pv, _ := req.Params.Meta[mcp.MetaKeyProtocolVersion].(string); pv == "" || pv != r.Header.Get("Mcp-Protocol-Version") {
		return req, false
	}
	if _, ok := req.Params.Meta[mcp.MetaKeyClientCapabilities].(map[string]any); !ok {
		return req, false
	}
	return req, true
}

// declaresExt reports whether a request's client declared the tasks
// extension in its _meta's clientCapabilities.
func declaresExt(meta map[string]any) bool {
	caps, _ := meta[mcp.MetaKeyClientCapabilities].(map[string]any)
	ext, _ := caps["extensions"].(map[string]any)
	_, ok := ext[tasksExtension].(map[string]any)
	return ok
}

// errExtUndeclared is -32021 for a request that needs the extension and
// did not declare it; what says what needed it.
func errExtUndeclared(what string) *jsonrpc.Error {
	return &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities,
		Message: what + " the " + tasksExtension + " extension, which this request did not declare: add it to _meta[\"io.modelcontextprotocol/clientCapabilities\"].extensions.",
		Data:    json.RawMessage(`{"requiredCapabilities":{"extensions":{"` + tasksExtension + `":{}}}}`)}
}

// extTaskErr is the client's error for err from the task runtime about task
// id: -32602 for an unknown, expired or foreign task and for input
// responses the task never asked for; -32603 (logged) for the store.
func (f *Tasks) extTaskErr(err error, id string) *jsonrpc.Error {
	switch {
	case errors.Is(err, tasks.ErrNotFound):
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msgExtTaskNotFound}
	case errors.Is(err, tasks.ErrBadResponses):
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Invalid params: " + err.Error()}
	}
	f.log.Error("mcp task request", "task", id, "err", err)
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msgExtInternal}
}

// extTaskCall answers a tools/call of a tool with task support (see above).
func (f *Tasks) extTaskCall(w http.ResponseWriter, r *http.Request, key store.Key, req extRequest) bool {
	ctx := r.Context()
	if strings.TrimSpace(r.Header.Get("Mcp-Name")) != req.Params.Name {
		return false // go-sdk answers the mismatch
	}
	declared := declaresExt(req.Params.Meta)
	snap := f.reg.Snapshot(key.ProjectID).Tools[req.Params.Name]
	if snap == nil || (!declared && snap.Def.TaskSupport() != agentproto.TaskRequired) {
		return false // a plain call: the early path or go-sdk runs it
	}
	t, ctl, refused, err := f.pipe.AdmitCall(ctx, key, req.Params.Name, false)
	switch {
	case refused != nil:
		f.writeExtCallResult(w, req.ID, refused)
		return true
	case err != nil:
		f.writeExtError(w, req.ID, err)
		return true
	case t.Def.TaskSupport() == agentproto.TaskForbidden:
		return false // changed since the lookup above
	case !declared:
		if t.Def.TaskSupport() != agentproto.TaskRequired {
			return false
		}
		f.writeExtError(w, req.ID, errExtUndeclared("Tool "+t.Name+" runs only as a task, so it needs"))
		return true
	}
	owner, err := f.tasks.OwnerOf(ctx, key)
	if err != nil {
		f.log.Error("find a task's owner", "key", key.ID, "err", err)
		f.writeExtError(w, req.ID, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msgExtInternal})
		return true
	}
	if req.Params.RequestState != "" {
		f.resumeExtCall(w, r, key, req, t, owner)
		return true
	}
	// The call pipeline resolves it and starts the task.
	st := f.pipe.StartTask(ctx, key, t, ctl, &pipeline.Request{
		Name: req.Params.Name, Args: req.Params.Arguments, Meta: mcp.Meta(req.Params.Meta),
	}, wire.ModernVersion, 0)
	switch {
	case st.Refused != nil:
		f.writeExtCallResult(w, req.ID, st.Refused)
		return true
	case st.RPCErr != nil:
		f.writeExtError(w, req.ID, st.RPCErr)
		return true
	case st.Unpicked != nil && st.Unpicked.Outcome == route.NotFound:
		f.writeExtError(w, req.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Tool " + t.Name + " not found"})
		return true
	case st.Unpicked != nil:
		f.writeExtCallResult(w, req.ID, st.Result)
		return true
	}
	task, err := st.Task, st.Err
	if errors.Is(err, tasks.ErrTooManyTasks) {
		// The server decides per request whether to make a task: this one
		// answers, as a plain call would, a tool error the model reads.
		f.writeExtCallResult(w, req.ID, pipeline.ErrorResult(err.Error()))
		return true
	}
	if err != nil {
		msg := "The gateway could not start the task; try again in a moment."
		if errors.Is(err, tasks.ErrClosed) {
			msg = err.Error()
		} else {
			f.log.Error("start a task", "tool", t.Name, "key", key.ID, "err", err)
		}
		f.writeExtError(w, req.ID, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msg})
		return true
	}
	f.answerExtCall(w, r, key, req.ID, t, owner, task)
	return true
}

// answerExtCall answers the request that started task, or that answered
// its first questions: a CreateTaskResult, or, while a required-task
// tool's handler asks before its client has the task, its questions.
func (f *Tasks) answerExtCall(w http.ResponseWriter, r *http.Request, key store.Key, id json.RawMessage, t *agents.Tool, owner tasks.Owner, task tasks.Task) {
	if t.Def.TaskSupport() == agentproto.TaskRequired && time.Since(task.CreatedAt) < extAskFirst {
		ctx, cancel := context.WithDeadline(r.Context(), task.CreatedAt.Add(extAskFirst))
		now, err := f.tasks.Wait(ctx, owner, key.ProjectID, task.ID)
		cancel()
		if err == nil && now.Status == tasks.InputRequired && len(now.InputRequests) > 0 {
			f.writeExtResult(w, id, extInputRequired{
				ResultType: "input_required", InputRequests: now.InputRequests,
				RequestState: f.pipe.SealTaskState(task.ID, key.ID), Meta: f.extServerMeta(),
			})
			return
		}
		if err == nil {
			task = now
		}
	}
	f.writeExtResult(w, id, f.extCreateResult(task))
}

// resumeExtCall answers the retry of a call whose handler asked before
// its client had the task: the responses go to the task, and the client
// gets the task (or the handler's next questions).
func (f *Tasks) resumeExtCall(w http.ResponseWriter, r *http.Request, key store.Key, req extRequest, t *agents.Tool, owner tasks.Owner) {
	ctx := r.Context()
	id, ok := f.pipe.OpenTaskState(req.Params.RequestState, key.ID)
	if !ok {
		f.writeExtError(w, req.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: pipeline.ErrBadState.Error()})
		return
	}
	task, err := f.tasks.Get(ctx, owner, key.ProjectID, id)
	if err != nil {
		f.writeExtError(w, req.ID, f.extTaskErr(err, id))
		return
	}
	if len(req.Params.InputResponses) > 0 {
		if err := f.tasks.Answer(ctx, owner, key.ProjectID, id, req.Params.InputResponses); err != nil {
			f.writeExtError(w, req.ID, f.extTaskErr(err, id))
			return
		}
		// Answered: the questions are no longer what the task waits for.
		if task.Status == tasks.InputRequired {
			task.Status, task.InputRequests = tasks.Working, nil
		}
	}
	f.writeExtResult(w, req.ID, f.extCreateResult(task))
}
