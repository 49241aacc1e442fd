package store

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"time"
)

// Idempotency keeps the outcome of calls to tools that name a request-id
// argument (agentproto.Tool.IdempotencyKey), per (project, tool, id), for
// the project's window: the gateway answers a repeat from it, and the
// table's unique constraint decides which of two gateways that see the
// same id at once delivers it. The id itself is never stored, only its
// SHA-256 ([HashRequestID]).
type Idempotency interface {
	// ClaimRequest stores r (State [RequestRunning]) unless a record of
	// its (ProjectID, Tool, IDHash) exists whose ExpiresAt is after r's
	// CreatedAt: one statement, so of two claims at once exactly one
	// wins. It reports whether r was stored; if not, it returns the record
	// that stands.
	ClaimRequest(ctx context.Context, r Request) (stood Request, claimed bool, err error)
	// Request returns the record of (projectID, tool, idHash), expired or
	// not, or ErrNotFound.
	Request(ctx context.Context, projectID int64, tool string, idHash []byte) (Request, error)
	// ReclaimRequest replaces the record of r's (ProjectID, Tool, IDHash)
	// with r only while that record's CallID is prevCallID and its State is
	// [RequestUnknown] or [RequestRunning] past its Deadline (a gateway
	// that went away mid-call): the compare-and-set a retry after an
	// unknown outcome takes. It reports whether it applied.
	ReclaimRequest(ctx context.Context, r Request, prevCallID string) (bool, error)
	// FinishRequest sets the State, Result, Outcome, Reason, UpdatedAt and
	// ExpiresAt of the record of r's key, only while it is
	// [RequestRunning] under r.CallID. It reports whether it applied.
	FinishRequest(ctx context.Context, r Request) (bool, error)
	// ReleaseRequest deletes the record of r's key while it is
	// [RequestRunning] under r.CallID: the call never reached an agent
	// (no replica, or the tool went away), so a repeat starts afresh.
	ReleaseRequest(ctx context.Context, r Request) error
	// PruneRequests deletes the records whose ExpiresAt is before now and
	// returns how many went.
	PruneRequests(ctx context.Context, now time.Time) (int64, error)
}

// RequestState is where a request id's call stands.
type RequestState string

// The states of a request id.
const (
	// RequestRunning: a gateway delivered the call and waits for it.
	RequestRunning RequestState = "running"
	// RequestDone: the call ended with a result (success or isError),
	// which a repeat gets.
	RequestDone RequestState = "done"
	// RequestUnknown: the call timed out or its agent went away before a
	// result; a repeat is delivered again, marked as a retry.
	RequestUnknown RequestState = "unknown"
)

// Request is the record of one request id of a tool.
type Request struct {
	ProjectID int64
	Tool      string // exposed tool name
	IDHash    []byte // SHA-256 of the request id ([HashRequestID])
	ArgsHash  []byte // SHA-256 of the call's canonical arguments
	State     RequestState
	CallID    string // the id of the call that runs or ran it
	// Result is the CallToolResult, when Done.
	Result json.RawMessage
	// Outcome is the call log outcome of the call, when Done ("ok" or
	// "error").
	Outcome string
	// Reason, when Unknown, is why: "timeout" or "disconnected".
	Reason    string
	CreatedAt time.Time
	UpdatedAt time.Time
	// Deadline is when the running call's wait ends: a record still
	// running after it belongs to a gateway that went away, and counts as
	// Unknown.
	Deadline  time.Time
	ExpiresAt time.Time // pruned after
}

// Stale reports whether r is still running at now although its call's
// wait has ended (with a second of slack for the gateway to record the
// end): the gateway that ran it went away.
func (r Request) Stale(now time.Time) bool {
	return r.State == RequestRunning && now.After(r.Deadline.Add(staleSlack))
}

// staleSlack is how long after its deadline a running record's gateway
// has to record how the call ended before others call it stale.
const staleSlack = 2 * time.Second

// StaleBefore is the deadline before which a running record is stale at
// now (see [Request.Stale]): the stores compare with it.
func StaleBefore(now time.Time) time.Time { return now.Add(-staleSlack) }

// HashRequestID is the SHA-256 of a request id, as the store keeps it.
func HashRequestID(id string) []byte {
	h := sha256.Sum256([]byte(id))
	return h[:]
}

// RequestColumns are the columns of the idempotency table, in the order
// the stores read and write them.
const RequestColumns = `project_id, tool, id_hash, args_hash, state, call_id, result, outcome, reason,
created_at, updated_at, deadline, expires_at`

// Idempotency window bounds (ProjectSettings.IdempotencyWindowMs).
const (
	DefaultIdempotencyWindow = 24 * time.Hour
	MinIdempotencyWindow     = time.Hour
	MaxIdempotencyWindow     = 30 * 24 * time.Hour
)
