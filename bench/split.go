package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// When the echo handler, of either target, last began and returned
// (UnixNano). Both handlers stamp them, so both pay the same; only
// [RunSplit] reads them, with one caller, so they belong to its call.
var handlerIn, handlerOut atomic.Int64

func stampIn()  { handlerIn.Store(time.Now().UnixNano()) }
func stampOut() { handlerOut.Store(time.Now().UnixNano()) }

// Split is the median of where one caller's tools/call spends its time.
type Split struct {
	Calls int
	// In is from the client starting CallTool to the echo handler's
	// start: the client, the server's HTTP, JSON-RPC and MCP layers, and
	// for the gateway its checks, validation and the WebSocket hop out.
	In time.Duration
	// Handler is the echo handler itself.
	Handler time.Duration
	// Out is from the handler's return to CallTool returning: the way
	// back, for the gateway the WebSocket hop back and the result's
	// decode and re-encode.
	Out time.Duration
}

// RunSplit makes calls sequential calls on cs and returns the medians of
// their legs. Clocks are in one process, so the legs add up.
func RunSplit(ctx context.Context, cs *mcp.ClientSession, calls int) (Split, error) {
	if calls <= 0 {
		return Split{}, errors.New("run split: calls must be positive")
	}
	in := make([]time.Duration, 0, calls)
	h := make([]time.Duration, 0, calls)
	out := make([]time.Duration, 0, calls)
	var err error
	labelled(ctx, SideClient, func(ctx context.Context) {
		params := &mcp.CallToolParams{Name: ToolName, Arguments: EchoIn{Text: Text}}
		for range calls {
			t0 := time.Now().UnixNano()
			var res *mcp.CallToolResult
			res, err = cs.CallTool(ctx, params)
			t3 := time.Now().UnixNano()
			if err == nil {
				err = check(res)
			}
			if err != nil {
				err = fmt.Errorf("tools/call: %w", err)
				return
			}
			t1, t2 := handlerIn.Load(), handlerOut.Load()
			if t1 < t0 || t2 < t1 || t3 < t2 {
				err = errors.New("run split: handler stamps out of order; is another caller running?")
				return
			}
			in = append(in, time.Duration(t1-t0))
			h = append(h, time.Duration(t2-t1))
			out = append(out, time.Duration(t3-t2))
		}
	})
	if err != nil {
		return Split{}, err
	}
	return Split{Calls: calls, In: median(in), Handler: median(h), Out: median(out)}, nil
}

func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return quantile(ds, 0.5)
}
