package core

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spacefix/spacefix/core/internal/agentproto"
)

// JSON-RPC error codes for a [ProtocolError].
const (
	// CodeInvalidParams says the request's arguments were wrong in a way
	// the client must handle (at 2026-07-28 the answer is HTTP 400).
	CodeInvalidParams = agentproto.CodeInvalidParams
	// CodeInternalError says the server failed.
	CodeInternalError = agentproto.CodeInternalError
)

// ProtocolError, returned by a handler as its error (or wrapped in it:
// [errors.As] finds it), ends the call with a JSON-RPC error instead of a
// result: the MCP client's request fails with Code, Message and Data.
//
// Use it rarely. A tool's own failure — no such order, a service down — is
// an ordinary error (or a [ToolResult] with IsError): the model reads it
// and can try something else. A protocol error is for a request that was
// itself wrong in a way the client, not the model, must handle, and for a
// task that must end "failed" (at protocol 2026-07-28 a task whose tool
// returned an error result ends "completed"). Resource reads and prompts
// answer with a JSON-RPC error anyway; a ProtocolError chooses its code.
//
// The gateway passes [CodeInvalidParams], [CodeInternalError] and any
// application code outside the range JSON-RPC reserves (-32768 to -32000)
// as they are; any other code of that range, and 0, become
// CodeInternalError, the message kept.
type ProtocolError struct {
	// Code is the JSON-RPC error code.
	Code int
	// Message is what the client reads.
	Message string
	// Data, optional, is any value that marshals to JSON: details the
	// client may act on.
	Data any
}

func (e *ProtocolError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("JSON-RPC error %d", e.Code)
	}
	return e.Message
}

// failure is the error message a handler's err sends for call id: a
// protocol error's code, message and data when err is or wraps a
// [ProtocolError], else err's text.
func (a *Agent) failure(id string, err error) agentproto.Message {
	var pe *ProtocolError
	if !errors.As(err, &pe) || pe == nil {
		return errorMessage(id, err.Error())
	}
	m := errorMessage(id, pe.Error())
	m.Code = pe.Code
	if m.Code == 0 {
		m.Code = CodeInternalError // 0 is no code on the wire
	}
	if pe.Data != nil {
		data, jerr := json.Marshal(pe.Data)
		if jerr != nil {
			a.log.Warn("core: a protocol error's data does not marshal; sent without it", "call", id, "err", jerr)
		} else {
			m.Data = data
		}
	}
	return m
}
