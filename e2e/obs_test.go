package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/dashboard"
	"github.com/spacefix/spacefix/internal/gateway"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/postgres"
	"github.com/spacefix/spacefix/internal/users"
)

// adminToken makes an admin API token in the env's store.
func (e *env) adminToken() string {
	e.t.Helper()
	_, secret, err := users.CreateAPIToken(context.Background(), e.store, "metrics", 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return secret
}

// get fetches url with the given Authorization header ("" for none) and
// returns the status and body.
func get(t *testing.T, url, authz string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// scrape reads the gateway's /metrics with an admin token.
func (e *env) scrape(token string) string {
	e.t.Helper()
	status, body := get(e.t, e.url+"/metrics", "Bearer "+token)
	if status != http.StatusOK {
		e.t.Fatalf("GET /metrics: %d %s", status, body)
	}
	return body
}

var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$`)

// metric returns the value of the sample of name whose labels are exactly
// labels ("k=v" pairs), and whether there is one.
func metric(body, name string, labels ...string) (float64, bool) {
	want := map[string]string{}
	for _, l := range labels {
		k, v, _ := strings.Cut(l, "=")
		want[k] = v
	}
	for line := range strings.SplitSeq(body, "\n") {
		m := sampleLine.FindStringSubmatch(line)
		if m == nil || m[1] != name {
			continue
		}
		got := map[string]string{}
		for _, kv := range regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`).FindAllStringSubmatch(m[2], -1) {
			got[kv[1]] = kv[2]
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		return v, err == nil
	}
	return 0, false
}

func wantMetric(t *testing.T, body string, want float64, name string, labels ...string) {
	t.Helper()
	got, ok := metric(body, name, labels...)
	if !ok {
		t.Errorf("no sample %s%v in /metrics", name, labels)
		return
	}
	if got != want {
		t.Errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

func TestMetricsCountRealCalls(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	token := e.adminToken()
	if _, err := e.store.CreateProject(context.Background(), "quiet"); err != nil {
		t.Fatal(err)
	}
	e.startAgent(core.Options{}, func(a *core.Agent) { must(t, addOrderTools(a)) })
	cs := e.connect("2025-06-18", e.clientKey, nil)
	for range 3 {
		if r := call(t, cs, "get_order", map[string]any{"id": "1042"}); r.IsError {
			t.Fatalf("get_order 1042: %s", text(r))
		}
	}
	for range 2 {
		if r := call(t, cs, "get_order", map[string]any{"id": "999"}); !r.IsError {
			t.Fatalf("get_order 999 succeeded: %s", text(r))
		}
	}

	body := e.scrape(token)
	p := "project=" + e.project.Name
	wantMetric(t, body, 3, "spacefix_calls_total", p, "tool=get_order", "outcome=ok")
	wantMetric(t, body, 2, "spacefix_calls_total", p, "tool=get_order", "outcome=error")
	wantMetric(t, body, 5, "spacefix_call_duration_seconds_count", p, "tool=get_order")
	wantMetric(t, body, 1, "spacefix_agents_connected", p)
	wantMetric(t, body, 0, "spacefix_agents_connected", "project=quiet")
	wantMetric(t, body, 1, "spacefix_sessions", "era=2025-06-18")
	wantMetric(t, body, 0, "spacefix_call_log_dropped_total")
	if n, ok := metric(body, "spacefix_http_requests_in_flight"); !ok || n < 1 {
		t.Errorf("spacefix_http_requests_in_flight = %v (present %v), want at least the scrape itself", n, ok)
	}
	for _, name := range []string{"go_goroutines", "process_open_fds"} {
		if _, ok := metric(body, name); !ok {
			t.Errorf("no %s: the Go runtime and process collectors are missing", name)
		}
	}
	if got := len(e.calls()); got != 5 {
		t.Errorf("call log holds %d records, want the 5 /metrics counted", got)
	}
}

func TestMetricsNeedAdminToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	token := e.adminToken()
	want := "Send an admin API token: Authorization: Bearer sfx_admin_…. Make one with: spacefix tokens create\n"
	for _, authz := range []string{"", "Bearer sfx_admin_nonsense", "Bearer " + e.clientKey, "Basic " + token} {
		status, body := get(t, e.url+"/metrics", authz)
		if status != http.StatusUnauthorized || body != want {
			t.Errorf("GET /metrics with %q: %d %q, want 401 %q", authz, status, body, want)
		}
	}
	if status, _ := get(t, e.url+"/metrics", "Bearer "+token); status != http.StatusOK {
		t.Errorf("GET /metrics with an admin token: %d, want 200", status)
	}
	// A project token is no instance admin: the metrics name every project.
	_, projectToken, err := users.CreateProjectToken(context.Background(), e.store, "ci", 0, e.project.ID, store.RoleOwner)
	must(t, err)
	status, body := get(t, e.url+"/metrics", "Bearer "+projectToken)
	if want := "This needs an instance admin token; a project API token acts only on its project's admin API. Make one with: spacefix tokens create\n"; status != http.StatusForbidden || body != want {
		t.Errorf("GET /metrics with a project token: %d %q, want 403 %q", status, body, want)
	}
}

func TestMetricsSeparateListener(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *envOptions) {
		o.config = func(c *gateway.Config) { c.MetricsAddr = "127.0.0.1:0" }
	})
	addr := e.gw.MetricsAddr()
	if addr == "" {
		t.Fatal("no metrics listener")
	}
	status, body := get(t, "http://"+addr+"/metrics", "")
	if status != http.StatusOK {
		t.Fatalf("GET /metrics on the metrics listener without a token: %d %s", status, body)
	}
	wantMetric(t, body, 0, "spacefix_call_log_dropped_total")
	if status, _ := get(t, "http://"+addr+"/debug/pprof/", ""); status != http.StatusNotFound {
		t.Errorf("GET /debug/pprof/ on the metrics listener: %d, want 404: it serves /metrics only", status)
	}
	if status, _ := get(t, e.url+"/metrics", ""); status != http.StatusUnauthorized {
		t.Errorf("GET /metrics on the main listener without a token: %d, want 401", status)
	}
}

func TestPprofOffByDefault(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	token := e.adminToken()
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/goroutine"} {
		if status, _ := get(t, e.url+path, "Bearer "+token); status != http.StatusNotFound {
			t.Errorf("GET %s without --pprof: %d, want 404", path, status)
		}
	}
}

func TestPprofWithFlagAndToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *envOptions) {
		o.config = func(c *gateway.Config) { c.Pprof = true }
	})
	token := e.adminToken()
	if status, _ := get(t, e.url+"/debug/pprof/", ""); status != http.StatusUnauthorized {
		t.Errorf("GET /debug/pprof/ without a token: %d, want 401", status)
	}
	status, body := get(t, e.url+"/debug/pprof/", "Bearer "+token)
	if status != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Errorf("GET /debug/pprof/ with a token: %d, want 200 and the profile list:\n%s", status, body)
	}
	status, body = get(t, e.url+"/debug/pprof/goroutine?debug=1", "Bearer "+token)
	if status != http.StatusOK || !strings.Contains(body, "goroutine profile:") {
		t.Errorf("GET /debug/pprof/goroutine: %d\n%.200s", status, body)
	}
}

func TestReadyzReadyAndHealthzAlive(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if status, body := get(t, e.url+"/readyz", ""); status != http.StatusOK || body != "ready\n" {
		t.Errorf("GET /readyz: %d %q, want 200 \"ready\\n\"", status, body)
	}
	if status, body := get(t, e.url+"/healthz", ""); status != http.StatusOK || body != "ok\n" {
		t.Errorf("GET /healthz: %d %q, want 200 \"ok\\n\"", status, body)
	}
}

// TestReadyzStoreFileDeleted: a store file deleted under the running
// gateway went unnoticed until a restart printed the first-start banner
// over an empty store. /readyz must say what happened and what to do, and
// the log say it once at ERROR.
func TestReadyzStoreFileDeleted(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	e := newEnv(t, func(o *envOptions) { o.logs = logs })
	if e.dataPath == "" {
		t.Skip("a SQLite store file only")
	}
	if status, body := get(t, e.url+"/readyz", ""); status != http.StatusOK {
		t.Fatalf("GET /readyz before: %d %q", status, body)
	}
	if err := os.Remove(e.dataPath); err != nil {
		t.Fatal(err)
	}
	reason := "the database file " + e.dataPath + " was deleted while the gateway runs; what it writes goes to a file no one can open again. " +
		"Restore the file from a backup before you restart the gateway: without it the gateway starts empty, every key gone"
	var status int
	var body string
	waitFor(t, "/readyz to notice the deleted store file", func() bool {
		status, body = get(t, e.url+"/readyz", "")
		return status != http.StatusOK
	})
	if want := "not ready: " + reason + "\n"; status != http.StatusServiceUnavailable || body != want {
		t.Errorf("GET /readyz: %d %q, want 503 %q", status, body, want)
	}
	if status, _ := get(t, e.url+"/healthz", ""); status != http.StatusOK {
		t.Errorf("GET /healthz: %d, want 200: the process is alive", status)
	}
	// Ask on for longer than the store is probed (every 2 s): the log
	// says it once, not once per probe.
	for start := time.Now(); time.Since(start) < 2500*time.Millisecond; time.Sleep(100 * time.Millisecond) {
		get(t, e.url+"/readyz", "")
	}
	line := fmt.Sprintf("level=ERROR msg=\"the store fails its check; the gateway is not ready\" err=%q", reason)
	if n := strings.Count(logs.String(), "level=ERROR"); n != 1 || !strings.Contains(logs.String(), line) {
		t.Errorf("%d ERROR lines, want one: %s\nlog:\n%s", n, line, logs.String())
	}
}

// A PostgreSQL store that stops taking writes (here its tables are gone)
// takes the gateway out of rotation with a reason that names the database
// but never its password.
func TestReadyzPostgresGone(t *testing.T) {
	t.Parallel()
	var url string
	e := newEnv(t, onPostgres(&url))
	if status, body := get(t, e.url+"/readyz", ""); status != http.StatusOK {
		t.Fatalf("GET /readyz before: %d %q", status, body)
	}
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), `DROP TABLE meta`); err != nil {
		t.Fatal(err)
	}
	var (
		status int
		body   string
	)
	waitFor(t, "/readyz to notice the store refusing writes", func() bool {
		status, body = get(t, e.url+"/readyz", "")
		return status != http.StatusOK
	})
	want := "not ready: store " + postgres.Redact(url) + " does not take writes ("
	if status != http.StatusServiceUnavailable || !strings.HasPrefix(body, want) ||
		!strings.HasSuffix(body, "); check that PostgreSQL is up, reachable and not out of disk\n") {
		t.Errorf("GET /readyz: %d %q, want 503 %q…", status, body, want)
	}
	if u, err := neturl.Parse(url); err != nil {
		t.Error(err)
	} else if pw, _ := u.User.Password(); pw != "" && strings.Contains(body, pw) {
		t.Errorf("the reason carries the password: %q", body)
	}
}

// errDiskFull is what SQLite says on a full disk.
var errDiskFull = errors.New("database or disk is full (13)")

// refusingStore is a store on a full disk: the edge we do not own. Every
// call log write fails, until the disk is freed; the rest works.
type refusingStore struct {
	store.Store
	freed atomic.Bool
}

func (s *refusingStore) AppendCalls(ctx context.Context, calls []store.Call) error {
	if !s.freed.Load() {
		return errDiskFull
	}
	return s.Store.AppendCalls(ctx, calls)
}

// TestRefusedRecordsWaitAndShow: on a full disk, 2,000 calls were served
// and ~1,765 vanished from the call log and usage with one log line. Now
// a record the store refuses is kept and its write retried; /metrics
// counts what waits and the retries, and /readyz says writes fail once
// they have failed for a few seconds.
func TestRefusedRecordsWaitAndShow(t *testing.T) {
	t.Parallel()
	var refusing *refusingStore
	e := newEnv(t, func(o *envOptions) {
		o.wrapStore = func(s store.Store) store.Store {
			refusing = &refusingStore{Store: s}
			return refusing
		}
	})
	token := e.adminToken()
	e.startAgent(core.Options{}, func(a *core.Agent) { must(t, addOrderTools(a)) })
	const served = 7
	cs := e.connect("2025-11-25", e.clientKey, nil)
	for range served {
		if r := call(t, cs, "get_order", map[string]any{"id": "1042"}); r.IsError {
			t.Fatalf("get_order: %s", text(r))
		}
	}
	if err := e.gw.CallLog().Flush(context.Background()); !errors.Is(err, errDiskFull) {
		t.Errorf("Flush: %v, want %v", err, errDiskFull)
	}
	body := e.scrape(token)
	wantMetric(t, body, served, "spacefix_call_log_buffered")
	wantMetric(t, body, 0, "spacefix_call_log_dropped_total")
	wantMetric(t, body, served, "spacefix_calls_total", "project="+e.project.Name, "tool=get_order", "outcome=ok")
	waitFor(t, "a retried call log write", func() bool {
		n, _ := metric(e.scrape(token), "spacefix_call_log_retries_total")
		return n > 0
	})

	var status int
	var ready string
	waitFor(t, "/readyz to say writes fail", func() bool {
		status, ready = get(t, e.url+"/readyz", "")
		return status != http.StatusOK
	})
	h := e.gw.CallLog().Health()
	wantReady := fmt.Sprintf("not ready: call records are not being written since %s (%d waiting to be retried, 0 lost: %v); see the gateway's log\n",
		h.FailingSince.UTC().Format(time.RFC3339), served, errDiskFull)
	if status != http.StatusServiceUnavailable || ready != wantReady {
		t.Errorf("GET /readyz: %d %q, want 503 %q", status, ready, wantReady)
	}
	if time.Since(h.FailingSince) < 5*time.Second {
		t.Errorf("/readyz turned 503 %v after the first failed write, want at least 5 s (a blip is not a failure)", time.Since(h.FailingSince))
	}

	// Once the disk is freed, the next retry (at most 5 s away) writes
	// every record, and the gateway is ready again.
	refusing.freed.Store(true)
	waitFor(t, "the records to be written", func() bool { return e.gw.CallLog().Buffered() == 0 })
	cs2, err := e.store.Calls(context.Background(), store.CallFilter{ProjectID: e.project.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs2) != served {
		t.Errorf("the call log holds %d records once the disk is freed, want %d", len(cs2), served)
	}
	wantMetric(t, e.scrape(token), 0, "spacefix_call_log_dropped_total")
	waitFor(t, "/readyz to say ready", func() bool {
		status, _ = get(t, e.url+"/readyz", "")
		return status == http.StatusOK
	})
}

// dashboardSession signs an admin in and returns the session cookie.
func (e *env) dashboardSession() *http.Cookie {
	e.t.Helper()
	ctx := context.Background()
	u, err := e.store.CreateUser(ctx, store.User{Email: "ops@example.com", Admin: true}, "not-a-real-hash")
	if err != nil {
		e.t.Fatal(err)
	}
	tok, _, err := users.NewSession(ctx, e.store, u.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	return &http.Cookie{Name: dashboard.SessionCookieName(e.gw.URL()), Value: tok}
}

func getWithCookie(t *testing.T, url string, c *http.Cookie) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.AddCookie(c)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}
