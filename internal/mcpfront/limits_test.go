package mcpfront

import (
	"testing"
)

func TestArgsHelpers(t *testing.T) {
	ids := map[string]string{
		`{"jsonrpc":"2.0","id":7,"method":"initialize"}`:         "7",
		`{"jsonrpc":"2.0","id":"a\"b","method":"tools/call"}`:    `"a\"b"`,
		`{"method":"initialize","params":{"x":1},"id":3}`:        "null", // id after the params: not looked for
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`: "null",
		`not json`: "null",
		`{"jsonrpc":"2.0","id":12345678901234567890,"method":"ping","params":{}}`: "12345678901234567890",
	}
	for body, want := range ids {
		if got := string(callID([]byte(body))); got != want {
			t.Errorf("callID(%s) = %s, want %s", body, got, want)
		}
	}
	if got := bodyLimit(1 << 20); got != 4<<20 {
		t.Errorf("bodyLimit(1 MiB) = %d, want go-sdk's 4 MiB", got)
	}
	if got := bodyLimit(8 << 20); got != 9<<20 {
		t.Errorf("bodyLimit(8 MiB) = %d, want 9 MiB", got)
	}
}
