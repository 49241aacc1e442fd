package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// StartDirect serves echo from a go-sdk MCP server on 127.0.0.1:0, with SSE
// responses like the gateway's endpoint, and with the tool registered raw
// (no schema validation, as go-sdk leaves that to raw tools). Like the
// gateway it serves both protocol eras on one URL: a request whose
// MCP-Protocol-Version is [StatelessVersion] or later goes to a stateless
// handler, every other to a stateful one.
func StartDirect() (*Target, error) {
	s := mcp.NewServer(&mcp.Implementation{Name: "direct", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{
		Name:        ToolName,
		Description: "Returns its text.",
		InputSchema: json.RawMessage(echoSchema),
	}, echoHandler)
	get := func(*http.Request) *mcp.Server { return s }
	stateful := mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{SessionTimeout: 30 * time.Minute})
	stateless := mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Protocol-Version") >= StatelessVersion {
			stateless.ServeHTTP(w, r)
			return
		}
		stateful.ServeHTTP(w, r)
	})

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("start direct server: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	labelled(context.Background(), SideDirect, func(context.Context) {
		go srv.Serve(ln)
	})
	return &Target{
		Name:     SideDirect,
		Endpoint: "http://" + ln.Addr().String() + "/mcp",
		stop: func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
				return err
			}
			srv.Close()
			return nil
		},
	}, nil
}

// echoHandler is what core does for a struct input and a string output:
// decode the arguments, return the text as a text content.
func echoHandler(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in EchoIn
	if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, nil
	}
	stampIn() // where core's typed handler starts: after decoding
	text := in.Text
	stampOut()
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil
}
