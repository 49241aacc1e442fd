package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/access"
	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/policy"
)

// A rule with effect confirm asks the person before the call is sent: the
// call is answered with an input request (a form with one "confirm"
// checkbox, the one the agents' own confirmations use: confirm.go) and a
// requestState; the client asks the user and makes the call again with the
// answer. go-sdk turns that into elicitation/create for a 2025 session, so
// both eras ask the same way. Only an accepted form whose confirm is true
// runs the call; a decline, a cancel or any other answer does not.
//
// Nothing is held between the two requests (the call was not sent): the
// state, sealed as every requestState is, names the key, the tool and a
// digest of the validated arguments, and expires after confirmFor, so an
// answer given for one call never lets another through. Within that time
// the same answer may be sent again for the very same call. Its head has
// no gateway's prefix: any gateway of the key file serves the retry, none
// forwards it (gateway.heldCallOwner).
//
// A task-augmented call (either era) is asked through its task: the task
// starts input_required with the policy's question, before anything is
// sent (tasks.Spec.Confirm), and the client answers it as any question of
// a task (tasks/update at 2026-07-28, tasks/result's elicitation in a
// 2025-11-25 session); only a yes sends the call. A plain call (or a job)
// asks in its own request.

// confirmFor is how long the person's yes to a policy's question stands.
const confirmFor = 10 * time.Minute

// policyStateHead ends the head of a policy question's requestState.
const policyStateHead = "policy."

// policyInput is the id of the policy's question in inputRequests.
const policyInput = "policy-confirm"

// isPolicyState reports whether a requestState is a policy question's.
func (f *Pipeline) isPolicyState(state string) bool {
	head, _, _, ok := f.held.open(state)
	return ok && head == policyStateHead
}

// policyConfirm asks the person about c, or reads their answer from c's
// request: nil when the call may go on, else its answer.
func (f *Pipeline) policyConfirm(ctx context.Context, c *Call, pc *callPolicy, d policy.Decision) (*mcp.CallToolResult, error) {
	if c.task != nil {
		if caps, _ := declared(c.req.Session, c.req.Meta); !slices.Contains(caps, "elicitation") {
			pc.words[0] += ": the client cannot ask"
			return f.refuse(c, fmt.Sprintf(msgCannotConfirm, d.Rule)), nil
		}
		c.task.confirm = &agentproto.Message{Type: agentproto.TypeConfirm, Input: policyInput, Message: d.Message}
		c.task.confirmed = f.taskConfirmed(c, pc, d)
		return nil, nil
	}
	digest := confirmDigest(c)
	if state := c.req.RequestState; state != "" {
		head, id, keyID, ok := f.held.open(state)
		want, expiry, _ := strings.Cut(id, " ")
		exp, _ := strconv.ParseInt(expiry, 10, 64)
		if ok && head == policyStateHead && keyID == c.key.ID && want == digest && time.Now().Unix() < exp {
			yes, err := answer(c.req, policyInput)
			switch {
			case err != nil:
				pc.words[0] += ": no answer"
				return f.refuse(c, "The call was not run: "+err.Error()), nil
			case !yes:
				pc.words[0] += ": declined"
				return f.refuse(c, fmt.Sprintf(msgDeclined, d.Rule)), nil
			}
			pc.words[0] += ": confirmed"
			return nil, nil
		}
	}
	if caps, _ := declared(c.req.Session, c.req.Meta); !slices.Contains(caps, "elicitation") {
		pc.words[0] += ": the client cannot ask"
		return f.refuse(c, fmt.Sprintf(msgCannotConfirm, d.Rule)), nil
	}
	c.call.Release()
	id := digest + " " + strconv.FormatInt(time.Now().Add(confirmFor).Unix(), 10)
	q := &agentproto.Message{Input: policyInput, Message: d.Message}
	return &mcp.CallToolResult{InputRequests: question(q), RequestState: f.held.seal(policyStateHead, id, c.key.ID)}, nil
}

// taskConfirmed reads the answer to the policy's question of task-augmented
// call c (tasks.Spec.Confirmed): true sends the call; false, with the
// refusal its task ends with, logged as a plain call's refusal is.
func (f *Pipeline) taskConfirmed(c *Call, pc *callPolicy, d policy.Decision) func(map[string]json.RawMessage) (bool, string) {
	return func(responses map[string]json.RawMessage) (bool, string) {
		var (
			r   mcp.ElicitResult
			yes bool
			err = errNoAnswer
		)
		if raw, ok := responses[policyInput]; ok && json.Unmarshal(raw, &r) == nil {
			yes, err = confirmed(&r)
		}
		var msg string
		switch {
		case err != nil:
			pc.words[0] += ": no answer"
			msg = "The call was not run: " + err.Error()
		case !yes:
			pc.words[0] += ": declined"
			msg = fmt.Sprintf(msgDeclined, d.Rule)
		default:
			pc.words[0] += ": confirmed"
			return true, ""
		}
		f.logRefusal(c, msg)
		return false, msg
	}
}

const msgCannotConfirm = "This call needs the user's confirmation (rule %q of the project's policy), and the MCP client cannot ask the user: it does not support elicitation. Use a client that can, or ask an owner about the rule."

const msgDeclined = "The call was not run: the user did not confirm it (rule %q of the project's policy asks first)."

// confirmDigest binds a policy question to c's tool and validated
// arguments.
func confirmDigest(c *Call) string {
	h := sha256.New()
	h.Write([]byte(c.tool.Name))
	h.Write([]byte{0})
	h.Write(c.args)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// MayConfirm reports whether a rule of p could ask about a call of tool:
// such calls of a 2025 session go through go-sdk, which asks over the
// session (the early path cannot).
func MayConfirm(p *policy.Policy, tool string) bool {
	if !p.Has(policy.OnCall) {
		return false
	}
	for _, r := range p.Document().Rules {
		if r.On == policy.OnCall && r.Effect == policy.Confirm && r.Mode != policy.Audit && toolMatches(r.Tools, tool) {
			return true
		}
	}
	return false
}

// PolicyOnCalls reports whether the project's policy acts on calls or
// their results (rules on call or result, interceptors), or refuses every
// call (a policy that does not compile): rules on list alone do not.
func PolicyOnCalls(c *access.Controls) bool {
	p := c.Policy
	return c.PolicyErr != nil || p.Has(policy.OnCall) || p.Has(policy.OnResult) || (p != nil && len(p.Document().Interceptors) > 0)
}

// toolMatches reports whether a rule's tool globs take tool (as the
// policy package reads them: none means every tool).
func toolMatches(globs []string, tool string) bool {
	if len(globs) == 0 {
		return true
	}
	for _, g := range globs {
		if ok, _ := path.Match(g, tool); ok {
			return true
		}
	}
	return false
}
