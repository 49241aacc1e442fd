package core

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/spacefix/spacefix/core/internal/agentproto"
)

// ErrCannotConfirm is returned by [Confirm] when the MCP client cannot ask
// its user (it does not support elicitation). The error's text says what the
// model should do instead; a handler can return it as is.
var ErrCannotConfirm = errors.New("the MCP client cannot ask the user")

// Confirm asks the user of the MCP client a yes/no question about the call
// the handler holding ctx is serving — "Delete order 1042?" — and returns
// their answer. Use it before a destructive action.
//
// The gateway asks through MCP elicitation: an elicitation/create request on
// 2025-era sessions, an input request on 2026-07-28. The question counts
// against the call's wait, so keep the wait long enough for a person to
// answer (see [Timeout]). Confirm returns false with no error when the user
// declines or dismisses the question; an error wrapping [ErrCannotConfirm]
// when the client cannot ask, or answers with anything but a yes or a no
// (the gateway never takes a malformed answer as a yes); ctx's error when
// the call ends first.
func Confirm(ctx context.Context, question string) (bool, error) {
	c, ok := ctx.Value(callKey{}).(*call)
	if !ok {
		return false, errors.New("core: Confirm is for use inside a tool handler, with its ctx")
	}
	c.mu.Lock()
	c.inputs++
	input := "confirm-" + strconv.Itoa(c.inputs)
	c.mu.Unlock()
	err := c.sess.send(agentproto.Message{Type: agentproto.TypeConfirm, ID: c.info.ID, Input: input, Message: question})
	if err != nil {
		return false, fmt.Errorf("core: confirm: %w", err)
	}
	for {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case m := <-c.confirmed:
			if m.Input != input {
				continue // an answer to an earlier question that gave up
			}
			if m.Accepted == nil {
				return false, fmt.Errorf("%w: %s", ErrCannotConfirm, trimCannot(m.Message))
			}
			return *m.Accepted, nil
		}
	}
}

// trimCannot drops the gateway's repeat of ErrCannotConfirm's words.
func trimCannot(msg string) string {
	const prefix = "the MCP client cannot ask the user: "
	if len(msg) > len(prefix) && msg[:len(prefix)] == prefix {
		return msg[len(prefix):]
	}
	return msg
}
