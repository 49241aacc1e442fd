// Package quickstart makes the client command lines that `spacefix serve`
// prints at first start and the dashboard's Overview page shows, so that both
// print the same lines and one end-to-end test (e2e/firsthour_test.go) can run
// them as printed.
package quickstart

import "fmt"

// Inspector is the MCP Inspector release the printed lines pin. An unpinned
// `npx @modelcontextprotocol/inspector` on Node.js 20 resolves to an old
// release without --header, because every newer one declares Node.js 22 in its
// engines field; this one runs on Node.js 20 all the same (the end-to-end test
// runs it there). Keep it equal to e2e/clients/package.json.
const Inspector = "@modelcontextprotocol/inspector@2.12.0"

// ClaudeAdd is the command that adds the gateway to Claude Code under name.
func ClaudeAdd(name, mcpURL, auth string) string {
	return fmt.Sprintf("claude mcp add --transport http %s %s --header \"Authorization: %s\"", name, mcpURL, auth)
}

// InspectorList is the MCP Inspector command that lists the tools a key sees.
func InspectorList(mcpURL, auth string) string {
	return inspector(mcpURL, auth) + " --method tools/list"
}

// InspectorCall is the MCP Inspector command that calls the example agent's
// get_order. The id is quoted as a JSON string: the Inspector parses a bare
// 1042 as a number, which the tool's schema refuses.
func InspectorCall(mcpURL, auth string) string {
	return inspector(mcpURL, auth) + ` --method tools/call --tool-name get_order --tool-arg 'id="1042"'`
}

func inspector(mcpURL, auth string) string {
	return fmt.Sprintf("npx -y %s --cli %s --transport http --header \"Authorization: %s\"", Inspector, mcpURL, auth)
}
