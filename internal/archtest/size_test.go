package archtest

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxFileLines bounds the source files of the rooms that hold it: a file
// is one concept, read in one sitting (STYLE.md, "Size").
const maxFileLines = 450

// sizedRooms are the folders whose every non-test Go file must stay within
// maxFileLines.
var sizedRooms = []string{"internal/mcpfront"}

func TestFileSizes(t *testing.T) {
	for _, room := range sizedRooms {
		files, err := filepath.Glob(filepath.Join("..", "..", room, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", room, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if n := bytes.Count(b, []byte("\n")); n > maxFileLines {
				t.Errorf("%s/%s has %d lines, more than %d: split it by concept", room, filepath.Base(f), n, maxFileLines)
			}
		}
	}
}
