package mcpfront

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/mcpfront/pipeline"
	"github.com/spacefix/spacefix/internal/mcpfront/wire"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/textfmt"
)

// Messages a client reads when a limit refuses its request.
const (
	msgTooManyInFlight = "This client key has %d requests in flight, the most the gateway serves at once for one key. Wait for some answers before sending more."
	msgTooManySessions = "This client key has %d MCP sessions open, all of them busy, the most the gateway keeps for one key. Close the sessions you no longer use (DELETE /mcp with their Mcp-Session-Id) and try again."
	msgBodyOverLimit   = "The request is over %s bytes, the most this gateway takes here, because tool arguments are limited to %s bytes (project setting \"Largest arguments\"). Send smaller arguments."
	msgBodyTooLarge    = "The request is %s bytes; this gateway takes requests up to %s bytes here, because tool arguments are limited to %s bytes (project setting \"Largest arguments\"). Send smaller arguments."
	msgArgsTooLarge    = "Arguments for tool %s are %s bytes; the limit is %s bytes (project setting \"Largest arguments\"). Send smaller arguments, or ask the project's admin to raise the limit."
)

// envelopeBytes is what a request may carry besides its arguments.
const envelopeBytes = 1 << 20

// bodyLimit is the largest request body taken for a project whose arguments
// are limited to argLimit bytes. It never goes below go-sdk's default, so a
// call whose arguments are over the limit is read once and told by how much.
func bodyLimit(argLimit int) int64 {
	return max(int64(argLimit)+envelopeBytes, mcp.DefaultMaxRequestBodyBytes)
}

// limitBody caps the request body by the project's largest arguments, reads
// and decodes it (readRequest), and refuses a call whose arguments are over
// them. It returns nil when it answered the request.
func (f *Front) limitBody(w http.ResponseWriter, r *http.Request, k store.Key) *wire.Request {
	argLimit := f.controls.Get(r.Context(), k.ProjectID).Settings.ArgumentLimit()
	limit := bodyLimit(argLimit)
	if r.ContentLength > limit {
		refuse(w, http.StatusRequestEntityTooLarge, fmt.Sprintf(msgBodyTooLarge, textfmt.Thousands(r.ContentLength), textfmt.Thousands(limit), textfmt.Thousands(int64(argLimit))))
		return nil
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	req := wire.Read(r)
	if f.refuseLargeArgs(w, r, req, argLimit) {
		return nil
	}
	return req
}

// refuseLargeArgs answers a request whose body could not be read, or a
// tools/call whose arguments are over the project's limit, and returns
// true. go-sdk, which parses a request several times over (some 20 times
// its size in allocations), never sees such a request.
func (f *Front) refuseLargeArgs(w http.ResponseWriter, r *http.Request, req *wire.Request, argLimit int) bool {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(req.Err, &mbe):
		refuse(w, http.StatusRequestEntityTooLarge, fmt.Sprintf(msgBodyOverLimit, textfmt.Thousands(mbe.Limit), textfmt.Thousands(int64(argLimit))))
		return true
	case req.Err != nil:
		refuse(w, http.StatusBadRequest, "The gateway could not read the request body: "+req.Err.Error())
		return true
	case len(req.Body) <= argLimit || req.Method != "tools/call" || len(req.Args) <= argLimit:
		return false
	}
	status := http.StatusOK
	if f.isModern(r, req) {
		status = http.StatusBadRequest // what 2026-07-28 answers for invalid params
	}
	name, _ := wire.JSONString(req.Name)
	refuseCall(w, status, req.CallID(), jsonrpc.CodeInvalidParams, fmt.Sprintf(msgArgsTooLarge,
		pipeline.TrimName(name), textfmt.Thousands(int64(len(req.Args))), textfmt.Thousands(int64(argLimit))))
	return true
}

// codeLimit is the JSON-RPC error code of requests a gateway limit refused.
const codeLimit = -32000

// refuse answers a request a limit refused, with a JSON-RPC error whose
// message says what to do.
func refuse(w http.ResponseWriter, status int, msg string) {
	refuseCall(w, status, json.RawMessage("null"), codeLimit, msg)
}

func refuseCall(w http.ResponseWriter, status int, id json.RawMessage, code int, msg string) {
	b, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": id,
		"error": map[string]any{"code": code, "message": msg},
	})
	w.Header().Set("Content-Type", "application/json")
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(status)
	w.Write(b)
}
