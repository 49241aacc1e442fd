package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	neturl "net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/spacefix/spacefix/internal/store/postgres"
	"github.com/spacefix/spacefix/internal/testenv"
)

// runCLI runs one command as the binary would and returns its output.
func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, &out, &errOut)
	return out.String() + errOut.String(), err
}

// eachStore runs fn against a new SQLite file and a new PostgreSQL schema
// (skipped without SPACEFIX_TEST_DATABASE_URL, unless SPACEFIX_REQUIRE_ALL=1):
// every command takes either as --data.
func eachStore(t *testing.T, fn func(t *testing.T, data string)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, filepath.Join(t.TempDir(), "s.db")) })
	t.Run("postgres", func(t *testing.T) { fn(t, testenv.Postgres(t)) })
}

func TestKeysAndProjects(t *testing.T) { eachStore(t, testKeysAndProjects) }

func testKeysAndProjects(t *testing.T, data string) {
	if out, err := runCLI(t, "projects", "create", "shop", "--data", data); err != nil || !strings.Contains(out, `Created project "shop"`) {
		t.Fatalf("projects create: %v %s", err, out)
	}
	if _, err := runCLI(t, "projects", "create", "shop", "--data", data); err == nil || !strings.Contains(err.Error(), `a project named "shop" exists already`) {
		t.Errorf("duplicate project: %v", err)
	}
	out, err := runCLI(t, "keys", "create", "--data", data, "--project", "shop", "--kind", "client", "--read-only", "--tools", "get_order, search_orders", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var k struct{ ID, Key, Kind, Project string }
	if err := json.Unmarshal([]byte(out), &k); err != nil {
		t.Fatalf("keys create --json printed %q: %v", out, err)
	}
	if !strings.HasPrefix(k.ID, "key_") || !strings.HasPrefix(k.Key, "sfx_client_") || k.Kind != "client" || k.Project != "shop" {
		t.Errorf("keys create --json = %+v", k)
	}
	out, err = runCLI(t, "keys", "list", "--data", data, "--project", "shop")
	if err != nil || !strings.Contains(out, k.ID) || !strings.Contains(out, "read only; tools get_order,search_orders") || strings.Contains(out, k.Key) {
		t.Errorf("keys list = %v\n%s", err, out)
	}
	if out, err := runCLI(t, "keys", "revoke", k.ID, "--data", data); err != nil || !strings.Contains(out, "Revoked "+k.ID) {
		t.Errorf("keys revoke: %v %s", err, out)
	}
	if out, err := runCLI(t, "keys", "revoke", k.ID, "--data", data); err != nil || !strings.Contains(out, k.ID+" was already revoked on ") || strings.Contains(out, "Revoked") {
		t.Errorf("keys revoke twice: %v %s; want it to say the key already was revoked", err, out)
	}
	if out, _ := runCLI(t, "keys", "list", "--data", data, "--json"); !strings.Contains(out, `"revoked":true`) {
		t.Errorf("keys list --json after revoke = %s", out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"keys", "create", "--data", data, "--kind", "robot"}, `--kind must be agent or client, not "robot"`},
		{[]string{"keys", "create", "--data", data, "--project", "nope", "--kind", "agent"}, `no project "nope"; create it with: spacefix projects create nope`},
		{[]string{"keys", "revoke", "key_nope", "--data", data}, `no key "key_nope"`},
		{[]string{"keys", "create", "--data", data, "--kind", "agent", "--read-only"}, "--read-only and --tools apply to client keys only"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
	} {
		if _, err := runCLI(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v, want %q", c.args, err, c.want)
		}
	}
}

// syncBuffer is a bytes.Buffer safe to read while serve writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serveOnce runs serve until it printed its start text, checks /healthz,
// stops it and returns what it printed.
func serveOnce(t *testing.T, data string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, logs syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, serveArgs(t, data), &out, &logs) }()
	url := regexp.MustCompile(`MCP endpoint  (http://\S+)/mcp`)
	deadline := time.Now().Add(10 * time.Second)
	for !url.MatchString(out.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("serve printed no MCP endpoint:\n%s\n%s", out.String(), logs.String())
		}
		time.Sleep(10 * time.Millisecond) // poll interval, bounded by the deadline: a real gateway on a socket and a database, which synctest cannot fake
	}
	base := url.FindStringSubmatch(out.String())[1]
	resp, err := http.Get(base + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("GET /healthz: %v %v", err, resp)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve returned %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop")
	}
	return out.String()
}

func TestServeFirstStart(t *testing.T) { eachStore(t, testServeFirstStart) }

func testServeFirstStart(t *testing.T, data string) {
	first := serveOnce(t, data)
	if want := "  Store         " + dataName(data) + "\n"; !strings.Contains(first, want) {
		t.Errorf("first start output lacks %q", want)
	}
	for _, want := range []string{
		"This was the first start",
		"Set up the dashboard (one-time link; the first person to use it becomes admin):\n  http://127.0.0.1:",
		"  Agent key   sfx_agent_",
		"  Client key  sfx_client_",
		"claude mcp add --transport http spacefix http://127.0.0.1:",
		`--header "Authorization: Bearer sfx_client_`,
		"npx -y @modelcontextprotocol/inspector@2.12.0 --cli http://127.0.0.1:",
		`--method tools/call --tool-name get_order --tool-arg 'id="1042"'`,
		"go run ./examples/orders",
		"Connect Claude or ChatGPT (remote connector): they connect from their own\nservers, which cannot reach 127.0.0.1:",
		"Start the gateway with\n--public-url https://HOST, an https URL that reaches it (a tunnel or a proxy),\ngive them https://HOST/mcp",
	} {
		if !strings.Contains(first, want) {
			t.Errorf("first start output lacks %q:\n%s", want, first)
		}
	}
	second := serveOnce(t, data)
	if strings.Contains(second, "sfx_") || !strings.Contains(second, "Make keys with:\n  spacefix keys create") {
		t.Errorf("second start output:\n%s", second)
	}
	out, _ := runCLI(t, "keys", "list", "--data", data)
	if n := strings.Count(out, "key_"); n != 2 {
		t.Errorf("after two starts there are %d keys, want the 2 of the first start:\n%s", n, out)
	}
}

// The README's sample first-start output is what serve prints, apart from
// the port, the store path and the secrets.
func TestFirstHourReadmeStartOutput(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), "prints them once with everything you need next:\n\n```\n")
	want, _, ok2 := strings.Cut(after, "```\n")
	if !ok || !ok2 {
		t.Fatal("README.md has no sample first-start output after \"prints them once with everything you need next:\"")
	}
	data := filepath.Join(t.TempDir(), "spacefix.db")
	got := serveOnce(t, data)
	for _, r := range []struct{ re, with string }{
		{`127\.0\.0\.1:\d+`, "127.0.0.1:8080"},
		{`sfx_(agent|client)_[A-Z0-9]+`, "sfx_${1}_…"},
		{`/setup/[A-Za-z0-9_-]+`, "/setup/…"},
	} {
		got = regexp.MustCompile(r.re).ReplaceAllString(got, r.with)
	}
	got = strings.ReplaceAll(got, data, "spacefix.db")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("README.md's sample first-start output differs from what serve prints (-README +serve):\n%s", diff)
	}
}

// A PostgreSQL password given in --data is never printed: not in the
// start text, not in an error.
func TestDataURLPasswordNotPrinted(t *testing.T) {
	data := testenv.Postgres(t)
	u, err := neturl.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	pw, ok := u.User.Password()
	if !ok || pw == "" || strings.Contains(postgres.Redact(data), pw) {
		t.Skip("the test database URL has no password, or one that is also its user or database name, so its absence cannot be seen")
	}
	if out := serveOnce(t, data); strings.Contains(out, pw) || !strings.Contains(out, ":xxxxx@") {
		t.Errorf("serve printed the password, or no redacted URL:\n%s", out)
	}
	u.Host = "127.0.0.1:1" // nothing listens
	_, err = runCLI(t, "keys", "list", "--data", u.String())
	if err == nil || strings.Contains(err.Error(), pw) || !strings.Contains(err.Error(), "open store postgres://") {
		t.Errorf("keys list on an unreachable database: %v", err)
	}
}

// --bus takes NATS URLs; anything else is a usage error that says the
// form, and a bus that cannot be reached stops serve with what to do.
func TestServeBusFlag(t *testing.T) {
	data := filepath.Join(t.TempDir(), "s.db")
	err := run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0", "--data", data, "--bus", "redis://127.0.0.1:6379"}, &syncBuffer{}, &syncBuffer{})
	want := `serve: --bus takes NATS server URLs, nats://HOST:PORT[,nats://…], not "redis://127.0.0.1:6379"`
	if _, ok := err.(usageError); !ok || err.Error() != want {
		t.Errorf("serve --bus redis://…: %v, want the usage error %q", err, want)
	}
	err = run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0", "--data", data, "--bus", "nats://u:s3cret@127.0.0.1:1"}, &syncBuffer{}, &syncBuffer{})
	if err == nil || !strings.Contains(err.Error(), "connect to the bus nats://xxxxx@127.0.0.1:1: ") ||
		!strings.Contains(err.Error(), "check that NATS is running and reachable") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("serve with an unreachable bus: %v", err)
	}
}

// gateways list shows the gateways running on a store, and says so when
// none is.
func TestGatewaysList(t *testing.T) { eachStore(t, testGatewaysList) }

func testGatewaysList(t *testing.T, data string) {
	out, err := runCLI(t, "gateways", "list", "--data", data)
	if err != nil || !strings.Contains(out, "No gateway is running on this store (none recorded itself in the last 15s).") {
		t.Fatalf("gateways list on a store nobody serves: %v\n%s", err, out)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, logs syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, serveArgs(t, data), &stdout, &logs) }()
	addr := regexp.MustCompile(`MCP endpoint  http://(\S+)/mcp`)
	waitUntil := time.Now().Add(10 * time.Second)
	for !addr.MatchString(stdout.String()) {
		if time.Now().After(waitUntil) {
			t.Fatalf("serve did not start:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond) // poll interval, bounded by the deadline: a real gateway on a socket and a database, which synctest cannot fake
	}
	listening := addr.FindStringSubmatch(stdout.String())[1]
	out, err = runCLI(t, "gateways", "list", "--data", data)
	if err != nil || !strings.Contains(out, "ID") || !strings.Contains(out, "gw-") || !strings.Contains(out, listening) || !strings.Contains(out, "  no  ") {
		t.Errorf("gateways list beside a running serve: %v\n%s", err, out)
	}
	out, err = runCLI(t, "gateways", "list", "--data", data, "--json")
	var list []struct {
		ID, Addr string
		Bus      bool
	}
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 || list[0].Addr != listening || list[0].Bus {
		t.Errorf("gateways list --json: %v %s", err, out)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serve: %v", err)
	}
}

// A bad --trusted-proxies entry stops serve with a message naming it.
func TestServeTrustedProxiesFlag(t *testing.T) {
	data := filepath.Join(t.TempDir(), "s.db")
	err := run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0", "--data", data, "--trusted-proxies", "127.0.0.1/32, nginx.internal"}, &syncBuffer{}, &syncBuffer{})
	want := `config: trusted proxies: "nginx.internal" is not an address or a CIDR prefix; write for example 127.0.0.1/32,10.0.0.0/8`
	if err == nil || err.Error() != want {
		t.Errorf("serve --trusted-proxies with a host name: %v, want %q", err, want)
	}
}
