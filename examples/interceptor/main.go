// Command interceptor is an interceptor server (SEP-1763, the MCP
// interceptors extension) that a project's policy can list
// (docs/policy.md): an MCP server on the go-sdk with two interceptors on
// tools/call. redact-pii, a mutator of results, replaces e-mail addresses
// and card numbers (13–19 digits passing the Luhn check) with [redacted]
// in every string of the result; no-card-numbers, a validator of
// requests, refuses a call whose arguments carry a card number.
//
// Served over Streamable HTTP where the gateway can reach it:
//
//	go run ./examples/interceptor -addr 127.0.0.1:9090
//
// and in the project's policy:
//
//	{"rules": [], "interceptors": [{"name": "pii", "url": "http://127.0.0.1:9090/mcp"}]}
//
// Or over stdio behind a bridge of the project, which the gateway reaches
// over the bridge's own connection (nothing listens):
//
//	spacefix bridge --name pii -- go run ./examples/interceptor -stdio
//
// and in the project's policy:
//
//	{"rules": [], "interceptors": [{"name": "pii", "agent": "pii"}]}
package main

import (
	"context"
	"encoding/json"
	"flag"
	"log"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9090", "where to listen; the endpoint is /mcp")
	stdio := flag.Bool("stdio", false, "serve one session over stdin and stdout (behind spacefix bridge) instead of listening")
	flag.Parse()
	if *stdio {
		if err := Server().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			log.Fatal(err)
		}
		return
	}
	srv := &http.Server{Addr: *addr, Handler: Handler(), ReadHeaderTimeout: 10 * time.Second}
	log.Printf("interceptor server on http://%s/mcp", *addr)
	log.Fatal(srv.ListenAndServe())
}

// Handler is the interceptor server's HTTP handler (at /mcp).
func Handler() http.Handler {
	s := Server()
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	return mux
}

// The server's interceptors.
var infos = []Info{{
	Name:         "redact-pii",
	Version:      "1.0.0",
	Description:  "Replaces e-mail addresses and card numbers in tool results with [redacted].",
	Type:         "mutation",
	Hook:         Hook{Events: []string{"tools/call"}, Phase: "response"},
	PriorityHint: map[string]int{"response": 100},
}, {
	Name:        "no-card-numbers",
	Version:     "1.0.0",
	Description: "Refuses a tool call whose arguments carry a card number.",
	Type:        "validation",
	Hook:        Hook{Events: []string{"tools/call"}, Phase: "request"},
}}

// Server is the interceptor server, on any transport.
func Server() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "spacefix-example-interceptor", Version: "1.0.0"}, nil)
	must(mcp.AddReceivingCustomMethod(s, "interceptors/list",
		func(_ context.Context, _ *mcp.ServerSession, p *ListParams) (*ListResult, error) {
			if p.Event != "" && p.Event != "tools/call" {
				return &ListResult{Interceptors: []Info{}}, nil
			}
			return &ListResult{Interceptors: infos}, nil
		}))
	must(mcp.AddReceivingCustomMethod(s, "interceptor/invoke",
		func(_ context.Context, _ *mcp.ServerSession, p *InvokeParams) (*InvokeResult, error) {
			return invoke(p)
		}))
	return s
}

// invoke runs one interceptor on the payload.
func invoke(p *InvokeParams) (*InvokeResult, error) {
	var v any
	if err := json.Unmarshal(p.Payload, &v); err != nil {
		return nil, &jsonError{"the payload is not JSON"}
	}
	switch p.Name {
	case "redact-pii":
		changed := false
		v = walk(v, &changed)
		out, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		return &InvokeResult{Interceptor: p.Name, Type: "mutation", Modified: &changed, Payload: out}, nil
	case "no-card-numbers":
		var call struct {
			Arguments any `json:"arguments"`
		}
		json.Unmarshal(p.Payload, &call)
		valid := !anyString(call.Arguments, hasCard)
		res := &InvokeResult{Interceptor: p.Name, Type: "validation", Valid: &valid}
		if !valid {
			res.Severity = "error"
			res.Messages = []Message{{Message: "the arguments carry a card number; send its last four digits instead"}}
		}
		return res, nil
	}
	return nil, &jsonError{"unknown interceptor " + p.Name}
}

// The extension's wire types (its docs/sep.md), as much as this server
// uses: declared here so that the example stands alone.
type (
	ListParams struct {
		mcp.ParamsBase
		Event string `json:"event,omitempty"`
	}
	ListResult struct {
		mcp.ResultBase
		Interceptors []Info `json:"interceptors"`
	}
	Info struct {
		Name         string         `json:"name"`
		Version      string         `json:"version,omitempty"`
		Description  string         `json:"description,omitempty"`
		Type         string         `json:"type"` // validation or mutation
		Hook         Hook           `json:"hook"`
		PriorityHint map[string]int `json:"priorityHint,omitempty"`
	}
	Hook struct {
		Events []string `json:"events"`
		Phase  string   `json:"phase"` // request, response or both
	}
	InvokeParams struct {
		mcp.ParamsBase
		Name    string          `json:"name"`
		Event   string          `json:"event"`
		Phase   string          `json:"phase"`
		Payload json.RawMessage `json:"payload"`
	}
	InvokeResult struct {
		mcp.ResultBase
		Interceptor string `json:"interceptor"`
		Type        string `json:"type"`
		// A mutator's answer.
		Modified *bool           `json:"modified,omitempty"`
		Payload  json.RawMessage `json:"payload,omitempty"`
		// A validator's answer.
		Valid    *bool     `json:"valid,omitempty"`
		Severity string    `json:"severity,omitempty"`
		Messages []Message `json:"messages,omitempty"`
	}
	Message struct {
		Message string `json:"message"`
	}
)

type jsonError struct{ msg string }

func (e *jsonError) Error() string { return e.msg }

var (
	email = regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}`)
	// Candidate card numbers: 13 to 19 digits, in groups split by spaces
	// or dashes; the Luhn check decides.
	card = regexp.MustCompile(`\b\d(?:[ -]?\d){12,18}\b`)
)

// Redact replaces e-mail addresses and card numbers in s.
func Redact(s string) string {
	s = email.ReplaceAllString(s, "[redacted]")
	return card.ReplaceAllStringFunc(s, func(m string) string {
		if luhn(m) {
			return "[redacted]"
		}
		return m
	})
}

// hasCard reports whether s carries a card number.
func hasCard(s string) bool {
	for _, m := range card.FindAllString(s, -1) {
		if luhn(m) {
			return true
		}
	}
	return false
}

// anyString reports whether f holds for a string in v (decoded JSON).
func anyString(v any, f func(string) bool) bool {
	switch v := v.(type) {
	case string:
		return f(v)
	case map[string]any:
		for _, x := range v {
			if anyString(x, f) {
				return true
			}
		}
	case []any:
		for _, x := range v {
			if anyString(x, f) {
				return true
			}
		}
	}
	return false
}

// luhn reports whether the digits of s pass the Luhn check.
func luhn(s string) bool {
	digits := strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, s)
	sum, double := 0, false
	for i := len(digits) - 1; i >= 0; i-- {
		d := int(digits[i] - '0')
		if double {
			if d *= 2; d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return sum%10 == 0
}

// walk redacts every string in v (decoded JSON), keys excepted.
func walk(v any, changed *bool) any {
	switch v := v.(type) {
	case string:
		r := Redact(v)
		if r != v {
			*changed = true
		}
		return r
	case map[string]any:
		for k, x := range v {
			v[k] = walk(x, changed)
		}
	case []any:
		for i, x := range v {
			v[i] = walk(x, changed)
		}
	}
	return v
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
