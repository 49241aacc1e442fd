package postgres_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/testenv"
)

// pgInstance is a PostgreSQL server of the test's own, in a temporary
// directory on a free loopback port: restarting the shared test database
// would disturb every other test using it.
type pgInstance struct {
	t    *testing.T
	bin  string // the directory of pg_ctl, initdb
	dir  string
	data string
	url  string
	as   []string // the command prefix that runs a tool as the server's owner
}

// startPostgres starts a private PostgreSQL, stopped when t ends, or skips
// (see [testenv.Unavailable]) when its programs are not installed.
func startPostgres(t *testing.T) *pgInstance {
	t.Helper()
	bin := ""
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		bin = filepath.Dir(p)
	} else if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl"); len(m) > 0 {
		bin = filepath.Dir(m[len(m)-1])
	} else {
		testenv.Unavailable(t, "the PostgreSQL server programs (pg_ctl, initdb) are not installed; install postgresql to run the restart test")
	}
	dir, err := os.MkdirTemp("", "spacefix-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := &pgInstance{t: t, bin: bin, dir: dir, data: filepath.Join(dir, "data")}
	if os.Geteuid() == 0 { // initdb and postgres refuse to run as root
		u, err := user.Lookup("postgres")
		if err != nil {
			testenv.Unavailable(t, "running as root without a postgres user to run the PostgreSQL server as")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		p.as = []string{"runuser", "-u", "postgres", "--"}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	p.run("initdb", "-D", p.data, "-U", "spacefix", "--auth=trust", "-E", "UTF8", "--no-sync")
	p.run("pg_ctl", "-D", p.data, "-l", filepath.Join(dir, "log"), "-w", "-o",
		fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off", port, dir), "start")
	t.Cleanup(func() { p.run("pg_ctl", "-D", p.data, "-m", "immediate", "-w", "stop") })
	p.url = fmt.Sprintf("postgres://spacefix@127.0.0.1:%d/postgres?sslmode=disable", port)
	return p
}

// run runs one of the server's programs, failing the test if it fails.
func (p *pgInstance) run(name string, args ...string) {
	p.t.Helper()
	argv := append(append(append([]string(nil), p.as...), filepath.Join(p.bin, name)), args...)
	// Output to a file, not a pipe: the server pg_ctl starts inherits
	// it and would hold a pipe open for as long as it runs.
	out, err := os.CreateTemp("", "spacefix-pg-out-")
	if err != nil {
		p.t.Fatal(err)
	}
	defer os.Remove(out.Name())
	defer out.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		said, _ := os.ReadFile(out.Name())
		log, _ := os.ReadFile(filepath.Join(p.dir, "log"))
		p.t.Fatalf("%s: %v\n%s\nserver log:\n%s", name, err, said, log)
	}
}

// restart crashes the server (every connection ends at once, transactions
// in flight are lost) and starts it again, returning once it answers.
func (p *pgInstance) restart() { p.run("pg_ctl", "-D", p.data, "-m", "immediate", "-w", "restart") }

// TestRestartLosesNoCallRecord: PostgreSQL restarted (pg_ctl -m immediate)
// three times while calls are logged and keys checked. Every record is in
// the table afterwards, exactly once, and every key check succeeded: the
// one that met a dead connection after a restart was tried once more.
func TestRestartLosesNoCallRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and restarts a PostgreSQL server")
	}
	pg := startPostgres(t)
	ctx := t.Context()
	s := open(t, pg.url)
	p, err := s.CreateProject(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	hash := sha256.Sum256([]byte("sfx_client_restart"))
	if _, err := s.CreateKey(ctx, store.Key{ID: "key_restart", ProjectID: p.ID, Kind: store.KindClient}, hash[:]); err != nil {
		t.Fatal(err)
	}
	l := store.NewCallLog(s, &store.CallLogOptions{BatchSize: 50, FlushInterval: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})

	stop := make(chan struct{})
	var (
		wg           sync.WaitGroup
		added        atomic.Int64
		checks, fail atomic.Int64
		firstFail    atomic.Value
	)
	wg.Go(func() { // calls, logged as the gateway does
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			l.Add(store.Call{Time: time.Now(), ProjectID: p.ID, Kind: "tool", Name: "get_order",
				KeyID: "key_restart", Outcome: store.OutcomeOK, Billable: true, Error: strconv.Itoa(i)})
			added.Add(1)
		}
	})
	wg.Go(func() { // key checks, as every request makes
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			checks.Add(1)
			kctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			if _, err := s.KeyByHash(kctx, hash[:]); err != nil {
				fail.Add(1)
				firstFail.CompareAndSwap(nil, err.Error())
			}
			cancel()
		}
	})
	const restarts = 3
	for range restarts {
		time.Sleep(300 * time.Millisecond) // calls between restarts; not a wait for a condition
		pg.restart()
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := l.Close(cctx); err != nil {
		t.Fatalf("Close: %v", err)
	}

	want := added.Load()
	got, err := s.Calls(ctx, store.CallFilter{ProjectID: p.ID, Limit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	distinct := map[string]bool{}
	for _, c := range got {
		distinct[c.Error] = true
	}
	if int64(len(got)) != want || int64(len(distinct)) != want {
		t.Errorf("the log holds %d records (%d distinct) after %d restarts, want the %d added", len(got), len(distinct), restarts, want)
	}
	us, err := s.Usage(ctx, p.ID, time.Now().Add(-24*time.Hour), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var billed int64
	for _, u := range us {
		billed += u.Calls
	}
	if billed != want {
		t.Errorf("usage counts %d calls, want %d", billed, want)
	}
	if d := l.Dropped(); d != 0 {
		t.Errorf("Dropped = %d, want 0", d)
	}
	if l.Retries() == 0 {
		t.Error("no call log write was retried: the restarts did not reach the writes")
	}
	if n := fail.Load(); n != 0 {
		t.Errorf("%d of %d key checks failed, want none; the first: %v", n, checks.Load(), firstFail.Load())
	}
	if s.Retried() == 0 {
		t.Error("no key check was retried: the restarts did not reach the checks")
	}
	t.Logf("%d records, %d key checks (%d retried), %d call log retries", want, checks.Load(), s.Retried(), l.Retries())
}
