package stateless

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/mcpfront/pipeline"
	"github.com/spacefix/spacefix/internal/mcpfront/wire"
	"github.com/spacefix/spacefix/internal/tasks"
)

// extTask is a task as the extension writes it: a CreateTaskResult
// (resultType "task", no payload), a tasks/get result (resultType
// "complete", the payload of its status inline) or the params of
// notifications/tasks (no resultType).
type extTask struct {
	ResultType     string          `json:"resultType,omitempty"`
	TaskID         string          `json:"taskId"`
	Status         tasks.Status    `json:"status"`
	StatusMessage  string          `json:"statusMessage,omitempty"`
	CreatedAt      string          `json:"createdAt"`
	LastUpdatedAt  string          `json:"lastUpdatedAt"`
	TTLMs          int64           `json:"ttlMs"`
	PollIntervalMs int64           `json:"pollIntervalMs,omitempty"`
	Result         json.RawMessage `json:"result,omitempty"`
	Error          *tasks.RPCError `json:"error,omitempty"`
	InputRequests  json.RawMessage `json:"inputRequests,omitempty"`
	Meta           map[string]any  `json:"_meta,omitempty"`
}

// extInputRequired is the answer to a required-task call whose handler
// asks before its client has the task.
type extInputRequired struct {
	ResultType    string          `json:"resultType"`
	InputRequests json.RawMessage `json:"inputRequests"`
	RequestState  string          `json:"requestState"`
	Meta          map[string]any  `json:"_meta,omitempty"`
}

// extTime is how the extension writes a time: ISO 8601, UTC, to the
// millisecond.
func extTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// extTaskBase is t's Task fields.
func extTaskBase(t tasks.Task) extTask {
	w := extTask{
		TaskID: t.ID, Status: t.Status, StatusMessage: t.StatusMessage,
		CreatedAt: extTime(t.CreatedAt), LastUpdatedAt: extTime(t.UpdatedAt),
		TTLMs: t.TTL.Milliseconds(), PollIntervalMs: t.PollInterval.Milliseconds(),
	}
	if w.TTLMs <= 0 {
		w.TTLMs = 1 // never "unlimited" (null) or a non-positive TTL
	}
	if w.PollIntervalMs <= 0 {
		w.PollIntervalMs = 1000
	}
	return w
}

// extCreateResult is the CreateTaskResult of t: its Task fields only.
func (f *Tasks) extCreateResult(t tasks.Task) extTask {
	w := extTaskBase(t)
	w.ResultType = "task"
	w.Meta = f.extServerMeta()
	return w
}

// extDetailedTask is t as tasks/get answers it (resultType "complete") or as
// notifications/tasks carries it (resultType ""): the result of a completed
// task (an isError result too), the JSON-RPC error of a failed one, the
// input requests of one waiting for input.
func (f *Tasks) extDetailedTask(t tasks.Task, resultType string) extTask {
	w := extTaskBase(t)
	w.ResultType = resultType
	switch t.Status {
	case tasks.Completed:
		w.Result = f.extInlineResult(t.Result)
	case tasks.Failed:
		w.Error = t.Error
		if w.Error == nil {
			// Failed by the gateway (the limit, a lost agent, a gateway
			// that stopped): an internal error, in the task's words.
			msg := t.StatusMessage
			if msg == "" {
				msg = "The task failed."
			}
			w.Error = &tasks.RPCError{Code: jsonrpc.CodeInternalError, Message: msg}
		}
	case tasks.InputRequired:
		w.InputRequests = t.InputRequests
		if len(w.InputRequests) == 0 {
			w.InputRequests = json.RawMessage("{}")
		}
	}
	if resultType != "" {
		w.Meta = f.extServerMeta()
	}
	return w
}

// extInlineResult is a task's CallToolResult as tasks/get inlines it: as a
// plain call's result reads, its content never null.
func (f *Tasks) extInlineResult(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage(`{"content":[]}`)
	}
	r, err := pipeline.DecodeResult(raw)
	if err != nil {
		return raw
	}
	b, err := wire.EncodeResult(r, false, f.impl)
	if err != nil {
		return raw
	}
	return b
}

// extServerMeta is the _meta go-sdk gives every 2026-07-28 result: the
// server's identity.
func (f *Tasks) extServerMeta() map[string]any {
	return map[string]any{mcp.MetaKeyServerInfo: f.impl}
}

// ack is the empty result of tasks/update and tasks/cancel.
func (f *Tasks) extAck() any {
	return struct {
		ResultType string         `json:"resultType"`
		Meta       map[string]any `json:"_meta"`
	}{"complete", f.extServerMeta()}
}

// writeExtResult writes result as the JSON-RPC answer of request id, a
// plain JSON body.
func (f *Tasks) writeExtResult(w http.ResponseWriter, id json.RawMessage, result any) {
	b, err := wire.MarshalPlain(result)
	if err != nil {
		f.log.Error("encode a task answer", "err", err)
		f.writeExtError(w, id, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "The gateway could not encode the answer."})
		return
	}
	wire.SSEHeaders(w.Header(), "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(wire.ResultMessage(id, b))
}

// writeExtCallResult writes a plain tools/call result r (a refusal the model
// reads) as go-sdk would at 2026-07-28.
func (f *Tasks) writeExtCallResult(w http.ResponseWriter, id json.RawMessage, r *mcp.CallToolResult) {
	wire.WriteCallAnswer(&wire.SSEStream{W: w}, id, r, nil, true, f.impl, f.log)
}

// writeExtError writes err as the JSON-RPC error of request id, with the
// HTTP status 2026-07-28 gives its code.
func (f *Tasks) writeExtError(w http.ResponseWriter, id json.RawMessage, err error) {
	var jerr *jsonrpc.Error
	if !errors.As(err, &jerr) {
		jerr = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	}
	jid, _ := jsonrpc.MakeID(wire.IDValue(id))
	data, encErr := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: jid, Error: jerr})
	if encErr != nil {
		f.log.Error("encode a task error", "err", encErr)
		return
	}
	status := http.StatusOK
	switch jerr.Code {
	case jsonrpc.CodeMethodNotFound:
		status = http.StatusNotFound
	case jsonrpc.CodeInvalidParams, mcp.CodeMissingRequiredClientCapabilities, mcp.CodeHeaderMismatch:
		status = http.StatusBadRequest
	}
	wire.SSEHeaders(w.Header(), "application/json")
	w.WriteHeader(status)
	w.Write(data)
}
