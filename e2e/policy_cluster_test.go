package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/users"
)

// putPolicy saves doc as the project's policy through e's admin API and
// returns the status and body.
func (e *env) putPolicy(doc string) (int, string) {
	e.t.Helper()
	_, token, err := users.CreateAPIToken(context.Background(), e.store, "policy", 0)
	must(e.t, err)
	req, err := http.NewRequest(http.MethodPut, e.url+"/api/projects/"+e.project.Name+"/policy", bytes.NewReader([]byte(doc)))
	must(e.t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	must(e.t, err)
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// A policy saved through one gateway of a cluster on PostgreSQL + NATS is
// applied by the other: a call rule on the arguments refuses there, with
// the rule's message, and a list rule hides a tool from the other
// gateway's client, which hears tools/list_changed.
func TestPolicyReachesOtherGateway(t *testing.T) {
	t.Parallel()
	var pg string
	a := newEnv(t, onBus(startNATS(t)), onPostgres(&pg))
	b := a.sibling()
	a.startAgent(core.Options{}, clusterAgent(t, make(chan string, 4), make(chan string, 4)))
	listChanged := make(chan bool, 16)
	cs := b.connect("2025-11-25", b.clientKey, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case listChanged <- true:
			default:
			}
		},
	})
	waitFor(t, "B to list the tools of the agent on A", func() bool {
		return slices.Contains(toolNames(t, cs), "hang")
	})
	if got := text(call(t, cs, "echo", map[string]any{"text": "a secret"})); got != "a secret" {
		t.Fatalf("echo through B before the policy = %q", got)
	}
	for len(listChanged) > 0 {
		<-listChanged
	}

	doc, _ := json.Marshal(map[string]any{"rules": []map[string]any{
		{"name": "no-secrets", "on": "call", "tools": []string{"echo"}, "when": `args.text.contains("secret")`,
			"effect": "deny", "message": `No secrets through {{tool.name}}: "{{args.text}}".`},
		{"name": "hide-hang", "on": "list", "tools": []string{"hang"}, "effect": "hide"},
	}})
	saved := time.Now()
	if code, body := a.putPolicy(string(doc)); code != http.StatusOK {
		t.Fatalf("PUT the policy through A: %d %s", code, body)
	}
	var took time.Duration
	poll(t, "B to refuse echo by the policy saved through A (its answer)", 10*time.Second, func() (string, bool) {
		r := call(t, cs, "echo", map[string]any{"text": "a secret"})
		took = time.Since(saved)
		return text(r), r.IsError
	})
	t.Logf("the policy saved through A applied on B after %v", took.Round(time.Millisecond))
	r := call(t, cs, "echo", map[string]any{"text": "a secret"})
	if want := `No secrets through echo: "a secret".`; !r.IsError || text(r) != want {
		t.Errorf("echo through B = %v %q, want the error %q", r.IsError, text(r), want)
	}
	if got := text(call(t, cs, "echo", map[string]any{"text": "plain"})); got != "plain" {
		t.Errorf("echo through B with other arguments = %q, want %q", got, "plain")
	}
	receive(t, listChanged, "tools/list_changed at B's client when the policy hides a tool")
	if names := toolNames(t, cs); slices.Contains(names, "hang") || !slices.Contains(names, "echo") {
		t.Errorf("B's tools/list under the policy = %v; want echo and not hang", names)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "hang", Arguments: map[string]any{}})
	if err == nil || !strings.Contains(err.Error(), "Tool hang not found") {
		t.Errorf("a call of the hidden tool through B: %v; want the unknown tool's error", err)
	}
}
