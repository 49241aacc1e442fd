package interceptors

import (
	"encoding/json"
	"path"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The interceptor extension's methods (SEP-1763).
const (
	MethodList   = "interceptors/list"
	MethodInvoke = "interceptor/invoke"
)

// Phases of an event.
const (
	PhaseRequest  = "request"
	PhaseResponse = "response"
	PhaseBoth     = "both"
)

// Kinds of interceptor.
const (
	Validation = "validation"
	Mutation   = "mutation"
)

// ListParams are interceptors/list's parameters.
type ListParams struct {
	mcp.ParamsBase
	Event string `json:"event,omitempty"`
}

// ListResult is interceptors/list's answer.
type ListResult struct {
	mcp.ResultBase
	Interceptors []Info `json:"interceptors"`
}

// Info is one interceptor a server offers.
type Info struct {
	Name         string   `json:"name"`
	Version      string   `json:"version,omitempty"`
	Description  string   `json:"description,omitempty"`
	Type         string   `json:"type"`
	Hook         Hook     `json:"hook"`
	PriorityHint Priority `json:"priorityHint,omitzero"`
	Mode         string   `json:"mode,omitempty"`
	FailOpen     bool     `json:"failOpen,omitempty"`
}

// Hook is the events and phase an interceptor is invoked on.
type Hook struct {
	Events []string `json:"events"`
	Phase  string   `json:"phase"`
}

// takes reports whether the hook covers event in phase: "*" takes every
// event, "*/request" and "*/response" every event of one phase, and a
// glob such as "tools/*" the events it matches.
func (h Hook) takes(event, phase string) bool {
	if h.Phase != PhaseBoth && h.Phase != phase {
		return false
	}
	for _, e := range h.Events {
		switch {
		case e == "*" || e == event || e == "*/"+phase:
			return true
		default:
			if ok, _ := path.Match(e, event); ok {
				return true
			}
		}
	}
	return false
}

// Priority orders mutators (lower first): one number for both phases,
// or {"request": n, "response": m}.
type Priority struct {
	Request, Response int
}

func (p Priority) of(phase string) int {
	if phase == PhaseResponse {
		return p.Response
	}
	return p.Request
}

func (p Priority) MarshalJSON() ([]byte, error) {
	if p.Request == p.Response {
		return json.Marshal(p.Request)
	}
	return json.Marshal(map[string]int{"request": p.Request, "response": p.Response})
}

func (p *Priority) UnmarshalJSON(b []byte) error {
	var n int
	if err := json.Unmarshal(b, &n); err == nil {
		p.Request, p.Response = n, n
		return nil
	}
	var o struct{ Request, Response int }
	if err := json.Unmarshal(b, &o); err != nil {
		return err
	}
	p.Request, p.Response = o.Request, o.Response
	return nil
}

// InvokeParams are interceptor/invoke's parameters.
type InvokeParams struct {
	mcp.ParamsBase
	Name      string          `json:"name"`
	Event     string          `json:"event"`
	Phase     string          `json:"phase"`
	Payload   json.RawMessage `json:"payload"`
	TimeoutMs int64           `json:"timeoutMs,omitempty"`
	Context   *InvokeContext  `json:"context,omitempty"`
}

// InvokeContext tells an interceptor who is calling.
type InvokeContext struct {
	Principal *Principal `json:"principal,omitempty"`
	TraceID   string     `json:"traceId,omitempty"`
	Timestamp string     `json:"timestamp"`
}

// Principal is the caller, as an interceptor sees it.
type Principal struct {
	Type string `json:"type"` // user, service
	ID   string `json:"id,omitempty"`
}

// InvokeResult is interceptor/invoke's answer. Servers answer in one of
// two shapes, both read here: the SEP's flat one (valid, severity,
// messages; modified, payload) and the nested one of the extension's Go
// SDK (validation {…}; mutation {modified}, payload).
type InvokeResult struct {
	mcp.ResultBase
	Interceptor string          `json:"interceptor,omitempty"`
	Type        string          `json:"type,omitempty"`
	Valid       *bool           `json:"valid,omitempty"`
	Severity    string          `json:"severity,omitempty"`
	Messages    []Message       `json:"messages,omitempty"`
	Modified    *bool           `json:"modified,omitempty"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	Validation  *struct {
		Valid    bool      `json:"valid"`
		Severity string    `json:"severity,omitempty"`
		Messages []Message `json:"messages,omitempty"`
	} `json:"validation,omitempty"`
	Mutation *struct {
		Modified bool `json:"modified"`
	} `json:"mutation,omitempty"`
}

// Message is one finding of a validator.
type Message struct {
	Path     string `json:"path,omitempty"`
	Message  string `json:"message"`
	Severity string `json:"severity,omitempty"`
}

// verdict reads a validator's answer: whether it blocks, and its
// messages. An invalid result without a severity blocks (the SEP's
// default severity of a failed validation is an error).
func (r *InvokeResult) verdict() (blocks bool, msgs []Message) {
	valid, sev, msgs := true, r.Severity, r.Messages
	switch {
	case r.Validation != nil:
		valid, sev, msgs = r.Validation.Valid, r.Validation.Severity, r.Validation.Messages
	case r.Valid != nil:
		valid = *r.Valid
	}
	return !valid && (sev == "" || sev == "error"), msgs
}

// mutated reads a mutator's answer: the new payload, if it changed it.
func (r *InvokeResult) mutated() (json.RawMessage, bool) {
	modified := false
	switch {
	case r.Mutation != nil:
		modified = r.Mutation.Modified
	case r.Modified != nil:
		modified = *r.Modified
	}
	if !modified || len(r.Payload) == 0 {
		return nil, false
	}
	return r.Payload, true
}
