package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/quickstart"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/testenv"
)

// Jobs as the official clients see them: a slow Go tool that returns a
// struct declares an output schema, and its job reference at the call
// wait must be a result the Inspector CLI and the TypeScript SDK's
// callTool accept; a call that asked for progress hears the job's
// progress lines during the wait, before the reference.

// salesIn and salesOut are sales_report's input and output: a struct
// result, so the tool advertises an outputSchema.
type salesIn struct {
	Month string `json:"month"`
}

type salesOut struct {
	Month  string `json:"month"`
	Orders int    `json:"orders"`
}

// salesAgent offers sales_report, which reports progress, then waits for
// a send on release (or its context's end).
type salesAgent struct {
	release chan struct{}
}

func startSalesAgent(e *env) *salesAgent {
	sa := &salesAgent{release: make(chan struct{}, 1)}
	e.startAgent(core.Options{Name: "sales"}, func(a *core.Agent) {
		must(e.t, core.AddTool(a, "sales_report", "Builds the month's sales report; slow.", func(ctx context.Context, in salesIn) (salesOut, error) {
			core.Progress(ctx, "Counting orders: 1 of 3 weeks")
			core.Progress(ctx, "Counting orders: 2 of 3 weeks")
			select {
			case <-sa.release:
				return salesOut{Month: in.Month, Orders: 1204}, nil
			case <-ctx.Done():
				return salesOut{}, ctx.Err()
			}
		}, core.TaskSupport(core.TaskOptional)))
	})
	return sa
}

// salesJobRef is sales_report's job reference (an isError result, since
// the tool declares an output schema).
var salesJobRef = regexp.MustCompile(`The tool is still running \(job (task_[a-z0-9]+)\)\. Call spacefix_job with \{\\?"jobId\\?": \\?"task_[a-z0-9]+\\?"\} to get its result; it is kept for 24 hours after the job ends\.`)

const salesResult = `{"month":"May","orders":1204}`

// structJobID returns the job id of the job reference of a tool with an
// output schema (an isError result), failing the test if r is not one.
func structJobID(t *testing.T, r *mcp.CallToolResult) string {
	t.Helper()
	m := jobRef.FindStringSubmatch(text(r))
	if m == nil || !r.IsError || m[1] != m[2] {
		t.Fatalf("answer at the wait = %q (isError %v), want a job reference, isError", text(r), r.IsError)
	}
	return m[1]
}

// The pinned Inspector CLI, run as users run it (the line `spacefix serve`
// prints, with another tool): the job reference, not the schema error;
// then the job tool gives the report.
func TestJobReferenceInspector(t *testing.T) {
	t.Parallel()
	dir := clientsDir(t)
	e := newEnv(t, func(o *envOptions) { o.settings = &store.ProjectSettings{CallWaitMs: 3000} })
	sa := startSalesAgent(e)
	base := fmt.Sprintf("npx -y %s --cli %s --transport http --header \"Authorization: Bearer %s\" --method tools/call", quickstart.Inspector, e.url+"/mcp", e.clientKey)

	out, err := shell(t, dir, nil, base+` --tool-name sales_report --tool-arg 'month="May"'`)
	if strings.Contains(out, "output schema") || !salesJobRef.MatchString(out) || !strings.Contains(out, `"isError": true`) {
		t.Fatalf("Inspector tools/call sales_report (%v):\n%s\nwant the job reference as an isError result, not the schema error", err, out)
	}
	id := salesJobRef.FindStringSubmatch(out)[1]

	sa.release <- struct{}{}
	out, err = shell(t, dir, nil, base+` --tool-name spacefix_job --tool-arg 'jobId="`+id+`"'`)
	if err != nil || !strings.Contains(out, `"text": "`+strings.ReplaceAll(salesResult, `"`, `\"`)+`"`) || strings.Contains(out, `"isError": true`) {
		t.Errorf("Inspector tools/call spacefix_job (%v):\n%s\nwant the report %s", err, out, salesResult)
	}
}

// The official TypeScript SDK 1.x client: callTool after listTools (which
// makes it check results against output schemas) does not throw on the
// job reference, and the job tool gives the report.
func TestJobReferenceTypeScriptClient(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("node"); err != nil {
		testenv.Unavailable(t, "node is not on PATH; install Node.js 20 or later to run the TypeScript SDK client")
	}
	dir, err := filepath.Abs("clients")
	must(t, err)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		testenv.Unavailable(t, "e2e/clients/node_modules lacks @modelcontextprotocol/sdk; install it with: npm ci --prefix e2e/clients")
	}
	e := newEnv(t, func(o *envOptions) { o.settings = &store.ProjectSettings{CallWaitMs: 3000} })
	sa := startSalesAgent(e)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "job-reference.mjs"), e.url+"/mcp", e.clientKey)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	in, err := cmd.StdinPipe()
	must(t, err)
	out, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	type event struct {
		Event        string          `json:"event"`
		OutputSchema bool            `json:"outputSchema"`
		IsError      bool            `json:"isError"`
		Text         string          `json:"text"`
		Message      string          `json:"message"`
		Structured   json.RawMessage `json:"structured"`
	}
	got := map[string]event{}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Errorf("the client printed %q", sc.Text())
			continue
		}
		got[ev.Event] = ev
		if ev.Event == "reference" {
			sa.release <- struct{}{}
			fmt.Fprintln(in, "go")
			in.Close()
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("node job-reference.mjs: %v\n%s", err, stderr.String())
	}
	if !got["listed"].OutputSchema {
		t.Errorf("tools/list: sales_report has no outputSchema; the test needs one")
	}
	if ev, ok := got["error"]; ok {
		t.Fatalf("callTool(sales_report) threw %q; want the job reference", ev.Message)
	}
	if ref := got["reference"]; !ref.IsError || !salesJobRef.MatchString(ref.Text) {
		t.Fatalf("callTool(sales_report) = %q (isError %v); want the job reference, isError", ref.Text, ref.IsError)
	}
	if res := got["result"]; res.IsError || res.Text != salesResult || string(res.Structured) != salesResult {
		t.Errorf("callTool(spacefix_job) = %q (isError %v, structured %s); want the report %s", res.Text, res.IsError, res.Structured, salesResult)
	}
}

// A call with a progress token whose handler reports progress and outlives
// the wait: the client gets the progress notifications, then the job
// reference, in both eras.
func TestJobProgress(t *testing.T) {
	t.Parallel()
	// The handler reports at once; a wait of 3 s leaves the lines ample
	// time to arrive before it ends, on a loaded machine too.
	e := newEnv(t, func(o *envOptions) { o.settings = &store.ProjectSettings{CallWaitMs: 3000} })
	sa := startSalesAgent(e)
	for _, v := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(v, func(t *testing.T) {
			var (
				mu     sync.Mutex
				events []string
			)
			cs := e.connect(v, e.clientKey, &mcp.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
					mu.Lock()
					events = append(events, fmt.Sprintf("%v %s", r.Params.Progress, r.Params.Message))
					mu.Unlock()
				},
			})
			params := &mcp.CallToolParams{Name: "sales_report", Arguments: map[string]any{"month": "May"}}
			params.SetProgressToken("tok-" + v)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			r, err := cs.CallTool(ctx, params)
			must(t, err)
			mu.Lock()
			got := strings.Join(events, "; ")
			mu.Unlock()
			if want := "1 Counting orders: 1 of 3 weeks; 2 Counting orders: 2 of 3 weeks"; got != want {
				t.Errorf("progress before the job reference: %q, want %q", got, want)
			}
			if m := salesJobRef.FindStringSubmatch(text(r)); m == nil || !r.IsError {
				t.Fatalf("sales_report = %q (isError %v); want the job reference, isError", text(r), r.IsError)
			}
			sa.release <- struct{}{}
			id := salesJobRef.FindStringSubmatch(text(r))[1]
			if res := call(t, cs, "spacefix_job", map[string]any{"jobId": id}); res.IsError || text(res) != salesResult {
				t.Errorf("spacefix_job = %q (isError %v); want the report", text(res), res.IsError)
			}
		})
	}
}
