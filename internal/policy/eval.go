package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/interpreter"
)

// Caller is who is calling, as rules see it (`caller` in CEL). For a key
// call the person and app are empty; for an OAuth call the key is.
type Caller struct {
	PersonID, PersonEmail, PersonName string
	Role                              string // the person's role in the project; "" for a key
	KeyID, KeyName                    string
	AppID, AppName                    string // the OAuth client
	Scopes                            []string
	Project                           string
}

// Tool is the tool called or listed (`tool` in CEL).
type Tool struct {
	Name        string
	Agent       string // the agent key's name
	ReadOnly    bool   // after the dashboard's setting
	Destructive bool
	Annotations map[string]any
}

// Result is a call's result (`result` in CEL, for rules on result).
type Result struct {
	Text       string // the text content, joined
	Structured any    // structuredContent as decoded JSON; nil when absent
	IsError    bool
	// Size is the length of structuredContent's JSON, when there is one:
	// with it a condition over a small result runs without cost tracking.
	// 0 with a Structured value: unknown, tracked.
	Size int
}

// Input is what one evaluation reads.
type Input struct {
	Caller Caller
	Tool   Tool
	Args   json.RawMessage // the validated arguments; decoded only when a rule reads them
	Result *Result         // for rules on result

	// The arguments as decoded by the first evaluation that read them,
	// kept for the next point of the same call ([Input.SetArgs] drops
	// them).
	args    map[string]any
	argsErr error
}

// SetArgs replaces the arguments the rules read (an interceptor rewrote
// them).
func (in *Input) SetArgs(raw json.RawMessage) {
	in.Args, in.args, in.argsErr = raw, nil, nil
}

// Decision is what the policy says at one point of one call.
type Decision struct {
	Effect  string // Allow, Deny, Hide, Confirm, Redact; "": no rule decided
	Rule    string // the rule that decided
	Message string // for Deny and Confirm, templated
	Failed  bool   // the deciding rule could not be evaluated (Effect is Deny or Hide)
	Audit   []Hit  // what audit-mode rules read before the decision would have done

	patterns []*regexp.Regexp
}

// Hit is what an audit-mode rule would have done.
type Hit struct {
	Rule   string
	Effect string
	Failed bool // it could not be evaluated (it would have refused)
}

// FailedMessage is the refusal of a call whose deciding rule could not be
// evaluated.
func FailedMessage(rule string) string {
	return fmt.Sprintf("This call was refused by rule %q of the project's policy, which could not be evaluated.", rule)
}

// Decide reads p's rules at point on, in order, and returns the first
// decision; a nil p decides nothing.
func (p *Policy) Decide(on string, in *Input) Decision {
	var d Decision
	if p == nil {
		return d
	}
	vars := &activation{in: in, now: p.opts.Now, size: in.size()}
	for _, r := range p.rulesFor(on, in.Tool.Name) {
		if r.refuted(vars) {
			continue
		}
		ok, err := r.holds(vars)
		if err != nil {
			p.logEvalError(r.Name, in.Tool.Name, err)
		}
		if !ok && err == nil {
			continue
		}
		if r.audit {
			d.Audit = append(d.Audit, Hit{Rule: r.Name, Effect: r.Effect, Failed: err != nil})
			continue
		}
		d.Effect, d.Rule = r.Effect, r.Name
		if err != nil {
			d.Failed = true
			d.Effect = Deny
			if on == OnList {
				d.Effect = Hide
			}
			d.Message = FailedMessage(r.Name)
			return d
		}
		switch r.Effect {
		case Deny:
			d.Message = r.message(vars, "This call was refused by rule %[1]q of the project's policy.")
		case Confirm:
			d.Message = r.message(vars, "Allow this call to %[2]s? The project's policy (rule %[1]q) asks you first.")
		case Redact:
			d.patterns = r.patterns
		}
		return d
	}
	return d
}

// size bounds the bytes of what a condition reads of the call's arguments
// and result (a string, a list or a map in them is no longer than their
// JSON), or is -1 when it is not known.
func (in *Input) size() int {
	n := len(in.Args)
	if r := in.Result; r != nil {
		if r.Structured != nil && r.Size <= 0 {
			return -1
		}
		n = max(n, len(r.Text), r.Size)
	}
	return n
}

// refuted reports whether one of the rule's guards is certainly false for
// the call: then so is its condition, and cel-go need not evaluate it.
func (r *compiled) refuted(vars *activation) bool {
	for i := range r.guards {
		if r.guards[i].refutes(vars) {
			return true
		}
	}
	return false
}

// holds evaluates the rule's condition: untracked when the call's inputs
// are small enough for its worst case to stay under the limit.
func (r *compiled) holds(vars *activation) (bool, error) {
	if r.prg == nil {
		return true, nil
	}
	prg := r.prg
	if r.fast != nil && vars.size >= 0 && vars.size <= r.fastUpTo {
		prg = r.fast
	}
	out, _, err := prg.Eval(vars)
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("the condition yielded %s, not a bool", out.Type())
	}
	return bool(b), nil
}

// message is the rule's message, templated, or the default (with the
// rule's name and the tool's).
func (r *compiled) message(vars *activation, def string) string {
	if r.Message == "" {
		return fmt.Sprintf(def, r.Name, vars.in.Tool.Name)
	}
	return expand(r.Message, vars)
}

// activation gives CEL the input's values, building each map only when
// a rule first reads it (most calls match no rule, or rules that read
// only the tool).
type activation struct {
	in      *Input
	size    int // in.size()
	now     func() time.Time
	caller  map[string]any
	tool    map[string]any
	args    map[string]any
	argsErr error
	result  map[string]any
}

var errArgsNotObject = errors.New("the arguments are not a JSON object")

func (a *activation) ResolveName(name string) (any, bool) {
	if name == "now" {
		return a.now(), true
	}
	return a.native(name)
}

// native is a variable of the call as Go has it (maps of strings, bools,
// numbers, lists and maps), built when first read; args that are not a
// JSON object are an error value.
func (a *activation) native(name string) (any, bool) {
	switch name {
	case "caller":
		if a.caller == nil {
			c := a.in.Caller
			scopes := c.Scopes
			if scopes == nil {
				scopes = []string{}
			}
			a.caller = map[string]any{
				"person":  map[string]any{"id": c.PersonID, "email": c.PersonEmail, "name": c.PersonName},
				"role":    c.Role,
				"key":     map[string]any{"id": c.KeyID, "name": c.KeyName},
				"app":     map[string]any{"id": c.AppID, "name": c.AppName},
				"scopes":  scopes,
				"project": c.Project,
			}
		}
		return a.caller, true
	case "tool":
		if a.tool == nil {
			t := a.in.Tool
			ann := t.Annotations
			if ann == nil {
				ann = map[string]any{}
			}
			a.tool = map[string]any{"name": t.Name, "agent": t.Agent, "readOnly": t.ReadOnly,
				"destructive": t.Destructive, "annotations": ann}
		}
		return a.tool, true
	case "args":
		if a.args == nil && a.argsErr == nil {
			if a.in.args == nil && a.in.argsErr == nil {
				a.in.args, a.in.argsErr = decodeArgs(a.in.Args)
			}
			a.args, a.argsErr = a.in.args, a.in.argsErr
		}
		if a.argsErr != nil {
			return types.NewErr("%v", a.argsErr), true
		}
		return a.args, true
	case "result":
		if a.result == nil {
			r := a.in.Result
			if r == nil {
				r = &Result{}
			}
			a.result = map[string]any{"text": r.Text, "structured": r.Structured, "isError": r.IsError}
		}
		return a.result, true
	}
	return nil, false
}

// field is the value at path below variable root (caller, tool, args or
// result), as Go has it; false when a step is absent or not a map.
func (a *activation) field(root string, path []string) (any, bool) {
	v, ok := a.native(root)
	for _, f := range path {
		m, isMap := v.(map[string]any)
		if !ok || !isMap {
			return nil, false
		}
		v, ok = m[f]
	}
	return v, ok
}

func (a *activation) Parent() interpreter.Activation { return nil }

// decodeArgs decodes a call's arguments; absent arguments are {}.
func decodeArgs(raw json.RawMessage) (map[string]any, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return map[string]any{}, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, errArgsNotObject
	}
	if m == nil {
		m = map[string]any{}
	}
	return m, nil
}
