package wire

// This file is the one place that writes go-sdk v1.8.0's wire format by
// hand, for answers the early path sends instead of go-sdk (mcpfront/early.go): the
// result of a tools/call (content never null, the unexported result type
// and the server's identity at 2026-07-28, no HTML escaping), the JSON-RPC
// framing of results and notifications, and the SSE framing and headers of
// its Streamable HTTP answers. TestGoSDKWire compares each with what go-sdk
// itself writes for the same result, so an upgrade that changes any of it
// fails there, by name, before any client sees a difference.

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// EncodeResult is the JSON go-sdk writes as the result of a tools/call that
// returned r: content never null (unless input is required); at
// 2026-07-28 also the server's identity in _meta (unless r has one) and
// the result type. go-sdk encodes JSON-RPC messages without escaping HTML;
// the result's own MarshalJSON does escape it.
func EncodeResult(r *mcp.CallToolResult, modern bool, impl *mcp.Implementation) ([]byte, error) {
	c := new(mcp.CallToolResult)
	inputRequired := modern && r.InputRequests != nil
	if modern {
		// The result type is not exported: copied from a result go-sdk's
		// own decoding set it in.
		if inputRequired {
			*c = resultTypes.inputRequired
		} else {
			*c = resultTypes.complete
		}
	}
	c.Meta, c.Content, c.StructuredContent, c.IsError = r.Meta, r.Content, r.StructuredContent, r.IsError
	c.InputRequests, c.RequestState = r.InputRequests, r.RequestState
	if c.Content == nil && !inputRequired {
		c.Content = []mcp.Content{}
	}
	if modern {
		if _, ok := r.Meta[mcp.MetaKeyServerInfo]; !ok {
			c.Meta = maps.Clone(r.Meta)
			if c.Meta == nil {
				c.Meta = mcp.Meta{}
			}
			c.Meta[mcp.MetaKeyServerInfo] = impl
		}
	}
	return MarshalPlain(c)
}

// resultTypes are empty results whose (unexported) result type go-sdk's
// decoding set, once: decoding one per call costs a 32 KiB buffer.
var resultTypes = func() (rt struct{ complete, inputRequired mcp.CallToolResult }) {
	if err := json.Unmarshal([]byte(`{"resultType":"complete"}`), &rt.complete); err != nil {
		panic(err)
	}
	if err := json.Unmarshal([]byte(`{"resultType":"input_required"}`), &rt.inputRequired); err != nil {
		panic(err)
	}
	return rt
}()

// MarshalPlain is json.Marshal without escaping HTML, as go-sdk encodes
// JSON-RPC messages.
func MarshalPlain(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// Notification is the JSON-RPC Notification of method with params, as
// go-sdk encodes it (no HTML escaping).
func Notification(method string, params any) ([]byte, error) {
	raw, err := MarshalPlain(params)
	if err != nil {
		return nil, err
	}
	return jsonrpc.EncodeMessage(&jsonrpc.Request{Method: method, Params: raw})
}

// IDValue is a plain id (see plainID) as JSON-RPC decodes it.
func IDValue(id []byte) any {
	if id[0] == '"' {
		return string(id[1 : len(id)-1])
	}
	n, _ := strconv.ParseFloat(string(id), 64)
	return n
}

// ResultMessage is the JSON-RPC response of request id with result.
func ResultMessage(id, result []byte) []byte {
	b := make([]byte, 0, len(`{"jsonrpc":"2.0","id":,"result":}`)+len(id)+len(result))
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"result":`...)
	b = append(b, result...)
	return append(b, '}')
}

// SSEHeaders sets the headers go-sdk's Streamable HTTP handler sends with
// an answer of content type ct ("text/event-stream", or
// "application/json" for a 2026-07-28 protocol error).
func SSEHeaders(h http.Header, ct string) {
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("Content-Type", ct)
	h.Set("Connection", "keep-alive")
}

// SSEEvent frames msg as go-sdk frames each message of a response stream.
func SSEEvent(msg []byte) []byte {
	b := make([]byte, 0, len("event: message\ndata: \n\n")+len(msg))
	b = append(b, "event: message\ndata: "...)
	b = append(b, msg...)
	return append(b, "\n\n"...)
}

// WriteCallAnswer writes a tool handler's answer as go-sdk would: a result (its
// result type set, content never null) as an SSE event, a JSON-RPC error as
// an SSE event too, or, at 2026-07-28, as a plain JSON body with the HTTP
// status the protocol gives its code. impl names the server (a 2026-07-28
// result's serverInfo); an error encoding the answer goes to log, and
// nothing is written then.
func WriteCallAnswer(out *SSEStream, id []byte, res *mcp.CallToolResult, err error, modern bool, impl *mcp.Implementation, log *slog.Logger) {
	if err == nil && res != nil && res.InputRequests != nil && (len(res.Content) > 0 || res.StructuredContent != nil) {
		err = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "server bug: result has both content and inputRequests"}
	}
	if err == nil {
		b, encErr := EncodeResult(res, modern, impl)
		if encErr == nil {
			out.Event(ResultMessage(id, b))
			return
		}
		err = encErr
	}
	jid, _ := jsonrpc.MakeID(IDValue(id))
	data, encErr := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: jid, Error: err})
	if encErr != nil {
		log.Error("encode a tools/call error", "err", encErr)
		return
	}
	status := 0
	var jerr *jsonrpc.Error
	if modern && errors.As(err, &jerr) {
		switch jerr.Code {
		case jsonrpc.CodeMethodNotFound:
			status = http.StatusNotFound
		case jsonrpc.CodeInvalidParams, mcp.CodeUnsupportedProtocolVersion, mcp.CodeMissingRequiredClientCapabilities:
			status = http.StatusBadRequest
		}
	}
	if status == 0 {
		out.Event(data)
		return
	}
	out.Plain(status, data)
}
