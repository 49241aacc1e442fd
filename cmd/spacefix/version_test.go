package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// What `spacefix version` prints for each thing a build may know of itself.
func TestVersionLine(t *testing.T) {
	for _, c := range []struct {
		b    buildInfo
		want string
	}{
		{buildInfo{"v0.2.0", "1a2b3c4d5e6f", "2026-12-07T03:00:00Z"}, "spacefix v0.2.0 (commit 1a2b3c4d5e6f, built 2026-12-07T03:00:00Z)"},
		{buildInfo{"dev", "1a2b3c4d5e6f", ""}, "spacefix dev (commit 1a2b3c4d5e6f)"},
		{buildInfo{"v0.2.0", "", "2026-12-07T03:00:00Z"}, "spacefix v0.2.0 (built 2026-12-07T03:00:00Z)"},
		{buildInfo{"dev", "", ""}, "spacefix dev"},
	} {
		if got := c.b.String(); got != c.want {
			t.Errorf("%+v prints %q, want %q", c.b, got, c.want)
		}
	}
}

// Values set with -ldflags win over build info, and a full commit hash is
// shortened as git shows it.
func TestVersionFromLdflags(t *testing.T) {
	defer func(v, c, d string) { version, commit, date = v, c, d }(version, commit, date)
	version, commit, date = "v1.2.3", "0123456789abcdef0123456789abcdef01234567", "2026-12-07T03:00:00Z"
	var out bytes.Buffer
	if err := run(context.Background(), []string{"version"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(out.String()), "spacefix v1.2.3 (commit 0123456789ab, built 2026-12-07T03:00:00Z)"; got != want {
		t.Errorf("spacefix version = %q, want %q", got, want)
	}
}
