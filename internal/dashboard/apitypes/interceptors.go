package apitypes

import (
	"fmt"
	"strconv"
	"time"
)

// PolicyInterceptors is the answer of GET …/policy/interceptors: the
// interceptor servers of the project's saved policy, in its order, as the
// gateway that answers found them (each gateway lists them on its own).
// Version is the saved policy's version (0: none saved).
type PolicyInterceptors struct {
	Version int64               `json:"version"`
	Servers []InterceptorServer `json:"servers"`
}

// States of an interceptor server, as [InterceptorServer.State] says.
const (
	InterceptorsListed      = "listed"         // it answered interceptors/list
	InterceptorsUnreachable = "unreachable"    // it could not be listed: Error says why
	InterceptorsNotListed   = "not listed yet" // this gateway has not asked it yet
)

// InterceptorServer is one interceptor server of a policy. Name is the
// entry's name, else its agent, else its URL's host (as refusals and the
// call log name it); URL or Agent says where it is.
// CheckedAt is when it was last listed or tried (null: never); Error, when
// State is unreachable, says why in a sentence for the operator. The
// entry's header values never appear.
type InterceptorServer struct {
	Name         string            `json:"name"`
	URL          string            `json:"url,omitempty"`
	Agent        string            `json:"agent,omitempty"`
	State        string            `json:"state"`
	CheckedAt    *time.Time        `json:"checkedAt"`
	Error        string            `json:"error"`
	Interceptors []InterceptorInfo `json:"interceptors"`
}

// InterceptorInfo is one interceptor a server offers: its type
// ("validation" or "mutation"), the events and phase ("request",
// "response" or "both") it hooks, its priority hint per phase when it
// gives one, and Mode ("enforce" or "audit") and FailOpen as the gateway
// applies them (audit when the interceptor or its server's entry says
// audit; failOpen likewise).
type InterceptorInfo struct {
	Name         string               `json:"name"`
	Type         string               `json:"type"`
	Hooks        []InterceptorHook    `json:"hooks"`
	PriorityHint *InterceptorPriority `json:"priorityHint,omitempty"`
	Mode         string               `json:"mode"`
	FailOpen     bool                 `json:"failOpen"`
}

// InterceptorHook is one event an interceptor hooks, in one phase.
type InterceptorHook struct {
	Event string `json:"event"`
	Phase string `json:"phase"`
}

// InterceptorPriority is an interceptor's priority hint in each phase
// (lower runs first; a phase it gives none for is left out).
type InterceptorPriority struct {
	Request  int `json:"request,omitempty"`
	Response int `json:"response,omitempty"`
}

// String is the hint as the Policy page and the CLI show it: one number
// for both phases, else each phase's.
func (p InterceptorPriority) String() string {
	switch {
	case p.Request == p.Response:
		return strconv.Itoa(p.Request)
	case p.Request == 0:
		return fmt.Sprintf("response %d", p.Response)
	case p.Response == 0:
		return fmt.Sprintf("request %d", p.Request)
	}
	return fmt.Sprintf("request %d, response %d", p.Request, p.Response)
}
