package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/spacefix/spacefix/internal/dashboard/apitypes"
	"github.com/spacefix/spacefix/internal/policy"
)

// stdin is what `policy set -` reads; tests replace it.
var stdin io.Reader = os.Stdin

func policyCmd(ctx context.Context, args []string, stdout io.Writer) error {
	return dispatch(ctx, "policy", args, stdout, command{"show", policyShow}, command{"set", policySet}, command{"test", policyTest}, command{"history", policyHistory},
		command{"interceptors", policyInterceptors})
}

// shownPolicy is GET …/policy: the saved document, header values masked.
type shownPolicy struct {
	Version      int64                `json:"version"`
	UpdatedAt    *time.Time           `json:"updatedAt"`
	UpdatedBy    string               `json:"updatedBy"`
	Rules        []policy.Rule        `json:"rules"`
	Interceptors []policy.Interceptor `json:"interceptors"`
}

func policyShow(ctx context.Context, args []string, stdout io.Writer) error {
	var project string
	return apiShow(ctx, "policy show", args, stdout, func(c *apiClient) string {
		project = c.project
		return c.projectPath("/policy")
	}, func(w io.Writer, p shownPolicy) error { return printPolicy(w, project, p) })
}

func printPolicy(w io.Writer, project string, p shownPolicy) error {
	if p.Version == 0 {
		_, err := fmt.Fprintf(w, "Project %q has no policy: every call runs as it would without one. Save one with: spacefix policy set FILE\n", project)
		return err
	}
	saved := ""
	if p.UpdatedAt != nil {
		saved = " on " + p.UpdatedAt.UTC().Format("2006-01-02 15:04 UTC")
	}
	if p.UpdatedBy != "" {
		saved += " by " + p.UpdatedBy
	}
	fmt.Fprintf(w, "Policy of project %q, version %d, saved%s.\n", project, p.Version, saved)
	if len(p.Rules) == 0 {
		fmt.Fprintln(w, "No rules: every call runs as it would without a policy.")
	} else {
		fmt.Fprintln(w)
		t := newTable(w, "#", "NAME", "ON", "TOOLS", "EFFECT", "MODE", "WHEN")
		for i, r := range p.Rules {
			tools := strings.Join(r.Tools, ",")
			if tools == "" {
				tools = "*"
			}
			mode := r.Mode
			if mode == "" {
				mode = policy.Enforce
			}
			t.row(fmt.Sprint(i+1), r.Name, r.On, clip(tools, 30), r.Effect, mode, orDash(clip(r.When, 60)))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if len(p.Interceptors) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	t := newTable(w, "INTERCEPTOR", "AT", "MODE", "TIMEOUT", "ON FAILURE", "HEADERS")
	for _, ic := range p.Interceptors {
		at := ic.URL
		if ic.Agent != "" {
			at = "agent " + ic.Agent
		}
		mode := ic.Mode
		if mode == "" {
			mode = policy.Enforce
		}
		fail := "refuse"
		if ic.FailOpen {
			fail = "let through"
		}
		var hs []string
		for k, v := range ic.Headers {
			hs = append(hs, k+": "+v) // the API masks every value
		}
		slices.Sort(hs)
		t.row(orDash(ic.Name), at, mode, ic.TimeoutOf().String(), fail, orDash(strings.Join(hs, ", ")))
	}
	return t.flush()
}

// readPolicyFile reads a policy document from path ("-": stdin), JSON or
// YAML, and returns it as JSON, checked for unknown fields as the gateway
// checks it.
func readPolicyFile(path string) (json.RawMessage, *int64, policy.Document, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(io.LimitReader(stdin, 1<<20+1))
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, nil, policy.Document{}, fmt.Errorf("read the policy: %w", err)
	}
	name := path
	if path == "-" {
		name = "the policy on stdin"
	}
	raw := bytes.TrimSpace(b)
	if len(raw) == 0 {
		return nil, nil, policy.Document{}, fmt.Errorf("%s is empty; to remove every rule, save {\"rules\": []}", name)
	}
	if raw[0] != '{' {
		var v any
		if err := yaml.Unmarshal(b, &v); err != nil {
			return nil, nil, policy.Document{}, fmt.Errorf("%s is neither JSON nor YAML: %v", name, err)
		}
		if _, ok := v.(map[string]any); !ok {
			return nil, nil, policy.Document{}, fmt.Errorf("%s is not a mapping with rules (see docs/policy.md)", name)
		}
		if raw, err = json.Marshal(v); err != nil {
			return nil, nil, policy.Document{}, fmt.Errorf("%s: %v; write the policy as a mapping with rules (docs/policy.md)", name, err)
		}
	}
	raw, version, err := withoutShown(raw)
	if err != nil {
		return nil, nil, policy.Document{}, fmt.Errorf("%s: %v", name, err)
	}
	doc, err := policy.Parse(raw)
	if err != nil {
		return nil, nil, policy.Document{}, fmt.Errorf("%s: %v (see docs/policy.md)", name, err)
	}
	return raw, version, doc, nil
}

// withoutShown takes out what `policy show --json` adds to a document, so
// that its output can be edited and set again: who saved it and when
// (dropped) and the version (returned, for the gateway to refuse a save
// over a newer one).
func withoutShown(raw []byte) (doc []byte, version *int64, err error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, nil, err
	}
	if v, ok := fields["version"]; ok {
		var n int64
		if err := json.Unmarshal(v, &n); err != nil {
			return nil, nil, fmt.Errorf("version: want the version number policy show printed, not %s", v)
		}
		version = &n
	}
	n := len(fields)
	delete(fields, "version")
	delete(fields, "updatedAt")
	delete(fields, "updatedBy")
	if len(fields) == n {
		return raw, nil, nil
	}
	doc, err = json.Marshal(fields)
	return doc, version, err
}

func policySet(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("policy set", stdout)
	client := apiFlags(fs)
	asJSON := fs.Bool("json", false, "print the admin API's JSON")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError{"policy set: want one file, JSON or YAML (- reads stdin), for example: spacefix policy set policy.yaml"}
	}
	_, version, doc, err := readPolicyFile(pos[0])
	if err != nil {
		return err
	}
	body := map[string]any{"rules": doc.Rules, "interceptors": doc.Interceptors}
	if version != nil {
		body["version"] = *version // policy show --json's: refused if another save came since
	}
	c, err := client()
	if err != nil {
		return err
	}
	var out json.RawMessage
	if err := c.do(ctx, "PUT", c.projectPath("/policy"), body, &out); err != nil {
		return fmt.Errorf("policy of project %q not saved: %w", c.project, err)
	}
	return printAs(stdout, *asJSON, out, func(w io.Writer, p shownPolicy) error {
		_, err := fmt.Fprintf(w, "policy of project %s saved as version %d (%s, %s)\n", c.project, p.Version,
			plural(len(doc.Rules), "rule"), plural(len(doc.Interceptors), "interceptor"))
		return err
	})
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func policyTest(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("policy test", stdout)
	client := apiFlags(fs)
	tool := fs.String("tool", "", "the tool's `NAME`, as MCP clients see it")
	callArgs := fs.String("args", "{}", "the call's arguments, a JSON object")
	asKey := fs.String("as-key", "", "call as this client key (its `ID`, from spacefix keys list)")
	asPerson := fs.String("as-person", "", "call as this member of the project (their `EMAIL`), with their role")
	file := fs.String("file", "", "try this draft policy (JSON or YAML, - for stdin) instead of the saved one")
	result := fs.String("result", "", "a sample of the tool's result (`JSON`, an MCP tool result) for the rules on result")
	asJSON := fs.Bool("json", false, "print the admin API's JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *result != "" && (!json.Valid([]byte(*result)) || !strings.HasPrefix(strings.TrimSpace(*result), "{")) {
		return usageError{fmt.Sprintf("policy test: --result %q: want a tool result as JSON, for example '{\"content\": [{\"type\": \"text\", \"text\": \"mail ann@example.com\"}]}'", *result)}
	}
	switch {
	case *tool == "":
		return usageError{"policy test: --tool is required, for example: spacefix policy test --tool refund --args '{\"amount\": 900}' --as-person eve@example.com"}
	case *asKey != "" && *asPerson != "":
		return usageError{"policy test: --as-key and --as-person exclude each other"}
	case *asKey == "" && *asPerson == "":
		return usageError{"policy test: say who calls: --as-key KEY_ID or --as-person EMAIL"}
	case !json.Valid([]byte(*callArgs)) || !strings.HasPrefix(strings.TrimSpace(*callArgs), "{"):
		return usageError{fmt.Sprintf("policy test: --args %q: want a JSON object, for example '{\"amount\": 900}'", *callArgs)}
	}
	body := apitypes.PolicyTest{Tool: *tool, Args: json.RawMessage(*callArgs), AsKey: *asKey, AsPerson: *asPerson}
	if *result != "" {
		body.Result = json.RawMessage(*result)
	}
	if *file != "" {
		raw, _, _, err := readPolicyFile(*file)
		if err != nil {
			return err
		}
		body.Document = raw
	}
	c, err := client()
	if err != nil {
		return err
	}
	var out json.RawMessage
	if err := c.do(ctx, "POST", c.projectPath("/policy/test"), body, &out); err != nil {
		return apiFieldFlags(err, map[string]string{"asKey": "as-key", "asPerson": "as-person", "args": "args", "result": "result"})
	}
	return printAs(stdout, *asJSON, out, printDecisions)
}

func printDecisions(w io.Writer, r apitypes.PolicyTestResult) error {
	switch r.List.Effect {
	case policy.Hide:
		fmt.Fprintf(w, "list: hidden by rule %q\n", r.List.Rule)
	case policy.Allow:
		fmt.Fprintf(w, "list: visible (allowed by rule %q)\n", r.List.Rule)
	default:
		fmt.Fprintln(w, "list: visible")
	}
	printHits(w, "list", r.List.Audit)
	switch c := r.Call; c.Effect {
	case "none":
		fmt.Fprintln(w, "call: no rule decides; the call runs as it would without a policy")
	default:
		line := fmt.Sprintf("call: %s by rule %q", c.Effect, c.Rule)
		if c.Failed {
			line += " (it could not be evaluated)"
		}
		if c.Message != "" {
			line += ": " + c.Message
		}
		fmt.Fprintln(w, line)
	}
	printHits(w, "call", r.Call.Audit)
	if r.Result != nil {
		printResult(w, r.Result)
	}
	return nil
}

// printResult says what the rules on result make of the sample result,
// and what the caller would get.
func printResult(w io.Writer, r *apitypes.PolicyResultShaped) {
	var shaped bytes.Buffer
	if json.Compact(&shaped, r.Shaped) != nil {
		shaped.Write(r.Shaped)
	}
	switch r.Effect {
	case "none":
		fmt.Fprintln(w, "result: no rule decides; the caller gets it as it is")
	case policy.Allow:
		fmt.Fprintf(w, "result: allowed by rule %q; the caller gets it as it is\n", r.Rule)
	default:
		line := fmt.Sprintf("result: %s by rule %q", r.Effect, r.Rule)
		if r.Failed {
			line += " (it could not be evaluated)"
		}
		fmt.Fprintf(w, "%s; the caller gets: %s\n", line, shaped.String())
	}
	printHits(w, "result", r.Audit)
}

// printHits says what audit-mode rules would have done.
func printHits(w io.Writer, point string, hits []apitypes.PolicyHit) {
	for _, h := range hits {
		failed := ""
		if h.Failed {
			failed = " (it could not be evaluated)"
		}
		fmt.Fprintf(w, "%s: audit-mode rule %q would %s%s\n", point, h.Rule, h.Effect, failed)
	}
}

// maxHistory is how many versions `policy history` lists at most (the
// API's bound).
const maxHistory = 100

func policyHistory(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("policy history", stdout)
	client := apiFlags(fs)
	limit := fs.Int("limit", 20, fmt.Sprintf("at most this many versions, newest first (1 to %d)", maxHistory))
	asJSON := fs.Bool("json", false, "print the admin API's JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *limit < 1 || *limit > maxHistory {
		return usageError{fmt.Sprintf("policy history: --limit must be 1 to %d", maxHistory)}
	}
	c, err := client()
	if err != nil {
		return err
	}
	var raw json.RawMessage
	if err := c.do(ctx, "GET", c.projectPath("/policy/versions?limit=%d", *limit), nil, &raw); err != nil {
		return err
	}
	return printAs(stdout, *asJSON, raw, func(w io.Writer, h apitypes.PolicyVersions) error {
		if len(h.Versions) == 0 {
			_, err := fmt.Fprintf(w, "Project %q has no policy: no version was saved. Save one with: spacefix policy set FILE\n", c.project)
			return err
		}
		t := newTable(w, "VERSION", "SAVED (UTC)", "BY")
		for _, v := range h.Versions {
			t.row(fmt.Sprint(v.Version), v.UpdatedAt.UTC().Format(time.DateTime), orDash(v.UpdatedBy))
		}
		if err := t.flush(); err != nil {
			return err
		}
		if len(h.Versions) == *limit && h.Versions[len(h.Versions)-1].Version > 1 {
			fmt.Fprintf(w, "\nOlder versions: add --limit %d\n", min(*limit*2, maxHistory))
		}
		return nil
	})
}
