package interceptors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/spacefix/spacefix/internal/egress"
	"github.com/spacefix/spacefix/internal/policy"
)

// ServerStatus is what a chain found at one interceptor server, for the
// operator (the dashboard's Policy page, its API and the CLI).
type ServerStatus struct {
	Label string // [Label]: the entry's name, else its agent or its URL's host
	URL   string // the entry's, when the server is at a URL
	Agent string // the bridged agent the server is behind, else ""
	// Listed says the server answered interceptors/list at CheckedAt.
	Listed bool
	// CheckedAt is when the server was last listed or tried; zero: never.
	CheckedAt time.Time
	// Error says, to an operator, why the server could not be listed;
	// "" when it was listed or never tried. It carries no header value
	// of the entry.
	Error string
	// Interceptors are what the server offered, in its order, with mode
	// and failOpen as the chain applies them: audit when the interceptor
	// or its server's entry says audit, failOpen when either says so.
	Interceptors []Info
}

// Status reports what the chain knows of each server, in the policy's
// order. It first lists the servers an event would list now: one never
// listed, one whose bridged agent connected again since, and one that
// could not be listed more than retryAfter ago. So a page that asks shows
// what the next call would meet, and a server an operator has just fixed
// shows as listed without waiting for a call; a server that was listed is
// not asked again (neither would an event ask it). The servers are listed
// side by side, each within its entry's listing timeout, so Status waits
// at most about the longest of those.
func (c *Chain) Status(ctx context.Context) []ServerStatus {
	if c == nil {
		return nil
	}
	// A page closed while it waits must not leave a failure that refuses
	// the next calls: each listing is bounded by its timeout instead.
	ctx = context.WithoutCancel(ctx)
	out := make([]ServerStatus, len(c.servers))
	var wg sync.WaitGroup
	for i, s := range c.servers {
		wg.Go(func() {
			s.list(ctx, false) // its outcome is read below
			out[i] = s.status()
		})
	}
	wg.Wait()
	return out
}

// status is what s knows now.
func (s *server) status() ServerStatus {
	s.listMu.Lock()
	defer s.listMu.Unlock()
	st := ServerStatus{Label: s.label, URL: s.entry.URL, Agent: s.entry.Agent, Listed: s.listed, CheckedAt: s.lastTry}
	if s.entry.Agent != "" {
		st.URL = ""
	}
	if s.lastErr != nil && !s.listed {
		st.Error = scrub(s.problem(s.lastErr), s.entry.Headers)
	}
	if s.listed {
		st.Interceptors = make([]Info, len(s.infos))
		for i, in := range s.infos {
			if s.entry.Mode == policy.Audit {
				in.Mode = policy.Audit
			}
			in.FailOpen = in.FailOpen || s.entry.FailOpen
			in.Hook.Events = slices.Clone(in.Hook.Events)
			st.Interceptors[i] = in
		}
	}
	return st
}

// problem is why s could not be listed, as a sentence an operator can
// act on (the caller's refusal in run.go says less).
func (s *server) problem(err error) string {
	where := s.entry.URL
	if s.entry.Agent != "" {
		where = "the bridged agent " + s.entry.Agent
	}
	text := err.Error()
	// go-sdk reports a failed connection as a JSON-RPC error too
	// ("rejected by transport"): what the transport said comes first.
	var rpc *jsonrpc.Error
	switch {
	case errors.Is(err, ErrNotConnected):
		return fmt.Sprintf("The bridged agent %q is not connected, and the gateway reaches this server only through it: start spacefix bridge for it.", s.entry.Agent)
	case errors.Is(err, ErrNotBridged):
		return fmt.Sprintf("The agent %q is not a bridged MCP server; only an agent run by spacefix bridge can serve interceptors.", s.entry.Agent)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("It did not answer %s within %v.", MethodList, max(s.entry.TimeoutOf(), 5*time.Second))
	case egress.RefusalIn(err) != nil:
		return fmt.Sprintf("The gateway may not dial %s: %s.", where, egress.RefusalIn(err).Error())
	case strings.Contains(text, "connection refused"):
		return fmt.Sprintf("Nothing answers at %s (connection refused): check that the server runs there.", where)
	case strings.HasSuffix(text, "Unauthorized"), strings.HasSuffix(text, "Forbidden"):
		return fmt.Sprintf("%s refused the gateway (%s): check the token in the entry's headers.", where, text[strings.LastIndex(text, " ")+1:])
	case errors.As(err, &rpc) && rpc.Code == jsonrpc.CodeMethodNotFound:
		return fmt.Sprintf("It does not offer %s, so it is not an interceptor server (SEP-1763).", MethodList)
	case errors.As(err, &rpc) && !strings.Contains(text, "rejected by transport"):
		return fmt.Sprintf("It answered %s with an error: %s.", MethodList, strings.TrimSuffix(rpc.Message, "."))
	}
	return fmt.Sprintf("It could not be reached at %s: %s.", where, text)
}

// scrub masks the entry's header values in text, should an error ever
// carry one.
func scrub(text string, headers map[string]string) string {
	for _, v := range headers {
		if v = strings.TrimSpace(v); v != "" {
			text = strings.ReplaceAll(text, v, "••••••")
		}
	}
	return text
}
