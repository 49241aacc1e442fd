package archtest

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gatewayOnly are module paths the gateway depends on that a provider must
// never get by requiring the SDK: its stores, its bus, its MCP server, its
// metrics and its browser tests.
var gatewayOnly = []string{
	"github.com/jackc/pgx",
	"github.com/nats-io/",
	"github.com/chromedp/",
	"google.golang.org/grpc",
	"github.com/prometheus/",
	"modernc.org/sqlite",
	"github.com/modelcontextprotocol/go-sdk",
	"github.com/dlclark/regexp2",
	"go.opentelemetry.io/otel/sdk",
	"golang.org/x/crypto",
}

// TestSDKModuleStandsAlone builds a provider the way a user makes one: a
// module of its own at the SDK's (older) go directive that requires only
// github.com/spacefix/spacefix/core. Tidying it must keep that directive,
// and neither its module graph nor its go.sum may carry any of the
// gateway's dependencies.
func TestSDKModuleStandsAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module of its own; skipped with -short")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build a provider module: %v", err)
	}
	coreDir, err := filepath.Abs("../../core")
	if err != nil {
		t.Fatal(err)
	}
	sdk := readModFile(t, goTool, filepath.Join(coreDir, "go.mod"))
	gw := readModFile(t, goTool, "../../go.mod")
	if sdk.Module.Path != module+"/core" {
		t.Fatalf("core/go.mod names module %q; want %q", sdk.Module.Path, module+"/core")
	}
	if !goOlder(sdk.Go, gw.Go) {
		t.Errorf("the SDK's go directive is %s, not older than the gateway's %s: providers would be raised to it", sdk.Go, gw.Go)
	}
	if !gatewayRequiresSDK(gw) {
		t.Errorf("go.mod does not require %s/core: the gateway must build on the SDK module", module)
	}

	dir := t.TempDir()
	goMod := "module example.com/provider\n\ngo " + sdk.Go + "\n\n" +
		"require " + module + "/core v0.1.0\n\n" +
		// A published provider requires a tagged version; here the tag is
		// this checkout.
		"replace " + module + "/core v0.1.0 => " + filepath.ToSlash(coreDir) + "\n"
	writeFile(t, filepath.Join(dir, "go.mod"), goMod)
	writeFile(t, filepath.Join(dir, "main.go"), providerMain)

	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(goTool, args...)
		cmd.Dir = dir
		// GOWORK=off: the provider is not part of this repository's
		// workspace. GOTOOLCHAIN=local: build with the go at hand, as the
		// directive allows any newer one.
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go %s in the provider module: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
		}
		return string(out)
	}
	run("mod", "tidy")
	run("build", "./...")
	graph := run("list", "-m", "all")

	after := readModFile(t, goTool, filepath.Join(dir, "go.mod"))
	if after.Go != sdk.Go {
		t.Errorf("go mod tidy raised the provider's go directive from %s to %s", sdk.Go, after.Go)
	}
	sum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range gatewayOnly {
		if strings.Contains(graph, dep) {
			t.Errorf("the provider's module graph carries the gateway's dependency %s:\n%s", dep, graph)
		}
		if bytes.Contains(sum, []byte(dep)) {
			t.Errorf("the provider's go.sum carries the gateway's dependency %s", dep)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(graph), "\n") {
		if strings.HasPrefix(line, module+" ") {
			t.Errorf("the provider's module graph carries the gateway's module: %s", line)
		}
	}
}

// providerMain is a provider's whole program: one tool.
const providerMain = `package main

import (
	"context"
	"log"
	"os"

	"github.com/spacefix/spacefix/core"
)

type In struct {
	Name string ` + "`json:\"name\"`" + `
}

func main() {
	agent, err := core.New(core.Options{APIKey: os.Getenv("SPACEFIX_API_KEY"), Name: "hello"})
	if err != nil {
		log.Fatal(err)
	}
	err = core.AddTool(agent, "hello", "Greets someone.", func(ctx context.Context, in In) (string, error) {
		return "Hello, " + in.Name, nil
	})
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(agent.Run(context.Background()))
}
`

// modFile is what the tests read of `go mod edit -json`.
type modFile struct {
	Module  struct{ Path string }
	Go      string
	Require []struct{ Path, Version string }
}

func readModFile(t *testing.T, goTool, path string) modFile {
	t.Helper()
	out, err := exec.Command(goTool, "mod", "edit", "-json", path).Output()
	if err != nil {
		t.Fatalf("go mod edit -json %s: %v", path, err)
	}
	var f modFile
	if err := json.Unmarshal(out, &f); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	if f.Go == "" {
		t.Fatalf("%s has no go directive", path)
	}
	return f
}

func gatewayRequiresSDK(gw modFile) bool {
	for _, r := range gw.Require {
		if r.Path == module+"/core" {
			return true
		}
	}
	return false
}

// goOlder reports whether go version a is older than b ("1.23.0" < "1.26").
func goOlder(a, b string) bool {
	pa, pb := goParts(a), goParts(b)
	for i := range pa {
		if pa[i] != pb[i] {
			return pa[i] < pb[i]
		}
	}
	return false
}

func goParts(v string) [3]int {
	var out [3]int
	for i, s := range strings.SplitN(v, ".", 3) {
		n := 0
		for _, c := range s {
			if c < '0' || c > '9' {
				break
			}
			n = n*10 + int(c-'0')
		}
		out[i] = n
	}
	return out
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
