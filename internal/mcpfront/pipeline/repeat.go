package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/access"
	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/canonjson"
	"github.com/spacefix/spacefix/internal/route"
	"github.com/spacefix/spacefix/internal/store"
)

// Repeat-safe tools (docs/api.md, "Repeat-safe writes").
//
// A tool that names an idempotency key (agentproto.Tool.IdempotencyKey)
// has its request ids recorded in the store, per project, tool and
// SHA-256 of the caller and the id ([Pipeline.requestKey]), for the
// project's window: one caller's id is never another's. After the cache
// lookup (a cache hit is answered first) a call of such a tool claims its
// id with one INSERT whose unique key decides between gateways:
//
//   - claimed: the call is delivered; when it ends with a result (success
//     or isError) the record becomes done with that result; when it timed
//     out, was cancelled or lost its agent, unknown.
//   - done, same arguments: the stored result, no agent reached, logged as
//     a replay (not billed).
//   - running, same arguments: the call waits, up to its own wait, for the
//     run to end and gets its result (a replay too). A run of this gateway
//     wakes its waiters itself; a run of another gateway is polled.
//   - unknown (or running past its deadline: its gateway went away), same
//     arguments: claimed again by compare-and-set, and delivered marked as
//     a retry of the earlier call (agentproto.Message.RetryOf).
//   - other arguments: refused before any agent.
//
// A call that never reached an agent (no replica, the tool went away) or
// that the agent refused with a protocol error lets go of its id. The
// write that records a result is made off the answer's path: the first
// call pays one store write (the claim); waiters on this gateway read the
// result from memory meanwhile.
//
// A tool with task support that a client runs as a task or a job: the id
// is claimed when the job starts, and what the job's first answer was
// (its result, or its job reference) is what a repeat gets. A
// task-augmented request of such a tool is run as any task, without the
// record: its client holds the task id.

// Messages a model reads.
const (
	msgRepeatOther = "%s %q was already used for %s with other arguments."
	msgRepeatStore = "The gateway could not record request id %s %q; try again in a moment."
)

// repeatPoll bounds the polling of a record run by another gateway.
const (
	repeatPollMin = 20 * time.Millisecond
	repeatPollMax = 500 * time.Millisecond
)

// finishTimeout bounds the store write that records how a run ended.
const finishTimeout = 10 * time.Second

// repeats is what the front knows of the request ids it runs. Safe for
// concurrent use.
type repeats struct {
	st  store.Idempotency // nil: repeat-safety off
	log *slog.Logger

	mu     sync.Mutex
	byCall map[string]*repeatRun // runs of this gateway not yet ended, by call id
	byKey  map[string]*repeatRun // runs not yet recorded in the store, by recordKey
	writes sync.WaitGroup        // records being written; Close waits

	// done keeps, by recordKey, finished records a replay answered before
	// go-sdk has read: a done record never changes until it expires, so
	// the next replay of the id reads memory, not the store. Bounded by
	// maxDoneKept (emptied when full).
	doneMu sync.Mutex
	done   map[string]*doneRecord
}

// maxDoneKept bounds repeats.done.
const maxDoneKept = 4096

// doneRecord is a finished record as a replay answered early needs it.
type doneRecord struct {
	argsHash       []byte
	legacy, modern []byte // the result in each era's encoding
	out            *mcp.CallToolResult
	callID         string
	outcome        string
	expires        time.Time
}

// repeatRun is one delivery of a request id by this gateway.
type repeatRun struct {
	rec store.Request
	key string // recordKey
	// retryOf is the earlier call whose unknown outcome this run follows.
	retryOf string
	done    chan struct{} // closed when it ended; then out and outcome are set
	// out is the result a repeat gets (nil: none, the waiter claims
	// again); outcome its call log outcome.
	out     *mcp.CallToolResult
	outcome string
}

func newRepeats(st store.Idempotency, log *slog.Logger) *repeats {
	return &repeats{st: st, log: log, byCall: make(map[string]*repeatRun), byKey: make(map[string]*repeatRun), done: make(map[string]*doneRecord)}
}

func recordKey(projectID int64, tool string, idHash []byte) string {
	return fmt.Sprintf("%d/%s/%x", projectID, tool, idHash)
}

// requestKey is the one place that says whose request id is: the SHA-256
// the store keeps it under, of the caller and the id. The caller is the
// person for an OAuth call (any of their apps: their grants share their
// ids, as they share their tasks) and else the client key, so that the
// same id from two callers is two deliveries, and nobody replays, joins or
// learns of another's call. The error (errWho) is for the client.
func (f *Pipeline) requestKey(ctx context.Context, key store.Key, id string) ([]byte, error) {
	owner := "key:" + key.ID
	if key.OAuth {
		c, err := f.Caller(ctx, key, nil)
		if err != nil {
			return nil, err
		}
		owner = "person:" + c.Person.ID
	}
	return store.HashRequestID(owner + "\x00" + id), nil
}

// requestID returns the value of t's idempotency argument in args, the
// arguments as validated: a string, since the schema requires one.
func requestID(t *agents.Tool, args json.RawMessage) (string, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil {
		return "", false
	}
	var id string
	if json.Unmarshal(m[t.Def.IdempotencyKey], &id) != nil {
		return "", false
	}
	return id, true
}

// argsHash is the SHA-256 of the canonical form of args, so that the same
// arguments in another key order or spacing are the same.
func argsHash(args json.RawMessage) []byte {
	b, err := canonjson.Canonical(args)
	if err != nil {
		b = args
	}
	h := sha256.Sum256(b)
	return h[:]
}

// repeat runs the request-id check of a call of a repeat-safe tool,
// picked and not yet sent. It returns the answer when the call is not to
// be delivered (a replay, the refusal, a wait that ended), having released
// call; or nil when call is to be sent, with its id claimed (and marked a
// retry if it follows an unknown outcome). A nil answer with an error is
// the client's error (it left).
func (f *Pipeline) repeat(ctx context.Context, t *agents.Tool, key store.Key, c *access.Controls, args json.RawMessage, call *route.Call, start time.Time, pol *callPolicy) (*mcp.CallToolResult, error) {
	rs := f.repeats
	id, ok := requestID(t, args)
	if !ok || rs.st == nil {
		return nil, nil
	}
	if c == nil {
		c = f.controls.Get(ctx, key.ProjectID)
	}
	idHash, err := f.requestKey(ctx, key, id)
	if err != nil {
		call.Release()
		return ErrorResult(err.Error()), nil
	}
	window := c.Settings.IdempotencyWindow()
	rec := store.Request{
		ProjectID: key.ProjectID, Tool: t.Name, IDHash: idHash, ArgsHash: argsHash(args),
		State: store.RequestRunning, CallID: call.ID(), Deadline: call.Deadline(),
	}
	poll := repeatPollMin
	for {
		now := time.Now()
		rec.CreatedAt, rec.UpdatedAt, rec.ExpiresAt = now, now, now.Add(window)
		// A read first: a repeat, the common case of a known id, then
		// costs no write; a new id is claimed by the INSERT, which decides.
		stood, err := rs.st.Request(ctx, rec.ProjectID, rec.Tool, rec.IDHash)
		claimed := false
		if err != nil || !stood.ExpiresAt.After(now) {
			stood, claimed, err = rs.st.ClaimRequest(ctx, rec)
		}
		if err != nil {
			call.Release()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			f.log.Error("claim a request id", "tool", t.Name, "err", err)
			return ErrorResult(fmt.Sprintf(msgRepeatStore, t.Def.IdempotencyKey, id)), nil
		}
		if claimed {
			rs.begin(rec, "")
			return nil, nil
		}
		if !bytes.Equal(stood.ArgsHash, rec.ArgsHash) {
			call.Release()
			return ErrorResult(fmt.Sprintf(msgRepeatOther, t.Def.IdempotencyKey, id, t.Name)), nil
		}
		// This gateway's own run of the id, ended or not yet recorded.
		if run := rs.local(recordKey(rec.ProjectID, rec.Tool, rec.IDHash)); run != nil && run.rec.CallID == stood.CallID {
			select {
			case <-run.done:
				if run.out != nil {
					return f.replay(t, key, call, start, run.rec.CallID, run.out, run.outcome, pol), nil
				}
				continue // it let go of the id, or its outcome is unknown: claim again
			case <-ctx.Done():
				call.Release()
				return nil, ctx.Err()
			case <-time.After(time.Until(call.Deadline())):
				return f.replayTimeout(t, key, call, start, stood.CallID, pol), nil
			}
		}
		switch {
		case stood.State == store.RequestDone:
			out, err := DecodeResult(stood.Result)
			if err != nil {
				out = ErrorResult("The gateway could not read the recorded result of request id " + t.Def.IdempotencyKey + " " + fmt.Sprintf("%q", id) + ".")
			}
			return f.replay(t, key, call, start, stood.CallID, out, stood.Outcome, pol), nil
		case stood.State == store.RequestUnknown || stood.Stale(now):
			reason := stood.Reason
			if stood.State == store.RequestRunning {
				reason = agentproto.RetryDisconnected // its gateway went away
			}
			ok, err := rs.st.ReclaimRequest(ctx, rec, stood.CallID)
			if err != nil {
				call.Release()
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				f.log.Error("reclaim a request id", "tool", t.Name, "err", err)
				return ErrorResult(fmt.Sprintf(msgRepeatStore, t.Def.IdempotencyKey, id)), nil
			}
			if ok {
				call.MarkRetry(stood.CallID, reason)
				rs.begin(rec, stood.CallID)
				return nil, nil
			}
			continue // another repeat took it first
		}
		// Running on another gateway: poll the store.
		if !time.Now().Add(poll).Before(call.Deadline()) {
			return f.replayTimeout(t, key, call, start, stood.CallID, pol), nil
		}
		select {
		case <-ctx.Done():
			call.Release()
			return nil, ctx.Err()
		case <-time.After(poll):
		}
		poll = min(2*poll, repeatPollMax)
	}
}

// replay answers a repeat with out, the result of call of: no agent is
// reached; the call log shows a replay, not billed (under a policy, pol,
// once the policy stage has shaped the answer: [Pipeline.policyResult]).
func (f *Pipeline) replay(t *agents.Tool, key store.Key, call *route.Call, start time.Time, of string, out *mcp.CallToolResult, outcome string, pol *callPolicy) *mcp.CallToolResult {
	call.Release()
	errText := ""
	if out.IsError {
		errText = FirstText(out)
	}
	rec := store.Call{
		Time: start, ProjectID: key.ProjectID, Kind: agentproto.KindTool, Name: t.Name,
		KeyID: key.ID, Agent: t.AgentKey, Duration: time.Since(start), Outcome: outcome,
		Error: errText, CallID: call.ID(), Replay: true, RetryOf: of,
	}
	if pol != nil {
		pol.pending = &rec
	} else {
		f.calls.Add(rec)
	}
	return shareResult(out)
}

// replayTimeout answers a repeat whose wait ended while the first run of
// its id went on: a timeout, as the call's own would read.
func (f *Pipeline) replayTimeout(t *agents.Tool, key store.Key, call *route.Call, start time.Time, of string, pol *callPolicy) *mcp.CallToolResult {
	msg := fmt.Sprintf("Request for tool %q timed out after %dms", t.Name, call.Deadline().Sub(start).Milliseconds())
	return f.replay(t, key, call, start, of, ErrorResult(msg), store.OutcomeTimeout, pol)
}

// begin records rec as run by this gateway.
func (rs *repeats) begin(rec store.Request, retryOf string) {
	run := &repeatRun{rec: rec, retryOf: retryOf, key: recordKey(rec.ProjectID, rec.Tool, rec.IDHash), done: make(chan struct{})}
	rs.mu.Lock()
	rs.byCall[rec.CallID] = run
	rs.byKey[run.key] = run
	rs.mu.Unlock()
}

// moveCall makes the run of call id from, if this gateway runs one, the
// run of call id to: the call delivered again after its per-person remote
// refused the person's token (perperson.go). The record keeps the first
// call's id; the second call's wait ends no later than the first's.
func (rs *repeats) moveCall(from, to string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if run := rs.byCall[from]; run != nil {
		delete(rs.byCall, from)
		rs.byCall[to] = run
	}
}

// retryOf returns the call that the run of call id retries, if it is a
// retry this gateway runs.
func (rs *repeats) retryOf(callID string) string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if run := rs.byCall[callID]; run != nil {
		return run.retryOf
	}
	return ""
}

// local returns this gateway's run of a record key, if it has not been
// recorded in the store yet.
func (rs *repeats) local(key string) *repeatRun {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.byKey[key]
}

// end records how the run of call id ended, if this gateway runs one: res
// is how it ended, out what the client got (nil: an error, not a
// result), outcome its call log outcome. Waiters on this gateway are
// woken at once; the store is written in the background.
func (rs *repeats) end(callID string, res route.Result, out *mcp.CallToolResult, outcome string) {
	if rs == nil {
		return
	}
	rs.mu.Lock()
	run := rs.byCall[callID]
	delete(rs.byCall, callID)
	rs.mu.Unlock()
	if run == nil {
		return
	}
	r := run.rec
	r.UpdatedAt = time.Now()
	r.ExpiresAt = r.UpdatedAt.Add(r.ExpiresAt.Sub(r.CreatedAt))
	release := false
	switch {
	case !res.Reached() || res.Outcome == route.NotFound || res.Outcome == route.NoReplica || protocolError(res) != nil:
		release = true
	case res.Outcome == route.OK || res.Outcome == route.ToolError:
		r.State, r.Outcome = store.RequestDone, outcome
		run.out, run.outcome = shareResult(out), outcome
	case res.Outcome == route.Disconnected:
		r.State, r.Reason = store.RequestUnknown, agentproto.RetryDisconnected
	default: // TimedOut, Cancelled: the call ended before its result
		r.State, r.Reason = store.RequestUnknown, agentproto.RetryTimeout
	}
	close(run.done)
	rs.writes.Add(1)
	go func() {
		defer rs.writes.Done()
		defer func() {
			rs.mu.Lock()
			if rs.byKey[run.key] == run {
				delete(rs.byKey, run.key)
			}
			rs.mu.Unlock()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), finishTimeout)
		defer cancel()
		var err error
		if r.State == store.RequestDone {
			r.Result, err = json.Marshal(run.out)
		}
		switch {
		case err != nil:
			err = fmt.Errorf("encode the result: %w", err)
		case release:
			err = rs.st.ReleaseRequest(ctx, r)
		default:
			_, err = rs.st.FinishRequest(ctx, r)
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			// The record stays running until its deadline, and counts as
			// unknown after it: a repeat is delivered as a retry.
			rs.log.Warn("record how a call with a request id ended", "tool", r.Tool, "call", r.CallID, "err", err)
		}
	}()
}

// wait waits for the records being written.
func (rs *repeats) wait() {
	if rs != nil {
		rs.writes.Wait()
	}
}
