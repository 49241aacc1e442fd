// Command bridgeserver is a small stdio MCP server, written with go-sdk,
// that the bridge's end-to-end tests run behind spacefix bridge for what
// the reference servers cannot be asked to do on cue: exit, hang, change
// its tool list, notice a cancellation. It writes what happens to stderr,
// which the bridge logs with the server's name.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type nameIn struct {
	Name string `json:"name"`
}

type sleepIn struct {
	Ms int `json:"ms"`
}

type textIn struct {
	Text string `json:"text"`
}

func main() {
	s := mcp.NewServer(&mcp.Implementation{Name: "bridge-fixture", Version: "0.0.7"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo the text."},
		func(ctx context.Context, req *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "pid", Description: "This process's id."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(os.Getpid())}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "secret", Description: "Whether FIXTURE_SECRET is set."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(len(os.Getenv("FIXTURE_SECRET")))}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "wait", Description: "Wait until cancelled."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
			fmt.Fprintln(os.Stderr, "wait started")
			<-ctx.Done()
			fmt.Fprintln(os.Stderr, "wait cancelled")
			return nil, nil, ctx.Err()
		})
	mcp.AddTool(s, &mcp.Tool{Name: "sleep", Description: "Sleep ms milliseconds, then answer."},
		func(ctx context.Context, req *mcp.CallToolRequest, in sleepIn) (*mcp.CallToolResult, any, error) {
			select {
			case <-time.After(time.Duration(in.Ms) * time.Millisecond):
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "slept"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Exit at once."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
			fmt.Fprintln(os.Stderr, "crashing on purpose")
			os.Exit(3)
			return nil, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "hang", Description: "Stop answering anything (SIGSTOP)."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
			fmt.Fprintln(os.Stderr, "hanging on purpose")
			syscall.Kill(os.Getpid(), syscall.SIGSTOP)
			select {} // never answer, even if continued

		})
	mcp.AddTool(s, &mcp.Tool{Name: "add_tool", Description: "Add a tool of that name."},
		func(ctx context.Context, req *mcp.CallToolRequest, in nameIn) (*mcp.CallToolResult, any, error) {
			name := in.Name
			mcp.AddTool(s, &mcp.Tool{Name: name, Description: "Added at run time."},
				func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "I am " + name}}}, nil, nil
				})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "added " + name}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "remove_tool", Description: "Remove the tool of that name."},
		func(ctx context.Context, req *mcp.CallToolRequest, in nameIn) (*mcp.CallToolResult, any, error) {
			s.RemoveTools(in.Name)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "removed " + in.Name}}}, nil, nil
		})
	// Names the gateway refuses: the bridge reports them and registers the rest.
	for _, name := range []string{"bad.name", "__reserved"} {
		mcp.AddTool(s, &mcp.Tool{Name: name, Description: "Refused by the gateway."},
			func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{}, nil, nil
			})
	}
	s.AddPrompt(&mcp.Prompt{Name: "greet", Description: "Greet someone.", Arguments: []*mcp.PromptArgument{{Name: "who", Required: true}}},
		func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "Say hello to " + req.Params.Arguments["who"]}}}}, nil
		})
	s.AddResource(&mcp.Resource{URI: "fixture://readme", Name: "readme", MIMEType: "text/markdown"},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "fixture://readme", MIMEType: "text/markdown", Text: "# Fixture"}}}, nil
		})
	fmt.Fprintln(os.Stderr, "fixture ready")
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Print(err)
	}
}
