package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/gateway"
	"github.com/spacefix/spacefix/internal/interceptors"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/testenv"
)

// policyGateway runs a gateway with a real agent offering refund, and
// returns the admin API flags, the client key's id and the store.
func policyGateway(t *testing.T) (api []string, clientKey string, st store.Store) {
	t.Helper()
	data, g, first, st := testGateway(t)
	out, err := runCLI(t, "tokens", "create", "--data", data, "--name", "ci", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var tok struct{ Token string }
	if err := json.Unmarshal([]byte(out), &tok); err != nil {
		t.Fatalf("tokens create --json printed %q: %v", out, err)
	}
	a, err := core.New(core.Options{APIKey: first.AgentKey, URL: g.URL(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	type refundIn struct {
		Order  string `json:"order"`
		Amount int    `json:"amount"`
	}
	if err := core.AddTool(a, "refund", "Refund an order.", func(_ context.Context, in refundIn) (string, error) { return "refunded", nil }); err != nil {
		t.Fatal(err)
	}
	actx, stop := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { a.Run(actx); close(ran) }()
	t.Cleanup(func() { stop(); <-ran })
	deadline := time.Now().Add(10 * time.Second)
	for len(g.Registry().All()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the agent did not connect")
		}
		time.Sleep(10 * time.Millisecond) // poll interval, bounded by the deadline: a real gateway on a socket
	}
	keys, err := st.Keys(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k.Kind == store.KindClient {
			clientKey = k.ID
		}
	}
	return []string{"--url", g.URL(), "--token", tok.Token}, clientKey, st
}

const policyYAML = `# Refunds: owners only above 500; those above 100 are recorded.
rules:
  - name: watch
    on: call
    effect: deny
    mode: audit
    when: args.amount > 100
  - name: amount-limit
    on: call
    tools: ["refund*"]
    when: args.amount > 500 && caller.role != "owner"
    effect: deny
    message: Refunds over 500 need an owner.
interceptors:
  - name: pii
    url: http://127.0.0.1:9/mcp
    headers:
      Authorization: Bearer ic-secret-77
`

func TestPolicyCommands(t *testing.T) {
	api, clientKey, st := policyGateway(t)
	cli := func(args ...string) (string, error) { return runCLI(t, append(args, api...)...) }

	out, err := cli("policy", "show")
	if err != nil || out != "Project \"default\" has no policy: every call runs as it would without one. Save one with: spacefix policy set FILE\n" {
		t.Errorf("policy show before any: %v\n%s", err, out)
	}
	out, err = cli("policy", "history")
	if err != nil || out != "Project \"default\" has no policy: no version was saved. Save one with: spacefix policy set FILE\n" {
		t.Errorf("policy history before any: %v\n%s", err, out)
	}

	file := filepath.Join(t.TempDir(), "policy.yaml")
	os.WriteFile(file, []byte(policyYAML), 0o600)
	out, err = cli("policy", "set", file)
	if err != nil || out != "policy of project default saved as version 1 (2 rules, 1 interceptor)\n" {
		t.Fatalf("policy set YAML: %v\n%s", err, out)
	}
	sp, _ := st.Policy(context.Background(), 1)
	if sp.Version != 1 || !strings.Contains(string(sp.Document), "ic-secret-77") {
		t.Errorf("stored: version %d %s", sp.Version, sp.Document)
	}

	out, err = cli("policy", "show")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`Policy of project "default", version 1, saved on `, " by token ",
		"#  NAME          ON    TOOLS    EFFECT  MODE     WHEN",
		"1  watch         call  *        deny    audit    args.amount > 100",
		`2  amount-limit  call  refund*  deny    enforce  args.amount > 500 && caller.role != "owner"`,
		"pii          http://127.0.0.1:9/mcp  enforce  500ms    refuse      Authorization: ••••••",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("policy show lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "ic-secret") {
		t.Errorf("policy show prints the header value:\n%s", out)
	}
	out, err = cli("policy", "show", "--json")
	shownJSON := out
	var shown shownPolicy
	if err != nil || json.Unmarshal([]byte(out), &shown) != nil || shown.Version != 1 || len(shown.Rules) != 2 || strings.Contains(out, "ic-secret") {
		t.Errorf("policy show --json: %v\n%s", err, out)
	}

	// The decision and the rule that made it.
	out, err = cli("policy", "test", "--tool", "refund", "--args", `{"order":"A1","amount":900}`, "--as-key", clientKey)
	want := "list: visible\ncall: deny by rule \"amount-limit\": Refunds over 500 need an owner.\ncall: audit-mode rule \"watch\" would deny\n"
	if err != nil || out != want {
		t.Errorf("policy test over the limit: %v\n%s\nwant\n%s", err, out, want)
	}
	out, err = cli("policy", "test", "--tool", "refund", "--args", `{"amount":5}`, "--as-key", clientKey)
	if err != nil || out != "list: visible\ncall: no rule decides; the call runs as it would without a policy\n" {
		t.Errorf("policy test under the limit: %v\n%s", err, out)
	}
	draft := filepath.Join(t.TempDir(), "draft.json")
	os.WriteFile(draft, []byte(`{"rules":[{"name":"no-refunds","on":"list","tools":["refund"],"effect":"hide"}]}`), 0o600)
	out, err = cli("policy", "test", "--tool", "refund", "--as-key", clientKey, "--file", draft)
	if err != nil || !strings.HasPrefix(out, "list: hidden by rule \"no-refunds\"\n") {
		t.Errorf("policy test --file: %v\n%s", err, out)
	}
	// A sample result: what the rules on result make of it.
	os.WriteFile(draft, []byte(`{"rules":[{"name":"pii","on":"result","effect":"redact","redact":["[\\w.]+@[\\w.]+\\w"]},
		{"name":"watch","on":"result","effect":"deny","mode":"audit"}]}`), 0o600)
	sample := `{"content":[{"type":"text","text":"mail ann@example.com"}]}`
	out, err = cli("policy", "test", "--tool", "refund", "--as-key", clientKey, "--file", draft, "--result", sample)
	want = "list: visible\ncall: no rule decides; the call runs as it would without a policy\n" +
		`result: redact by rule "pii"; the caller gets: {"content":[{"type":"text","text":"mail [redacted]"}]}` + "\n"
	if err != nil || out != want {
		t.Errorf("policy test --result: %v\n%s\nwant\n%s", err, out, want)
	}
	out, err = cli("policy", "test", "--tool", "refund", "--as-key", clientKey, "--result", sample)
	if err != nil || !strings.HasSuffix(out, "result: no rule decides; the caller gets it as it is\n") {
		t.Errorf("policy test --result without result rules: %v\n%s", err, out)
	}
	if _, err = cli("policy", "test", "--tool", "refund", "--as-key", clientKey, "--result", `"text"`); err == nil || !strings.HasPrefix(err.Error(), `policy test: --result "\"text\"": want a tool result as JSON`) {
		t.Errorf("policy test --result of a string: %v", err)
	}
	if _, err = cli("policy", "test", "--tool", "refund", "--as-key", clientKey, "--result", `{"content":"x"}`); err == nil || !strings.HasPrefix(err.Error(), "--result: want a tool result as MCP has it") {
		t.Errorf("policy test --result the gateway refuses: %v", err)
	}
	out, err = cli("policy", "test", "--tool", "nope", "--as-key", clientKey)
	if err == nil || !strings.Contains(err.Error(), "`spacefix tools list`") {
		t.Errorf("policy test of an unknown tool: %v\n%s", err, out)
	}
	out, err = cli("policy", "test", "--tool", "refund", "--as-person", "nobody@example.com")
	if err == nil || err.Error() != `--as-person: nobody@example.com is not a member of project "default"; its Members page lists who is` {
		t.Errorf("policy test as a non-member: %v\n%s", err, out)
	}

	// A rule that does not compile: its name and position, exit 1, nothing saved.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("rules:\n  - name: broken\n    on: call\n    effect: deny\n    when: args.amount >\n"), 0o600)
	out, err = cli("policy", "set", bad)
	var ue usageError
	if err == nil || errors.As(err, &ue) || !strings.HasPrefix(err.Error(), `policy of project "default" not saved: rule "broken": when at line 1, column `) {
		t.Errorf("policy set of a bad rule: %v\n%s", err, out)
	}
	// An unknown field is refused before anything is sent.
	os.WriteFile(bad, []byte("rules:\n  - name: typo\n    on: call\n    efect: deny\n"), 0o600)
	if _, err = cli("policy", "set", bad); err == nil || !strings.Contains(err.Error(), `unknown field "efect"`) {
		t.Errorf("policy set with a misspelt field: %v", err)
	}
	os.WriteFile(bad, []byte("\n# nothing yet\n"), 0o600)
	if _, err = cli("policy", "set", bad); err == nil || !strings.Contains(err.Error(), "is not a mapping with rules") {
		t.Errorf("policy set of a file with no document: %v", err)
	}
	os.WriteFile(bad, nil, 0o600)
	if _, err = cli("policy", "set", bad); err == nil || !strings.HasSuffix(err.Error(), `bad.yaml is empty; to remove every rule, save {"rules": []}`) {
		t.Errorf("policy set of an empty file: %v", err)
	}
	if sp, _ := st.Policy(context.Background(), 1); sp.Version != 1 {
		t.Errorf("after refused sets: version %d, want 1", sp.Version)
	}

	// What policy show --json prints can be edited and set again; its
	// version guards against a save that came in between.
	shownFile := filepath.Join(t.TempDir(), "shown.json")
	os.WriteFile(shownFile, []byte(shownJSON), 0o600)
	out, err = cli("policy", "set", shownFile)
	if err != nil || out != "policy of project default saved as version 2 (2 rules, 1 interceptor)\n" {
		t.Fatalf("policy set of policy show --json: %v\n%s", err, out)
	}
	out, err = cli("policy", "set", shownFile)
	if err == nil || err.Error() != `policy of project "default" not saved: The policy of project "default" changed since you read it: you edited version 1, and version 2 was saved by token `+tokenID(t, st)+` (ci). Reload it, apply your change again and save.` {
		t.Errorf("policy set of a stale policy show --json: %v\n%s", err, out)
	}

	// - reads stdin; the saved header is kept when sent masked.
	stdin = strings.NewReader(`{"rules": [], "interceptors": [{"name": "pii", "url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "••••••"}}]}`)
	t.Cleanup(func() { stdin = os.Stdin })
	out, err = cli("policy", "set", "-")
	if err != nil || out != "policy of project default saved as version 3 (0 rules, 1 interceptor)\n" {
		t.Errorf("policy set -: %v\n%s", err, out)
	}
	if sp, _ := st.Policy(context.Background(), 1); !strings.Contains(string(sp.Document), "ic-secret-77") {
		t.Errorf("stored after a masked header: %s", sp.Document)
	}

	// The saved versions, newest first.
	out, err = cli("policy", "history")
	by := "token " + tokenID(t, st) + " (ci)"
	if err != nil || !regexp.MustCompile(`^VERSION  SAVED \(UTC\) +BY\n3 .* `+regexp.QuoteMeta(by)+`\n2 .*\n1 .*\n$`).MatchString(out) {
		t.Errorf("policy history: %v\n%s", err, out)
	}
	out, err = cli("policy", "history", "--limit", "1")
	if err != nil || !strings.HasPrefix(out, "VERSION") || !strings.Contains(out, "\n3 ") || strings.Contains(out, "\n2 ") ||
		!strings.HasSuffix(out, "\nOlder versions: add --limit 2\n") {
		t.Errorf("policy history --limit 1: %v\n%s", err, out)
	}
	out, err = cli("policy", "history", "--json")
	var h struct{ Versions []struct{ Version int64 } }
	if err != nil || json.Unmarshal([]byte(out), &h) != nil || len(h.Versions) != 3 || h.Versions[0].Version != 3 {
		t.Errorf("policy history --json: %v\n%s", err, out)
	}
	if _, err = cli("policy", "history", "--limit", "0"); err == nil || err.Error() != "policy history: --limit must be 1 to 100" {
		t.Errorf("policy history --limit 0: %v", err)
	}
}

func TestPolicyHelp(t *testing.T) {
	for _, args := range [][]string{{"policy", "--help"}, {"help", "policy"}, {"policy", "help"}} {
		out, err := runCLI(t, args...)
		if !errors.Is(err, flag.ErrHelp) || !strings.Contains(out, "spacefix policy set FILE") || !strings.Contains(out, "--as-key KEY_ID|--as-person EMAIL") ||
			!strings.Contains(out, "spacefix policy interceptors [--project NAME]") {
			t.Errorf("%q: %v\n%s", args, err, out)
		}
	}
	out, err := runCLI(t, "policy", "test", "--help")
	if !errors.Is(err, flag.ErrHelp) || !strings.Contains(out, "--as-person") || !strings.Contains(out, "--file") {
		t.Errorf("policy test --help: %v\n%s", err, out)
	}
	out, _ = runCLI(t, "help")
	if !strings.Contains(out, "spacefix policy    show|set FILE|test --tool NAME") || !strings.Contains(out, "spacefix policy    history|interceptors ") {
		t.Errorf("help lacks the policy line:\n%s", out)
	}
	_, err = runCLI(t, "policy", "test", "--tool", "x")
	var ue usageError
	if !errors.As(err, &ue) || err.Error() != "policy test: say who calls: --as-key KEY_ID or --as-person EMAIL" {
		t.Errorf("policy test without a caller: %v", err)
	}
}

// guardServer is a real interceptor server (go-sdk, Streamable HTTP on
// loopback) offering a validator and a mutator with a priority hint.
func guardServer(t *testing.T) string {
	t.Helper()
	infos := []interceptors.Info{
		{Name: "no-999", Type: interceptors.Validation, Hook: interceptors.Hook{Events: []string{"tools/call"}, Phase: interceptors.PhaseRequest}},
		{Name: "emails", Type: interceptors.Mutation, Mode: "audit", Hook: interceptors.Hook{Events: []string{"tools/call", "resources/read"}, Phase: interceptors.PhaseResponse},
			PriorityHint: interceptors.Priority{Request: 5, Response: 10}},
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "guard", Version: "1"}, nil)
	if err := mcp.AddReceivingCustomMethod(s, interceptors.MethodList, func(context.Context, *mcp.ServerSession, *interceptors.ListParams) (*interceptors.ListResult, error) {
		return &interceptors.ListResult{Interceptors: infos}, nil
	}); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(hs.Close)
	return hs.URL + "/mcp"
}

// TestPolicyInterceptorsCommand: policy interceptors prints what the
// gateway found at each interceptor server of the saved policy (a server
// listed with its interceptors, one that refuses connections with why),
// never a header value; --json prints the API's answer.
func TestPolicyInterceptorsCommand(t *testing.T) {
	url := guardServer(t) // first: it stops after the gateway
	gone := "http://" + testenv.RefusingAddr(t) + "/mcp"
	data, g, _, _ := testGatewayWith(t, func(c *gateway.Config) { c.UpstreamAllowLoopback = true })
	out, err := runCLI(t, "tokens", "create", "--data", data, "--name", "ci", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var tok struct{ Token string }
	json.Unmarshal([]byte(out), &tok)
	cli := func(args ...string) (string, error) {
		return runCLI(t, append(args, "--url", g.URL(), "--token", tok.Token)...)
	}
	if out, err := cli("policy", "interceptors"); err != nil || out != "The policy of project \"default\" lists no interceptor servers.\n" {
		t.Errorf("policy interceptors before a policy: %v\n%s", err, out)
	}
	file := filepath.Join(t.TempDir(), "policy.yaml")
	os.WriteFile(file, []byte("interceptors:\n  - name: guard\n    url: "+url+"\n    headers: {Authorization: Bearer ic-secret-78}\n  - url: "+gone+"\n"), 0o600)
	if _, err := cli("policy", "set", file); err != nil {
		t.Fatal(err)
	}

	out, err = cli("policy", "interceptors")
	if err != nil {
		t.Fatal(err)
	}
	at := `at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC`
	want := regexp.MustCompile(`^` + regexp.QuoteMeta(`Interceptor servers of project "default", policy version 1, as the gateway at `+g.URL()+` found them:

guard  `+url+`
  listed 2 interceptors `) + at + regexp.QuoteMeta(`
  INTERCEPTOR  TYPE        HOOKS                                         PRIORITY                MODE
  no-999       validation  tools/call request                            -                       enforce
  emails       mutation    tools/call response, resources/read response  request 5, response 10  audit

`+strings.TrimSuffix(strings.TrimPrefix(gone, "http://"), "/mcp")+`  `+gone+`
  could not be listed `) + at + regexp.QuoteMeta(`: Nothing answers at `+gone+` (connection refused): check that the server runs there.
`) + `$`)
	if !want.MatchString(out) {
		t.Errorf("policy interceptors printed\n%s\nwant it to match\n%s", out, want)
	}
	if strings.Contains(out, "ic-secret") {
		t.Errorf("policy interceptors prints the header value:\n%s", out)
	}
	out, err = cli("policy", "interceptors", "--json")
	if err != nil || !strings.Contains(out, `"state": "listed"`) || !strings.Contains(out, `"state": "unreachable"`) || strings.Contains(out, "ic-secret") {
		t.Errorf("policy interceptors --json: %v\n%s", err, out)
	}
}

// tokenID is the id of the one admin API token of the store.
func tokenID(t *testing.T, st store.Store) string {
	t.Helper()
	toks, err := st.APITokens(context.Background())
	if err != nil || len(toks) != 1 {
		t.Fatalf("tokens: %v, %v", toks, err)
	}
	return toks[0].ID
}
