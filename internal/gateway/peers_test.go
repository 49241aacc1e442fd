package gateway

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlite"
)

// startOn starts a gateway on its own handle of the store file at path.
func startOn(t *testing.T, path string) (*Gateway, error) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(Config{Addr: "127.0.0.1:0", ShutdownGrace: time.Second}, st)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		g.Close()
		return nil, err
	}
	t.Cleanup(func() { g.Close() })
	return g, nil
}

// A second gateway on one store would split the agents between two
// registries: it refuses to start, saying which gateway holds the store
// and what to do, until the first one stops.
func TestSecondGatewayRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spacefix.db")
	first, err := startOn(t, path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = startOn(t, path)
	host, _ := os.Hostname()
	for _, want := range []string{
		"another gateway is using this store: " + first.me.ID + ", listening on " + first.Addr() + " on host " + host,
		"to run several, start each with --bus nats://HOST:PORT (NATS). Stop the other gateway, or give this one its own --data.",
		"forgotten 15s after it was last seen",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("second gateway's start: %v\nwant it to say %q", err, want)
		}
	}
	first.Close()
	if _, err := startOn(t, path); err != nil {
		t.Errorf("start after the first gateway stopped: %v", err)
	}
}

// A gateway killed without a word leaves its record: on the same host a
// dead process is forgotten at once; elsewhere, once the record is
// beatLost old.
func TestGoneGatewayForgotten(t *testing.T) {
	was := beatEvery
	t.Cleanup(func() { beatEvery = was }) // after the gateways' cleanups
	// 1 s, so beatLost (3 s) outlasts a start under -race on a loaded
	// machine: gw-far, recorded just before the start beside it, must
	// still count as live when that start reads the records (at 100 ms
	// it failed now and then in CI-like runs).
	beatEvery = time.Second
	path := filepath.Join(t.TempDir(), "spacefix.db")
	st, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	old := time.Now().Add(-time.Hour)
	for _, gw := range []store.Gateway{
		{ID: "gw-killed", Host: host, PID: dead.Process.Pid, Addr: "127.0.0.1:1", StartedAt: old},
		{ID: "gw-earlier-run", Host: host, PID: os.Getpid(), Addr: "127.0.0.1:2", StartedAt: old},
	} {
		if err := st.RecordGateway(context.Background(), gw); err != nil {
			t.Fatal(err)
		}
	}
	g, err := startOn(t, path)
	if err != nil {
		t.Fatalf("start over records of gone gateways on this host: %v", err)
	}
	g.Close()
	if gws, _ := st.Gateways(context.Background(), time.Time{}); len(gws) != 0 {
		t.Errorf("records left after a clean stop: %+v", gws)
	}

	if err := st.RecordGateway(context.Background(), store.Gateway{ID: "gw-far", Host: "elsewhere", PID: 1, Addr: "10.0.0.9:8080", StartedAt: old}); err != nil {
		t.Fatal(err)
	}
	if _, err := startOn(t, path); err == nil || !strings.Contains(err.Error(), "gw-far, listening on 10.0.0.9:8080 on host elsewhere (pid 1)") {
		t.Fatalf("start beside a live gateway elsewhere: %v", err)
	}
	time.Sleep(beatLost())
	if _, err := startOn(t, path); err != nil {
		t.Errorf("start once the gateway elsewhere went silent: %v", err)
	}
}
