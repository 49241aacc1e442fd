package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/testenv"
)

// imageVar names a built image for TestContainer to run (CI builds it once
// with scripts/docker-build); without it the test builds one.
const imageVar = "SPACEFIX_TEST_IMAGE"

// TestContainer runs the image as a user would: on a volume, on the host's
// network (loopback only here), with an agent connecting from outside the
// container and an MCP client calling its tool through it. A new container
// on the same volume keeps the first one's keys and settings.
func TestContainer(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs a container image; skipped under -short")
	}
	if os.Getenv(storeVar) == "postgres" {
		t.Skip("the container runs on its own SQLite volume; the PostgreSQL pass of the suite adds nothing to it")
	}
	if _, err := exec.LookPath("docker"); err != nil {
		testenv.Unavailable(t, "docker is not on PATH; install Docker (Debian: apt-get install docker.io) to run the container test")
	}
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		testenv.Unavailable(t, "the Docker daemon does not answer ("+strings.TrimSpace(string(out))+"); start dockerd to run the container test")
	}
	image := containerImage(t)
	if u := docker(t, "image", "inspect", "-f", "{{.Config.User}}", image); u != "65532:65532" {
		t.Errorf("the image runs as user %q, want the non-root 65532:65532", u)
	}

	// A host folder as the volume, writable by the container's user.
	vol := t.TempDir()
	must(t, os.Chmod(vol, 0o777))
	addr := freeAddr(t)
	url := "http://" + addr

	first := runContainer(t, image, vol, addr)
	logs := waitReady(t, first, url)
	agentKey := regexp.MustCompile(`Agent key\s+(sfx_agent_\S+)`).FindStringSubmatch(logs)
	clientKey := regexp.MustCompile(`Client key\s+(sfx_client_\S+)`).FindStringSubmatch(logs)
	if agentKey == nil || clientKey == nil {
		t.Fatalf("the container's first start printed no keys:\n%s", logs)
	}
	e := &env{t: t, url: url, agentKey: agentKey[1], clientKey: clientKey[1]}
	stopAgent := containerAgent(t, url, e.agentKey)
	cs := e.connect("2025-11-25", e.clientKey, nil)
	if got := text(callEventuallyWith(t, cs, "greet", map[string]any{"name": "Ada"})); got != "Hello, Ada, from outside the container" {
		t.Errorf("greet through the container = %q", got)
	}

	// A setting, made with the CLI inside the container over the admin API.
	var tok struct{ Token string }
	must(t, json.Unmarshal([]byte(docker(t, "exec", first, "spacefix", "tokens", "create", "--name", "e2e", "--json")), &tok))
	docker(t, "exec", first, "spacefix", "settings", "set", "--project", "default", "--rate-limit", "77", "--url", url, "--token", tok.Token)
	stopAgent()
	cs.Close()

	// The same volume in a new container: no first start, the same keys,
	// the setting kept.
	docker(t, "rm", "-f", first)
	second := runContainer(t, image, vol, addr)
	if logs := waitReady(t, second, url); strings.Contains(logs, "sfx_") || strings.Contains(logs, "This was the first start") {
		t.Errorf("the second container on the same volume started afresh:\n%s", logs)
	}
	containerAgent(t, url, e.agentKey)
	cs = e.connect("2026-07-28", e.clientKey, nil)
	if got := text(callEventuallyWith(t, cs, "greet", map[string]any{"name": "Bo"})); got != "Hello, Bo, from outside the container" {
		t.Errorf("greet through the second container = %q", got)
	}
	show := docker(t, "exec", second, "spacefix", "settings", "show", "--project", "default", "--url", url, "--token", tok.Token, "--json")
	var project struct {
		Settings struct{ RateLimitPerMinute int }
	}
	must(t, json.Unmarshal([]byte(show), &project))
	if project.Settings.RateLimitPerMinute != 77 {
		t.Errorf("after a new container on the same volume the rate limit is %d, want the 77 set before:\n%s", project.Settings.RateLimitPerMinute, show)
	}
}

// containerImage returns the image to test: $SPACEFIX_TEST_IMAGE, or one
// built now by scripts/docker-build and removed when the test ends.
func containerImage(t *testing.T) string {
	if image := os.Getenv(imageVar); image != "" {
		return image
	}
	image := "spacefix:e2e-" + strings.ToLower(rand.Text()[:8])
	cmd := exec.Command("../scripts/docker-build", image)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/docker-build: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("docker", "rmi", "-f", image).Run() })
	return image
}

// runContainer starts the image's default command (serve) on vol with a
// unique name, removed when the test ends whatever happened.
func runContainer(t *testing.T, image, vol, addr string) string {
	t.Helper()
	name := "spacefix-e2e-" + strings.ToLower(rand.Text()[:12])
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := exec.Command("docker", "logs", name).CombinedOutput()
			t.Logf("container %s's output (last 4 KiB):\n%s", name, tail(out, 4096))
		}
		exec.Command("docker", "rm", "-f", name).Run()
	})
	docker(t, "run", "-d", "--name", name, "--network", "host", "-v", vol+":/data",
		"-e", "SPACEFIX_ADDR="+addr, image)
	return name
}

// waitReady polls /readyz until the container's gateway is ready and
// returns what it printed.
func waitReady(t *testing.T, name, url string) string {
	t.Helper()
	poll(t, "the container's gateway to be ready (GET /readyz)", 60*time.Second, func() (attempt, bool) {
		resp, err := http.Get(url + "/readyz")
		if err != nil {
			return attempt{err: err}, false
		}
		resp.Body.Close()
		return attempt{out: resp.Status}, resp.StatusCode == http.StatusOK
	})
	out, err := exec.Command("docker", "logs", name).CombinedOutput()
	if err != nil {
		t.Fatalf("docker logs %s: %v\n%s", name, err, out)
	}
	return string(out)
}

// containerAgent connects an SDK agent from this process, outside the
// container, with one tool; the returned func stops it.
func containerAgent(t *testing.T, url, key string) func() {
	t.Helper()
	a, err := core.New(core.Options{APIKey: key, URL: url, Name: "greeter", Logger: testLogger(t)})
	must(t, err)
	type in struct {
		Name string `json:"name"`
	}
	must(t, core.AddTool(a, "greet", "Greets someone.", func(ctx context.Context, in in) (string, error) {
		return "Hello, " + in.Name + ", from outside the container", nil
	}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	stop := func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("the agent did not stop within 10s")
		}
	}
	t.Cleanup(stop)
	return stop
}

// docker runs a docker command and returns its trimmed output, failing the
// test with the output if it fails.
func docker(t *testing.T, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := exec.Command("docker", args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("docker %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
	}
	return strings.TrimSpace(out.String())
}
