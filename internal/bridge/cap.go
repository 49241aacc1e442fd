package bridge

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/spacefix/spacefix/internal/agentproto"
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
		resp.Body = &cappedBody{rc: resp.Body, left: maxResponse}
	}
	return resp, nil
}

// cappedBody reads up to left bytes, then fails with errTooLarge.
type cappedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more says whether the body ends at the cap.
		var one [1]byte
		if n, err := b.rc.Read(one[:]); n == 0 && err != nil {
			return 0, err
		}
		return 0, errTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *cappedBody) Close() error { return b.rc.Close() }
