package main

import (
	"fmt"
	"runtime/debug"
)

// Set at build time by the release script (scripts/release), with
// -ldflags "-X main.version=v0.2.0 -X main.commit=… -X main.date=…", so an
// archive's binary says which release it is whatever built it.
var (
	version = ""
	commit  = ""
	date    = ""
)

// buildInfo is which build of spacefix is running.
type buildInfo struct {
	Version string // "v0.2.0", or "dev" for a build from a checkout
	Commit  string // the git commit, 12 characters; empty if unknown
	Date    string // when it was built (or committed), RFC 3339; empty if unknown
}

// currentBuild reads what ldflags set and fills the rest from the build
// info the go command records: the module version of `go install …@v0.2.0`,
// and the checkout's vcs.revision and vcs.time of a `go build` in a clone.
// A build with neither is "dev".
func currentBuild() buildInfo {
	b := buildInfo{Version: version, Commit: commit, Date: date}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if b.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			b.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && b.Commit == "":
				b.Commit = s.Value
			case s.Key == "vcs.time" && b.Date == "":
				b.Date = s.Value
			}
		}
	}
	if b.Version == "" {
		b.Version = "dev"
	}
	if len(b.Commit) > 12 {
		b.Commit = b.Commit[:12]
	}
	return b
}

// String is what `spacefix version` prints:
// "spacefix v0.2.0 (commit 1a2b3c4d5e6f, built 2026-12-07T03:00:00Z)",
// leaving out what is unknown.
func (b buildInfo) String() string {
	switch {
	case b.Commit != "" && b.Date != "":
		return fmt.Sprintf("spacefix %s (commit %s, built %s)", b.Version, b.Commit, b.Date)
	case b.Commit != "":
		return fmt.Sprintf("spacefix %s (commit %s)", b.Version, b.Commit)
	case b.Date != "":
		return fmt.Sprintf("spacefix %s (built %s)", b.Version, b.Date)
	}
	return "spacefix " + b.Version
}
