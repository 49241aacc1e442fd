package bridge

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// A stdio server's output is read line by line, however it is cut into
// reads, and a tools/list result's task support is kept by tool name; a
// later list without the field drops it.
func TestTaskSupportsFromStdio(t *testing.T) {
	var s taskSupports
	out := `{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"taskSupport"}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"report","execution":{"taskSupport":"optional"}},{"name":"export","execution":{"taskSupport":"required"}},{"name":"quick"},{"name":"odd","execution":{"taskSupport":"sometimes"}}]}}` + "\n"
	if _, err := io.Copy(io.Discard, s.tapReader(iotest.OneByteReader(strings.NewReader(out)))); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"report": true, "export": true, "quick": false, "odd": false, "nope": false} {
		if got := s.option(name) != nil; got != want {
			t.Errorf("%s: option %v, want %v", name, got, want)
		}
	}
	s.note([]byte(`data: {"jsonrpc":"2.0","id":3,"result":{"tools":[{"name":"report"},{"name":"x","execution":{"taskSupport":"optional"}}]}}`))
	if s.option("report") != nil || s.option("x") == nil {
		t.Errorf("after a second list: report %v, x %v; want none, then one", s.option("report"), s.option("x"))
	}
}
