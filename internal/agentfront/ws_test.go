package agentfront

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/coder/websocket"

	"github.com/spacefix/spacefix/internal/route"
)

// How an agent's connection ended, as the log says it.
func TestAgentFrontCloseReason(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, "closed"},
		{fmt.Errorf("%w (gateway shutting down)", route.ErrGoodbye), "the gateway said goodbye (gateway shutting down)"},
		{context.Canceled, "gateway shutting down"},
		{websocket.CloseError{Code: websocket.StatusNormalClosure}, "the agent closed the connection"},
		{websocket.CloseError{Code: websocket.StatusGoingAway}, "the agent is stopping"},
		{websocket.CloseError{Code: websocket.StatusPolicyViolation}, "closed by the agent with status 1008"},
		{fmt.Errorf("failed to get reader: failed to read frame header: %w", io.EOF), "the connection dropped without a goodbye"},
		{errors.New("read tcp: connection reset by peer"), "connection lost: read tcp: connection reset by peer"},
	} {
		if got := closeReason(c.err); got != c.want {
			t.Errorf("closeReason(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
