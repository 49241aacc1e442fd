// Package archtest holds the import-graph test: it reads the module's
// package graph with `go list -deps -json` and fails when an import breaks
// the layering below, which CONTRIBUTING.md's architecture table describes.
package archtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/spacefix/spacefix"

// layers lists the module's packages from the top down. A package may
// import only packages of a lower layer: never one of its own layer, never
// one above. Every package of the module must be listed, so a new package
// makes its author choose its place here (and in CONTRIBUTING.md).
var layers = []struct {
	name string
	pkgs []string
}{
	{"programs and suites", []string{
		"cmd/spacefix", "bench/cmd/pprof-split", "bench/cmd/spacefix-bench", "bench/cmd/spacefix-fanin",
		"e2e", "e2e/testagent", "e2e/bridgeserver", "e2e/hostilechild", "examples/chart", "examples/orders", "examples/everything", "examples/identity", "examples/interceptor", "sdk/node", "internal/archtest", "internal/sdkcopy", "deploy",
	}},
	{"benchmark harness", []string{"bench"}},
	// What cmd/spacefix runs: the gateway's wiring, and the bridge, an
	// agent built on the SDK.
	{"wiring and the bridge", []string{"internal/gateway", "internal/bridge"}},
	// The SDK's constructor for bridged agents, for internal/bridge only.
	{"the SDK's bridge door", []string{"core/bridging"}},
	// The agent front and the MCP front side by side; the dashboard beside
	// them; the SDK, the far end of the agent protocol, at the same height.
	{"fronts and SDK", []string{"internal/agentfront", "internal/mcpfront", "internal/dashboard", "core"}},
	// Below the MCP front's two eras, every tools/call's one pipeline
	// (and the reads of resources and prompts), then the wire both eras
	// read and write.
	{"the MCP front's eras", []string{"internal/mcpfront/session", "internal/mcpfront/stateless"}},
	{"the call pipeline", []string{"internal/mcpfront/pipeline"}},
	{"the MCP wire", []string{"internal/mcpfront/wire"}},
	{"test fakes", []string{"internal/route/routetest", "internal/upstream/upstreamtest"}},
	// The bus carries the task runtime's signals between gateways, and the
	// runtime delivers a task's call through route.
	{"the bus", []string{"internal/cluster"}},
	{"tasks", []string{"internal/tasks"}},
	{"routing and rules", []string{"internal/store/teststores", "internal/route", "internal/access", "internal/users", "internal/metrics", "internal/oauth", "internal/identity", "internal/upstream", "internal/interceptors"}},
	{"registry and stores", []string{"internal/agents", "internal/auth", "internal/cache", "internal/store/sqlite", "internal/store/postgres", "internal/store/storetest"}},
	// The one body of the SQLite and PostgreSQL stores, over a DB and a
	// dialect the engines give it; below it their statements and scanning.
	{"the SQL store body", []string{"internal/store/sqlstore"}},
	{"shared SQL", []string{"internal/store/sqlshared"}},
	// What core/bridging hands to core without a field in core.Options.
	{"SDK hooks", []string{"core/internal/bridgehook"}},
	{"protocol, schemas, store interface", []string{"core/internal/agentproto", "internal/agentproto", "internal/schema", "core/internal/schemagen", "internal/changes", "internal/store"}},
	{"helpers", []string{
		"core/internal/textfmt", "internal/textfmt", "internal/canonjson", "core/internal/pattern", "internal/pattern", "internal/leaktest", "internal/recovery",
		"internal/quickstart", "internal/ratelimit", "internal/tracing", "internal/dashboard/apitypes", "internal/testenv",
		"internal/oauthclient", "internal/secrets",
		"internal/egress", "internal/policy",
	}},
}

// sdkMay are the only packages of the module the SDK (core) may depend on,
// directly or not: the protocol's wire types and the schema generator.
var sdkMay = []string{"core/internal/agentproto", "core/internal/bridgehook", "core/internal/pattern", "core/internal/schemagen", "core/internal/textfmt"}

// transports are the imports that would tie call routing to one transport.
var transports = []string{"github.com/coder/websocket", "net/http"}

// pkg is what the test reads of `go list -json`.
type pkg struct {
	ImportPath string
	Imports    []string // direct, without tests
	Deps       []string // transitive, without tests
	Standard   bool
}

func TestArchImportGraph(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to read the import graph: %v", err)
	}
	cmd := exec.Command(goTool, "list", "-deps", "-json=ImportPath,Imports,Deps,Standard", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	pkgs, err := decode(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := statSources("../.."); err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < len(layers) {
		t.Fatalf("go list found %d packages of %s; want the whole module", len(pkgs), module)
	}
	for _, v := range check(pkgs) {
		t.Error(v)
	}
}

// The checker finds each kind of wrong import in a made-up graph, so the
// test above cannot pass by checking nothing.
func TestArchCheckFindsWrongImports(t *testing.T) {
	m := func(p string) string { return module + "/" + p }
	pkgs := map[string]pkg{
		m("internal/route"): {ImportPath: m("internal/route"),
			Imports: []string{m("internal/agents"), "net/http", m("internal/mcpfront")},
			Deps:    []string{m("internal/agents"), "net/http", m("internal/mcpfront"), "github.com/coder/websocket"}},
		m("internal/agentfront"): {ImportPath: m("internal/agentfront"),
			Imports: []string{m("internal/mcpfront")}, Deps: []string{m("internal/mcpfront")}},
		m("internal/mcpfront"): {ImportPath: m("internal/mcpfront")},
		m("internal/agents"):   {ImportPath: m("internal/agents")},
		m("core"): {ImportPath: m("core"), Imports: []string{m("core/internal/agentproto")},
			Deps: []string{m("core/internal/agentproto"), m("internal/schema"), "github.com/dlclark/regexp2"}},
		m("core/internal/agentproto"): {ImportPath: m("core/internal/agentproto")},
		m("internal/schema"):          {ImportPath: m("internal/schema")},
		m("internal/newthing"):        {ImportPath: m("internal/newthing")},
	}
	got := check(pkgs)
	want := []string{
		"internal/agentfront imports internal/mcpfront, of its own layer (fronts and SDK): only lower layers may be imported",
		"internal/agentfront depends on internal/mcpfront: the agent front and the MCP front stay apart",
		"internal/newthing is in no layer: add it to the layers table in internal/archtest and to CONTRIBUTING.md's architecture table",
		"internal/route imports internal/mcpfront, of a higher layer (fronts and SDK): only lower layers may be imported",
		"internal/route imports net/http: route stays free of transports (the front adapts its connection to route.Transport)",
		"internal/route depends on github.com/coder/websocket: route stays free of transports (the front adapts its connection to route.Transport)",
		"core depends on internal/schema: the SDK may depend only on core/internal/agentproto, core/internal/bridgehook, core/internal/pattern, core/internal/schemagen, core/internal/textfmt",
		"core depends on github.com/dlclark/regexp2: the SDK must not carry the gateway's validator",
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("check found:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// statSources stats every Go file and directory of the module at root, so
// that go test's cache knows the result depends on them: without this, a
// cached pass would hide an import added since.
func statSources(root string) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || strings.HasSuffix(path, ".go") || d.Name() == "go.mod" {
			_, err = os.Stat(path)
		}
		return err
	})
}

// decode reads the stream of JSON objects go list prints.
func decode(out []byte) (map[string]pkg, error) {
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		err := dec.Decode(&p)
		if err == io.EOF {
			return pkgs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("decode go list output: %w", err)
		}
		pkgs[p.ImportPath] = p
	}
}

// check returns one sentence per rule a package of the module breaks.
func check(pkgs map[string]pkg) []string {
	layerOf := map[string]int{}
	for i, l := range layers {
		for _, p := range l.pkgs {
			layerOf[p] = i
		}
	}
	var bad []string
	for _, p := range pkgs {
		name, ours := strings.CutPrefix(p.ImportPath, module+"/")
		if p.ImportPath == module {
			name, ours = ".", true
		}
		if !ours || p.Standard {
			continue
		}
		at, listed := layerOf[name]
		if !listed {
			bad = append(bad, name+" is in no layer: add it to the layers table in internal/archtest and to CONTRIBUTING.md's architecture table")
			continue
		}
		for _, imp := range p.Imports {
			q, ok := strings.CutPrefix(imp, module+"/")
			if !ok {
				continue
			}
			switch l, listed := layerOf[q]; {
			case !listed:
				// Reported as a package of its own.
			case l == at:
				bad = append(bad, fmt.Sprintf("%s imports %s, of its own layer (%s): only lower layers may be imported", name, q, layers[l].name))
			case l < at:
				bad = append(bad, fmt.Sprintf("%s imports %s, of a higher layer (%s): only lower layers may be imported", name, q, layers[l].name))
			}
		}
		bad = append(bad, special(name, p)...)
	}
	return bad
}

// special checks the rules that concern one package.
func special(name string, p pkg) []string {
	var bad []string
	switch name {
	case "internal/agentfront", "internal/mcpfront":
		other := map[string]string{"internal/agentfront": "internal/mcpfront", "internal/mcpfront": "internal/agentfront"}[name]
		if slices.Contains(p.Deps, module+"/"+other) {
			bad = append(bad, fmt.Sprintf("%s depends on %s: the agent front and the MCP front stay apart", name, other))
		}
	case "internal/route":
		const why = "route stays free of transports (the front adapts its connection to route.Transport)"
		for _, tr := range transports {
			if slices.Contains(p.Imports, tr) {
				bad = append(bad, fmt.Sprintf("%s imports %s: %s", name, tr, why))
			}
		}
		// net/http still reaches route indirectly (OpenTelemetry's
		// propagation, internal/recovery's HTTP middleware) and route uses
		// none of it; a WebSocket library must not reach route at all.
		for _, d := range p.Deps {
			if strings.HasPrefix(d, "github.com/coder/websocket") && !strings.Contains(d, "/internal/") {
				bad = append(bad, fmt.Sprintf("%s depends on %s: %s", name, d, why))
			}
		}
	case "core":
		for _, d := range p.Deps {
			if strings.Contains(d, "regexp2") {
				bad = append(bad, fmt.Sprintf("%s depends on %s: the SDK must not carry the gateway's validator", name, d))
			}
			q, ok := strings.CutPrefix(d, module+"/")
			if ok && !slices.Contains(sdkMay, q) {
				bad = append(bad, fmt.Sprintf("%s depends on %s: the SDK may depend only on %s", name, q, strings.Join(sdkMay, ", ")))
			}
		}
	}
	return bad
}
