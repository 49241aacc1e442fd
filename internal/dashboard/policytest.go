package dashboard

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/access"
	"github.com/spacefix/spacefix/internal/dashboard/apitypes"
	"github.com/spacefix/spacefix/internal/oauth"
	"github.com/spacefix/spacefix/internal/policy"
	"github.com/spacefix/spacefix/internal/store"
)

// apiTestPolicy answers what the saved policy (or a draft) would decide
// for one caller listing and calling one tool with some arguments, and
// for a sample of its result when the test gives one. It
// builds the caller and the tool as the MCP path does, so what it answers
// is what a call would meet; it runs no interceptor and calls nothing.
func (d *Dashboard) apiTestPolicy(w http.ResponseWriter, r *http.Request) error {
	proj, err := d.project(r)
	if err != nil {
		return err
	}
	b, err := policyBody(r)
	if err != nil {
		return err
	}
	var req apitypes.PolicyTest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return errorf(http.StatusBadRequest, "The request body is not the JSON this call takes: %v. See docs/api.md.", err)
	}
	args := bytes.TrimSpace(req.Args)
	if len(args) == 0 || string(args) == "null" {
		args = []byte("{}")
	}
	if args[0] != '{' {
		return fieldError("args", "want the call's arguments as a JSON object, such as {\"amount\": 900}")
	}
	sample, err := sampleResult(req.Result)
	if err != nil {
		return err
	}
	controls, err := access.Load(r.Context(), d.st, proj.ID)
	if err != nil {
		return err
	}
	t := d.reg.Snapshot(proj.ID).Tools[req.Tool]
	if t == nil {
		return errorf(http.StatusNotFound, "Project %q has no tool %q. `spacefix tools list` (or the Tools page) lists the tools its clients see.", proj.Name, req.Tool)
	}
	caller, err := d.testCaller(r, proj, req)
	if err != nil {
		return err
	}
	pol := controls.Policy
	if len(bytes.TrimSpace(req.Document)) > 0 && string(bytes.TrimSpace(req.Document)) != "null" {
		doc, err := policy.Parse(req.Document)
		if err != nil {
			return refuse(w, err)
		}
		if pol, err = policy.Compile(doc, policy.Options{}); err != nil {
			return refuse(w, err)
		}
	} else if controls.PolicyErr != nil {
		return errorf(http.StatusConflict, "The saved policy of project %q does not compile on this gateway (%v), so every call is refused. Save one that compiles.", proj.Name, controls.PolicyErr)
	}
	in := &policy.Input{Caller: caller, Tool: controls.PolicyTool(t), Args: args}
	out := apitypes.PolicyTestResult{
		List: decisionOut(pol.Decide(policy.OnList, in)),
		Call: decisionOut(pol.Decide(policy.OnCall, in)),
	}
	if sample != nil {
		in.Result = access.PolicyResult(sample)
		d := pol.Decide(policy.OnResult, in)
		shaped, err := json.Marshal(access.ShapeResult(sample, &d))
		if err != nil {
			return err
		}
		out.Result = &apitypes.PolicyResultShaped{PolicyDecision: decisionOut(d), Shaped: shaped}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// sampleResult reads the test's sample result: nil when there is none.
func sampleResult(raw json.RawMessage) (*mcp.CallToolResult, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var r mcp.CallToolResult
	if raw[0] != '{' || json.Unmarshal(raw, &r) != nil {
		return nil, fieldError("result", `want a tool result as MCP has it, such as {"content": [{"type": "text", "text": "mail ann@example.com"}]}`)
	}
	return &r, nil
}

func decisionOut(dec policy.Decision) apitypes.PolicyDecision {
	out := apitypes.PolicyDecision{Effect: dec.Effect, Rule: dec.Rule, Message: dec.Message, Failed: dec.Failed, Audit: []apitypes.PolicyHit{}}
	if out.Effect == "" {
		out.Effect = "none"
	}
	for _, h := range dec.Audit {
		out.Audit = append(out.Audit, apitypes.PolicyHit{Rule: h.Rule, Effect: h.Effect, Failed: h.Failed})
	}
	return out
}

// testCaller is who the test calls as: a client key of the project, a
// member by e-mail, or (with neither) the signed-in person.
func (d *Dashboard) testCaller(r *http.Request, proj store.Project, req apitypes.PolicyTest) (policy.Caller, error) {
	ctx := r.Context()
	switch {
	case req.AsKey != "" && req.AsPerson != "":
		return policy.Caller{}, fieldError("asKey", "test as a key or as a person, not both")
	case req.AsKey != "":
		k, err := d.st.Key(ctx, req.AsKey)
		if errors.Is(err, store.ErrNotFound) || (err == nil && (k.ProjectID != proj.ID || k.Kind != store.KindClient)) {
			return policy.Caller{}, fieldError("asKey", "project %q has no client key %q; `spacefix keys list` lists them", proj.Name, req.AsKey)
		}
		if err != nil {
			return policy.Caller{}, err
		}
		if k.Revoked() {
			return policy.Caller{}, fieldError("asKey", "key %q is revoked; its calls are refused before any rule is read", req.AsKey)
		}
		return keyCaller(k, proj), nil
	}
	var u store.User
	if req.AsPerson != "" {
		var err error
		u, _, err = d.st.UserByEmail(ctx, req.AsPerson)
		if errors.Is(err, store.ErrNotFound) {
			return policy.Caller{}, fieldError("asPerson", "%s is not a member of project %q; its Members page lists who is", req.AsPerson, proj.Name)
		}
		if err != nil {
			return policy.Caller{}, err
		}
	} else {
		p := principalFrom(ctx)
		if p.token != nil {
			return policy.Caller{}, fieldError("asKey", "say whom to test as: asKey (a client key's id) or asPerson (a member's e-mail)")
		}
		u = p.user
	}
	m, err := d.st.Member(ctx, proj.ID, u.ID)
	if errors.Is(err, store.ErrNotFound) {
		return policy.Caller{}, fieldError("asPerson", "%s is not a member of project %q; its Members page lists who is", u.Email, proj.Name)
	}
	if err != nil {
		return policy.Caller{}, err
	}
	return policy.Caller{
		PersonID: strconv.FormatInt(u.ID, 10), PersonEmail: u.Email, PersonName: u.Name, Role: string(m.Role),
		Scopes: strings.Fields(oauth.ScopeAll), Project: proj.Name,
	}, nil
}

// keyCaller is a client key as the MCP path shows it to rules: the key,
// the project, and the scopes it allows.
func keyCaller(k store.Key, proj store.Project) policy.Caller {
	scopes := []string{oauth.ScopeRead, oauth.ScopeWrite}
	if k.ReadOnly {
		scopes = []string{oauth.ScopeRead}
	}
	return policy.Caller{KeyID: k.ID, KeyName: k.Name, Scopes: scopes, Project: proj.Name}
}
