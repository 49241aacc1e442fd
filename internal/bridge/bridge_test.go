package bridge

import (
	"errors"
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// serverError finds the server's own JSON-RPC error behind go-sdk's
// transport rejection (-32005), which alone says the server never
// answered: a ping answered with an error shows a live server, a 401 does
// not.
func TestServerError(t *testing.T) {
	rejected := &jsonrpc.Error{Code: codeRejected, Message: "rejected by transport"}
	missing := &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities, Message: "sampling capability required"}
	for _, c := range []struct {
		name string
		err  error
		want *jsonrpc.Error
	}{
		{"none", nil, nil},
		{"plain", errors.New("EOF"), nil},
		{"the server's", fmt.Errorf(`calling "tools/call": %w`, missing), missing},
		{"the server's behind a rejection", fmt.Errorf(`sending "tools/call": %w: %w`, rejected, missing), missing},
		{"a rejection alone", fmt.Errorf(`sending "ping": %w: %w`, rejected, errors.New("sign-in needed")), nil},
	} {
		if got := serverError(c.err); got != c.want {
			t.Errorf("%s: serverError(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}
