package pipeline

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/recovery"
	"github.com/spacefix/spacefix/internal/route"
	"github.com/spacefix/spacefix/internal/schema"
	"github.com/spacefix/spacefix/internal/secrets"
	"github.com/spacefix/spacefix/internal/textfmt"
)

// Asking the user (core.Confirm): the agent's question becomes an MCP input
// request. Clients of 2026-07-28 get an input_required result and retry the
// call with the answer, the agent's call kept running meanwhile, held here
// between the two requests; a 2025 session's client is sent
// elicitation/create over the session while the call waits (confirmOver).
// Either way the answer reaches the agent as a "confirmed" message: a yes
// only for an accepted form whose confirm is true.

// errCannotAsk is what the agent reads when the client cannot ask the user.
var errCannotAsk = errors.New("the MCP client cannot ask the user: it does not support elicitation. Explain what you are about to do and ask the user in the conversation instead.")

// held is a call waiting for the user's answer between two requests.
type held struct {
	call   *route.Call
	input  string              // the question's id (confirm)
	asked  mcp.InputRequestMap // the input requests (ask); nil for confirm
	keyID  string
	name   string // what was called (heldName): a retry resumes it as that only
	start  time.Time
	expire *time.Timer
}

// heldCalls keeps calls that wait for an answer, until their deadline.
type heldCalls struct {
	prefix string       // starts every request state: Options.SessionPrefix
	box    *secrets.Box // seals request states: Options.Secrets
	log    *slog.Logger
	mu     sync.Mutex
	m      map[string]*held // by call id
}

func newHeldCalls(log *slog.Logger, prefix string, box *secrets.Box) *heldCalls {
	if box == nil {
		raw, _ := base64.StdEncoding.DecodeString(secrets.NewKey())
		box, _ = secrets.New(raw) // a key of the right size: no error
	}
	return &heldCalls{prefix: prefix, box: box, m: make(map[string]*held), log: log}
}

// hold keeps h until its call's deadline, then gives up on the call and
// passes how it ended to expired. It returns the request state to hand the
// client: sealed, so a client can neither read nor forge it.
func (hc *heldCalls) hold(h *held, expired func(*held, route.Result)) string {
	hc.mu.Lock()
	hc.m[h.call.ID()] = h
	hc.mu.Unlock()
	h.expire = time.AfterFunc(time.Until(h.call.Deadline()), func() {
		recovery.Do(hc.log, "expire a call waiting for the user", func() {
			if hc.take(h.call.ID(), "") != nil {
				expired(h, h.call.Abandon(agentproto.ReasonTimeout))
			}
		})
	})
	return hc.seal(hc.prefix, h.call.ID(), h.keyID)
}

// seal returns a request state naming id (a call's or a task's) for client
// key keyID: head in the clear (the gateway's prefix, which tells the
// gateways whose state it is, and what it names), then the sealed part, in
// base64url, whose alphabet has no ".". The head is bound to the sealed
// part, so a state given another gateway's prefix does not open.
func (hc *heldCalls) seal(head, id, keyID string) string {
	sealed := hc.box.Seal([]byte(id+"\n"+keyID), stateContext+head)
	return head + base64.RawURLEncoding.EncodeToString(sealed)
}

// stateContext is what request states are sealed under, before their head:
// the secret key file seals other things too, which never open as a state.
const stateContext = "mcp-request-state:"

// open returns what a state from seal holds, sealed by any gateway whose
// box shares a key with this one's (every gateway of a key file): its
// head, id and client key id; false if it does not open.
func (hc *heldCalls) open(state string) (head, id, keyID string, ok bool) {
	i := strings.LastIndexByte(state, '.')
	head = state[:i+1]
	sealed, err := base64.RawURLEncoding.DecodeString(state[i+1:])
	if err != nil {
		return "", "", "", false
	}
	plain, err := hc.box.Open(sealed, stateContext+head)
	if err != nil {
		return "", "", "", false
	}
	id, keyID, ok = strings.Cut(string(plain), "\n")
	return head, id, keyID, ok
}

// take removes and returns a held call made for name (heldName; "": for
// anything), or nil: one made for another is left held.
func (hc *heldCalls) take(callID, name string) *held {
	hc.mu.Lock()
	defer hc.mu.Unlock()
	h := hc.m[callID]
	if h == nil || name != "" && h.name != name {
		return nil
	}
	delete(hc.m, callID)
	if h.expire != nil {
		h.expire.Stop()
	}
	return h
}

var ErrBadState = errors.New("this requestState names no call waiting for input here: it ended or timed out, or the state was altered or is another client's. Call the tool again")

// heldName is what a held call was made for: a retry that names another
// tool (or a prompt) does not resume it, or the answer would be shaped by
// the other tool's rules on result.
func heldName(kind, name string) string { return kind + "/" + name }

// resume returns the held call a request state names, if keyID holds it
// and it was made for name (heldName).
// A state sealed by another gateway opens here too, but names no call held
// here: its requests reach the gateway that holds the call (see
// gateway.forwardSessions) while that gateway lives.
func (hc *heldCalls) resume(state, keyID, name string) (*held, error) {
	head, callID, owner, ok := hc.open(state)
	if !ok || strings.HasSuffix(head, taskStatePrefix) || owner != keyID {
		return nil, ErrBadState
	}
	h := hc.take(callID, name)
	if h == nil {
		return nil, ErrBadState
	}
	return h, nil
}

// question is the input request a client gets for the agent's question.
func question(q *agentproto.Message) mcp.InputRequestMap {
	return mcp.InputRequestMap{q.Input: &mcp.ElicitParams{
		Mode:    "form",
		Message: q.Message,
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"confirm": map[string]any{"type": "boolean", "title": "Confirm", "description": q.Message},
			},
			"required": []string{"confirm"},
		},
	}}
}

// errNoAnswer is what the agent reads when a retried call carries no answer
// to its question.
var errNoAnswer = errors.New("the client retried the call without an answer to the question")

// confirmSchema is the schema of every question's form (question's, less
// the words): what an accepted answer is checked against.
var confirmSchema = func() *schema.Schema {
	s, err := schema.Compile(json.RawMessage(`{"type":"object","properties":{"confirm":{"type":"boolean"}},"required":["confirm"]}`))
	if err != nil {
		panic(err)
	}
	return s
}()

// errBadAnswer is what the agent reads when the client's answer to its
// question is neither a yes nor a no: the call must not go on as if the
// user had said either. It says what was wrong.
func errBadAnswer(format string, args ...any) error {
	return fmt.Errorf("the MCP client cannot ask the user: "+format+". Explain what you are about to do and ask the user in the conversation instead.", args...)
}

// answer reads the user's answer to question input from a retried call; the
// error says why there is none.
func answer(req *Request, input string) (accepted bool, err error) {
	r, ok := req.InputResponses[input].(*mcp.ElicitResult)
	if !ok {
		return false, errNoAnswer
	}
	return confirmed(r)
}

// confirmed reads a client's answer to a question. Only an accepted form
// whose confirm is the boolean true is a yes; a decline or cancel is a no;
// anything else (no confirm, a string, a number, another action) is an
// error, never a guess.
func confirmed(r *mcp.ElicitResult) (bool, error) {
	switch r.Action {
	case "decline", "cancel":
		return false, nil
	case "accept":
	default:
		return false, errBadAnswer("its answer to the question has action %q, which is none of accept, decline and cancel", textfmt.Cut(r.Action, 40))
	}
	content := []byte("{}")
	if r.Content != nil {
		var err error
		if content, err = json.Marshal(r.Content); err != nil {
			return false, errBadAnswer("its answer to the question could not be read")
		}
	}
	if err := confirmSchema.Validate(content); err != nil {
		return false, errBadAnswer("its answer to the question is not a yes or no (%s)", textfmt.Cut(err.Error(), 200))
	}
	yes, _ := r.Content["confirm"].(bool) // a boolean: the schema says so
	return yes, nil
}

// confirmOver asks a 2025 session's client question q over the session
// and returns the user's answer, or, as an error the agent reads, why there
// is none. Asked here rather than by go-sdk (which turns an input_required
// result into elicitation/create and the handler's retry), whatever goes
// wrong reaches the agent as an answer, not as a call held to its deadline.
func confirmOver(ctx context.Context, ss Asker, q *agentproto.Message, deadline time.Time) (bool, error) {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	r, err := ss.Elicit(ctx, question(q)[q.Input].(*mcp.ElicitParams))
	if err != nil {
		return false, errBadAnswer("it did not answer the question: %s", textfmt.Cut(err.Error(), 300))
	}
	return confirmed(r)
}

// taskStatePrefix marks a requestState that names a task (see
// answerExtCall) rather than a held call (confirm.go): "." is not in
// the held states' alphabet.
const taskStatePrefix = "task."

// SealTaskState returns the requestState of task id for client key keyID:
// sealed, so a client can neither read nor forge it, and starting with the
// gateway's prefix so that the gateways sharing a store send its retry
// here (any of them can open it: see heldCalls.seal).
func (f *Pipeline) SealTaskState(id, keyID string) string {
	return f.held.seal(f.held.prefix+taskStatePrefix, id, keyID)
}

// OpenTaskState returns the task a requestState from SealTaskState names, if it was
// sealed for keyID.
func (f *Pipeline) OpenTaskState(state, keyID string) (string, bool) {
	head, id, owner, ok := f.held.open(state)
	if !ok || !strings.HasSuffix(head, taskStatePrefix) {
		return "", false
	}
	return id, owner == keyID
}
