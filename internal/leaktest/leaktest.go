// Package leaktest fails a server package's tests when goroutines outlive
// them: a gateway, session or connection that a test closed must leave
// nothing running. Call Main from TestMain.
package leaktest

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// ignored are goroutines that are not ours to stop, one reason each.
var ignored = []goleak.Option{
	// Keep-alive connections of http.DefaultClient and test clients: the
	// transport closes them when idle long enough, not when a test ends.
	goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
	goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
	// regexp2's process-wide clock for match timeouts: it stops by itself
	// a while after the last timed match, not when a test ends.
	goleak.IgnoreAnyFunction("github.com/dlclark/regexp2.runClock"),
}

// Main runs the tests, then fails the run if goroutines are left over.
func Main(m *testing.M) {
	os.Exit(Run(m))
}

// Run runs the tests and reports leaked goroutines on stderr; it returns the
// exit code. For a TestMain with clean-up of its own.
func Run(m *testing.M) int {
	code := m.Run()
	if code != 0 {
		return code
	}
	if err := goleak.Find(ignored...); err != nil {
		fmt.Fprintf(os.Stderr, "leaktest: goroutines outlived the tests: %v\n", err)
		return 1
	}
	return 0
}
