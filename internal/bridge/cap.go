package bridge

import (
	"errors"
	"fmt"
	"mime"
	"net/http"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/egress"
)

// maxResponse bounds what the bridge reads of one response of a remote
// server (a JSON body, or one event of an SSE stream): the gateway's
// limit for a result, and room for the JSON-RPC envelope around it. A
// larger answer could never reach a client, and reading it whole would
// let a server fill the bridge's memory, at every retry.
const maxResponse = agentproto.MaxResultBytes + 64<<10

// errTooLarge ends the read of a response over maxResponse.
var errTooLarge = errors.New("the MCP server's response is over 4 MiB, the gateway's limit for a result; the bridge stopped reading it")

// errResultTooLarge is what the call's client reads when the server's
// answer was over the cap: the gateway's words for a result over its limit.
var errResultTooLarge = fmt.Errorf("Result is too large: the MCP server answered with more than 4 MiB (%s bytes), the limit. Ask for less, or page through it.",
	agentproto.Thousands(agentproto.MaxResultBytes))

// capBodies limits every response body that is not an event stream
// (whose events go-sdk bounds: MaxEventSize) to maxResponse bytes.
type capBodies struct{ base http.RoundTripper }

func (t capBodies) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		resp.Body = egress.CapBody(resp.Body, maxResponse, errTooLarge)
	}
	return resp, nil
}
