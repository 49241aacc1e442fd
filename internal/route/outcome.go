package route

import (
	"fmt"
	"time"
)

// Outcome is how a call ended, from the gateway's side: exactly one value,
// whatever order the events came in. [Result] holds its detail.
type Outcome int

const (
	// Running: the call is not over (picked, sent, or waiting for the
	// user's answer to a question).
	Running Outcome = iota
	// OK: the agent answered with a result (Result.Result).
	OK
	// ToolError: the agent's handler failed, or its result was over the
	// limit; Result.Detail is the message.
	ToolError
	// TimedOut: the wait expired first; Result.Detail words it.
	TimedOut
	// Cancelled: the caller gave up first.
	Cancelled
	// Disconnected: the replica's connection ended before the result;
	// Result.Detail words it.
	Disconnected
	// NoReplica: the target is offered, but no replica could take the call
	// in time; Result.Detail words it.
	NoReplica
	// NotFound: the target is not offered (any more).
	NotFound
)

// String names the outcome as traces record it ("spacefix.outcome").
func (o Outcome) String() string {
	switch o {
	case Running:
		return "running"
	case OK:
		return "ok"
	case ToolError:
		return "error"
	case TimedOut:
		return "timeout"
	case Cancelled:
		return "cancelled"
	case Disconnected:
		return "disconnected"
	case NoReplica:
		return "no_replica"
	case NotFound:
		return "not_found"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// MsgDisconnected is the detail of a [Disconnected] call.
const MsgDisconnected = "Agent disconnected before returning a result."

// timedOut words a [TimedOut] call to what the client knows as exposed.
func timedOut(kind, exposed string, wait time.Duration) string {
	return fmt.Sprintf("Request for %s %q timed out after %dms", kind, exposed, wait.Milliseconds())
}

// noReplica words a [NoReplica] call.
func noReplica(exposed string) string {
	return fmt.Sprintf("No replica of the agent that offers %q can take calls right now. Try again in a few seconds.", exposed)
}
