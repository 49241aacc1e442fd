package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/route"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/tasks"
)

// Jobs: slow tools for clients that do not speak tasks (docs/tasks.md).
//
// Most clients (Claude Code, Cursor, …) send no task-augmented calls. For
// them a tool with task support runs as a task all the same, of era "job":
//
//   - a call of an optional-task tool starts the task and waits for it up
//     to the call's usual wait ([Pipeline.wait]). If it ends in time, the
//     client gets its result as from a plain call (the runtime logs it as
//     one call, with its task id); if not, the client gets, at the wait, a
//     job reference: a short text with the job id and what to call next
//     ([jobReference]). A required-task tool answers the reference at once.
//     A client that sent a progress token gets the job's progress lines
//     during the wait, before the answer, as from a plain call.
//   - the gateway offers one tool of its own, [JobTool], in the views of
//     keys that may call a task-capable tool: {jobId} waits up to the
//     project's call wait and returns the job's result when it has ended
//     (the tool's own result, as if the call had returned it), else its
//     status and last progress line; {jobId, action: "cancel"} cancels it.
//     A 2026-07-28 request whose client declared the tasks extension does
//     not see it in tools/list (it has tasks/get); 2025 sessions see it,
//     since go-sdk does not keep a session's declared capabilities and a
//     2025-11-25 client need declare nothing to send params.task.
//
// A job is the same task underneath as any other: the project's longest
// task, its TTL cap, the owner rule (another caller's job id reads exactly
// as an unknown one), the store, cancellation. Its handler is told the
// client has no capabilities: a question it asks anyway is refused as for
// a client that cannot be asked (Confirm's ErrCannotConfirm), since nobody
// waits on the other end to answer. The job tool's own calls reach no
// agent: they are neither logged nor billed; read-only clients may use
// all of it, cancel included, which stops only the caller's own call.

// JobTool is the gateway's job tool. Agents may not register it: every
// name starting with agentproto.ReservedPrefix is the gateway's.
const JobTool = agentproto.ReservedPrefix + "job"

// eraJob is the era of a task started for a client without tasks.
const eraJob = "job"

// JobToolDef is the job tool as clients see it.
var JobToolDef = &mcp.Tool{
	Name:  JobTool,
	Title: "Slow tool results",
	Description: "Gets the result of a slow tool call that answered with a job id (\"The tool is still running (job task_…)\"). " +
		"Pass the jobId: if the job has ended you get the tool's result, as if the call had returned it; " +
		"if it is still running, this waits a while and then says so, with its latest progress line — call again to keep waiting. " +
		"Pass action \"cancel\" to stop a job you no longer need.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{` +
		`"jobId":{"type":"string","description":"The job id from the tool's answer, e.g. task_abc…"},` +
		`"action":{"type":"string","enum":["get","cancel"],"default":"get","description":"get (the default) returns the result or the status; cancel stops the job."}},` +
		`"required":["jobId"],"additionalProperties":false}`),
	Annotations: &mcp.ToolAnnotations{Title: "Slow tool results", IdempotentHint: true, DestructiveHint: new(bool), OpenWorldHint: new(bool)},
}

// JobToolJSON is jobTool as a view records what it advertises.
var JobToolJSON, _ = json.Marshal(JobToolDef)

// Messages a model reads.
const (
	msgJobRunning  = "The tool is still running (job %s). Call " + JobTool + " with {\"jobId\": %q} to get its result; it is kept for %s after the job ends."
	msgJobStarted  = "The tool runs as a job (job %s). Call " + JobTool + " with {\"jobId\": %q} to get its result; it is kept for %s after the job ends."
	msgJobWorking  = "Job %s (%s) is still running, for %s so far%s. Call " + JobTool + " with {\"jobId\": %q} again to keep waiting, or with \"action\": \"cancel\" to stop it."
	msgJobNotFound = "No such job: the id is unknown, or the job ended too long ago and its result was deleted. Call the tool again to start a new job."
	msgJobNoID     = "Pass jobId, the job id from the tool's answer (task_…), and optionally action \"get\" or \"cancel\"."
	msgJobAction   = "action is \"get\" (the default) or \"cancel\", not %q."
	msgJobStart    = "The gateway could not start the job; try again in a moment."
	msgJobStore    = "The gateway could not read the job; try again in a moment."
	msgJobStopped  = "Job %s was cancelled before it returned a result. Call the tool again if you still need it."
	msgJobCancel   = "Job %s is cancelled; the tool's call was stopped."
	msgJobEnded    = "Job %s had already ended (%s), so there was nothing to cancel. Call " + JobTool + " with {\"jobId\": %q} to get its result."
)

// asJob reports whether the call p describes, which reached the tool
// handler, runs as a job: the gateway runs tasks and the tool has task
// support (calls that are tasks of either era never reach the tool
// handler). If so it makes p a job's: it may run up to the project's
// longest task, and its handler is told the client can be asked nothing.
func (f *Pipeline) asJob(ctx context.Context, p *pickRequest) bool {
	if f.tasks == nil || p.Tool.Def.TaskSupport() == agentproto.TaskForbidden {
		return false
	}
	p.Wait, p.Caps = f.tasks.Limit(ctx, p.Key.ProjectID), nil
	return true
}

// runJob starts call, picked with the project's longest task as its wait,
// as a job, and answers the client at wait: the result if the job ended by
// then, else the job reference.
func (f *Pipeline) runJob(ctx context.Context, req *Request, t *agents.Tool, key store.Key, call *route.Call, start time.Time, wait time.Duration,
	shape func(context.Context, json.RawMessage) (json.RawMessage, string)) (*mcp.CallToolResult, error) {
	// The job's progress lines reach this call while it waits: queued by
	// the job's own goroutine, never blocking it, and sent from here, so
	// that none follows the answer.
	send := progressSender(ctx, req, 0)
	lines := make(chan string, jobLinesQueued)
	if send != nil {
		call.OnProgress = func(line string) {
			select {
			case lines <- line:
			default: // a client that does not keep up misses a line
			}
		}
	}
	task, err := f.tasks.Run(ctx, tasks.Spec{Key: key, Tool: t, Call: call, Era: eraJob, Start: start,
		Unauthorized: f.taskUnauthorized(key, call, t.Name), Shape: shape})
	if err != nil {
		if errors.Is(err, tasks.ErrClosed) {
			return ErrorResult(msgShutdown), nil
		}
		if errors.Is(err, tasks.ErrTooManyTasks) {
			// Refused before it ran (no result to lose): a tool error the
			// model reads and can act on.
			return ErrorResult(err.Error()), nil
		}
		f.log.Error("start a job", "tool", t.Name, "key", key.ID, "err", err)
		return ErrorResult(msgJobStart), nil
	}
	if t.Def.TaskSupport() == agentproto.TaskRequired {
		return jobReference(t, fmt.Sprintf(msgJobStarted, task.ID, task.ID, keptFor(task.TTL))), nil
	}
	wctx, cancel := context.WithDeadline(ctx, start.Add(wait))
	var now tasks.Task
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		now, err = f.tasks.Wait(wctx, task.Owner, key.ProjectID, task.ID)
	}()
	for waiting := true; waiting; {
		select {
		case line := <-lines:
			send(line)
		case <-waited:
			waiting = false
		}
	}
	cancel()
	// The lines the job sent before it ended go first, as before a plain
	// call's result.
	for drained := false; !drained; {
		select {
		case line := <-lines:
			send(line)
		default:
			drained = true
		}
	}
	if ctx.Err() != nil {
		// The client hung up or cancelled its call: nobody will learn the
		// job's id, so the job goes too.
		if _, err := f.tasks.Cancel(context.WithoutCancel(ctx), task.Owner, key.ProjectID, task.ID); err != nil {
			f.log.Warn("cancel an abandoned job", "task", task.ID, "err", err)
		}
		return nil, ctx.Err()
	}
	if err == nil && now.Status.Terminal() {
		return jobResult(now)
	}
	return jobReference(t, fmt.Sprintf(msgJobRunning, task.ID, task.ID, keptFor(task.TTL))), nil
}

// jobLinesQueued bounds the progress lines a job holds for its waiting
// call: at most agentproto.MaxProgressPerSec a second reach it.
const jobLinesQueued = 16

// jobReference is the answer msg that tells the client of t the job's id.
// For a tool with an output schema it is an isError result: the official
// clients (the TypeScript SDK's callTool, the Inspector) refuse a result
// of such a tool without structuredContent unless it is an error, and the
// gateway cannot give the tool's structured content before the tool has
// returned it — any other object would be refused by the schema, or
// mistaken for the tool's answer. An isError result is validated by no
// client, so they show the text, and the model reads that the tool is
// still running; for other tools the reference stays a plain text.
func jobReference(t *agents.Tool, msg string) *mcp.CallToolResult {
	r := textResult(msg)
	r.IsError = len(t.Def.OutputSchema) > 0
	return r
}

// JobHandler serves the job tool (see above).
func (f *Pipeline) JobHandler(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	key, _ := KeyFrom(req.Extra.TokenInfo)
	if f.tasks == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Tool " + JobTool + " not found"}
	}
	var args struct {
		JobID  string `json:"jobId"`
		Action string `json:"action"`
	}
	if (len(req.Params.Arguments) > 0 && json.Unmarshal(req.Params.Arguments, &args) != nil) || strings.TrimSpace(args.JobID) == "" {
		return ErrorResult(msgJobNoID), nil
	}
	id := strings.TrimSpace(args.JobID)
	owner, err := f.tasks.OwnerOf(ctx, key)
	if err != nil {
		f.log.Error("find a job's owner", "key", key.ID, "err", err)
		return ErrorResult(msgJobStore), nil
	}
	switch args.Action {
	case "", "get":
		return f.jobGet(ctx, key, owner, id)
	case "cancel":
		task, err := f.tasks.Cancel(ctx, owner, key.ProjectID, id)
		if err != nil {
			return f.jobErr(err, id), nil
		}
		if task.Status == tasks.Cancelled {
			return textResult(fmt.Sprintf(msgJobCancel, id)), nil
		}
		return textResult(fmt.Sprintf(msgJobEnded, id, task.Status, id)), nil
	}
	return ErrorResult(fmt.Sprintf(msgJobAction, TrimName(args.Action))), nil
}

// jobGet waits up to the project's call wait for job id to end, and
// answers its result, or its status if it runs on.
func (f *Pipeline) jobGet(ctx context.Context, key store.Key, owner tasks.Owner, id string) (*mcp.CallToolResult, error) {
	task, err := f.tasks.Get(ctx, owner, key.ProjectID, id)
	if err != nil {
		return f.jobErr(err, id), nil
	}
	if !task.Status.Terminal() {
		wctx, cancel := context.WithTimeout(ctx, f.controls.Get(ctx, key.ProjectID).Settings.CallWait())
		now, err := f.tasks.Wait(wctx, owner, key.ProjectID, id)
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err() // the job goes on: the client may ask again
		}
		if err == nil {
			task = now
		} else if task, err = f.tasks.Get(ctx, owner, key.ProjectID, id); err != nil {
			return f.jobErr(err, id), nil
		}
	}
	if task.Status.Terminal() {
		return jobResult(task)
	}
	progress := ""
	if task.StatusMessage != "" {
		progress = ": " + task.StatusMessage
	}
	ran := time.Since(task.CreatedAt).Round(time.Second)
	return textResult(fmt.Sprintf(msgJobWorking, id, task.Tool, ran, progress, id)), nil
}

// jobResult is what the client of an ended job gets: the tool's result as
// a plain call would have answered it.
func jobResult(t tasks.Task) (*mcp.CallToolResult, error) {
	switch {
	case t.Status == tasks.Cancelled:
		return ErrorResult(fmt.Sprintf(msgJobStopped, t.ID)), nil
	case t.Error != nil && t.Error.Code != jsonrpc.CodeInternalError:
		// The agent ended the call with a JSON-RPC error (core.ProtocolError).
		return nil, &jsonrpc.Error{Code: int64(t.Error.Code), Message: t.Error.Message, Data: t.Error.Data}
	case t.Error != nil:
		return ErrorResult(t.Error.Message), nil // timed out, disconnected, too large
	case len(t.Result) == 0:
		return ErrorResult(t.StatusMessage), nil
	}
	out, err := DecodeResult(t.Result)
	if err != nil {
		return ErrorResult("The agent sent a result the gateway could not read: " + err.Error()), nil
	}
	return out, nil
}

// jobErr is the model's answer when the runtime refused a job request.
func (f *Pipeline) jobErr(err error, id string) *mcp.CallToolResult {
	if errors.Is(err, tasks.ErrNotFound) {
		return ErrorResult(msgJobNotFound) // the same for another caller's job
	}
	f.log.Error("mcp job request", "task", id, "err", err)
	return ErrorResult(msgJobStore)
}

// keptFor says how long a job's result is kept, as people say it.
func keptFor(ttl time.Duration) string {
	switch {
	case ttl <= 0:
		return "a while"
	case ttl%(24*time.Hour) == 0 && ttl > 24*time.Hour:
		return fmt.Sprintf("%d days", ttl/(24*time.Hour))
	case ttl%time.Hour == 0:
		if ttl == time.Hour {
			return "1 hour"
		}
		return fmt.Sprintf("%d hours", ttl/time.Hour)
	case ttl%time.Minute == 0:
		return fmt.Sprintf("%d minutes", ttl/time.Minute)
	}
	return ttl.Round(time.Second).String()
}

func textResult(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}
