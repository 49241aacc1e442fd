// Command interceptor is an interceptor server (SEP-1763, the MCP
// interceptors extension) that a project's policy can list
// (docs/policy.md): an MCP server on the go-sdk whose one interceptor,
// redact-pii, is a mutator on the results of tools/call that replaces
// e-mail addresses and card numbers (13–19 digits passing the Luhn check)
// with [redacted] in every string of the result.
//
//	go run ./examples/interceptor -addr 127.0.0.1:9090
//
// and in the project's policy:
//
//	{"rules": [], "interceptors": [{"name": "pii", "url": "http://127.0.0.1:9090/mcp"}]}
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
	flag.Parse()
	srv := &http.Server{Addr: *addr, Handler: Handler(), ReadHeaderTimeout: 10 * time.Second}
	log.Printf("interceptor server on http://%s/mcp", *addr)
	log.Fatal(srv.ListenAndServe())
}

// Handler is the interceptor server's HTTP handler (at /mcp).
func Handler() http.Handler {
	s := mcp.NewServer(&mcp.Implementation{Name: "spacefix-example-interceptor", Version: "1.0.0"}, nil)
	info := Info{
		Name:         "redact-pii",
		Version:      "1.0.0",
		Description:  "Replaces e-mail addresses and card numbers in tool results with [redacted].",
		Type:         "mutation",
		Hook:         Hook{Events: []string{"tools/call"}, Phase: "response"},
		PriorityHint: map[string]int{"response": 100},
	}
	must(mcp.AddReceivingCustomMethod(s, "interceptors/list",
		func(_ context.Context, _ *mcp.ServerSession, p *ListParams) (*ListResult, error) {
			if p.Event != "" && p.Event != "tools/call" {
				return &ListResult{Interceptors: []Info{}}, nil
			}
			return &ListResult{Interceptors: []Info{info}}, nil
		}))
	must(mcp.AddReceivingCustomMethod(s, "interceptor/invoke",
		func(_ context.Context, _ *mcp.ServerSession, p *InvokeParams) (*InvokeResult, error) {
			return invoke(p)
		}))
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	return mux
}

// invoke redacts the payload's strings.
func invoke(p *InvokeParams) (*InvokeResult, error) {
	if p.Name != "redact-pii" {
		return nil, &jsonError{"unknown interceptor " + p.Name}
	}
	var v any
	if err := json.Unmarshal(p.Payload, &v); err != nil {
		return nil, &jsonError{"the payload is not JSON"}
	}
	changed := false
	v = walk(v, &changed)
	out, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &InvokeResult{Interceptor: "redact-pii", Type: "mutation", Modified: &changed, Payload: out}, nil
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
		Interceptor string          `json:"interceptor"`
		Type        string          `json:"type"`
		Modified    *bool           `json:"modified"`
		Payload     json.RawMessage `json:"payload"`
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
