// Command hostilechild is a stdio MCP server, written with go-sdk, that
// misbehaves on cue for the bridge's hardening tests: it shows the
// environment it was given, starts grandchildren that outlive it (as npx
// and uvx start the real server), floods its stderr, and exits.
//
// Run as "hostilechild grandchild PIDFILE [ignore-term]" it is the
// grandchild: it writes its pid to PIDFILE and sleeps until killed.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type spawnIn struct {
	PIDFile    string `json:"pidFile"`
	IgnoreTerm bool   `json:"ignoreTerm"`
}

type floodIn struct {
	Lines int `json:"lines"`
}

func main() {
	if len(os.Args) > 2 && os.Args[1] == "grandchild" {
		grandchild(os.Args[2], len(os.Args) > 3 && os.Args[3] == "ignore-term")
		return
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "hostile-child", Version: "0.0.1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "env", Description: "The environment this process got, sorted, one KEY=value a line."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
			env := os.Environ()
			sort.Strings(env)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(env, "\n")}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "spawn", Description: "Start a grandchild that writes its pid to pidFile and sleeps."},
		func(ctx context.Context, req *mcp.CallToolRequest, in spawnIn) (*mcp.CallToolResult, any, error) {
			args := []string{"grandchild", in.PIDFile}
			if in.IgnoreTerm {
				args = append(args, "ignore-term")
			}
			cmd := exec.Command(os.Args[0], args...)
			cmd.Stderr = os.Stderr // as npx's child: it holds the bridge's stderr pipe
			if err := cmd.Start(); err != nil {
				return nil, nil, err
			}
			// Answer once the grandchild has written its pid.
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if b, err := os.ReadFile(in.PIDFile); err == nil && strings.HasSuffix(string(b), "\n") {
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.TrimSpace(string(b))}}}, nil, nil
				}
			}
			return nil, nil, fmt.Errorf("the grandchild wrote no pid to %s", in.PIDFile)
		})
	mcp.AddTool(s, &mcp.Tool{Name: "flood", Description: "Write that many short lines to stderr, then \"flood done\"."},
		func(ctx context.Context, req *mcp.CallToolRequest, in floodIn) (*mcp.CallToolResult, any, error) {
			chunk := []byte(strings.Repeat("spam\n", 1000))
			for i := 0; i < in.Lines; i += 1000 {
				os.Stderr.Write(chunk)
			}
			fmt.Fprintln(os.Stderr, "flood done")
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "flooded"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "exit", Description: "Exit at once, leaving the grandchildren."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
			os.Exit(3)
			return nil, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "pid", Description: "This process's id."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(os.Getpid())}}}, nil, nil
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Print(err)
	}
}

func grandchild(pidFile string, ignoreTerm bool) {
	if ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
	}
	if err := os.WriteFile(pidFile, []byte(fmt.Sprintln(os.Getpid())), 0o600); err != nil {
		log.Fatal(err)
	}
	fmt.Fprintln(os.Stderr, "grandchild running")
	select {}
}
