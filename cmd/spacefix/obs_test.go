package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestLogFormatJSON runs serve with --log-format json: every line it logs
// is a JSON object with time, level and msg.
func TestLogFormatJSON(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  string
	}{
		{"flag", []string{"--log-format", "json"}, ""},
		{"env", nil, "json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("SPACEFIX_LOG_FORMAT", tc.env)
			logs := serveLogs(t, tc.args...)
			lines := strings.Split(strings.TrimSpace(logs), "\n")
			if len(lines) < 2 {
				t.Fatalf("serve logged %d lines, want at least listening and stopped:\n%s", len(lines), logs)
			}
			var msgs []string
			for _, line := range lines {
				var rec struct {
					Time  time.Time `json:"time"`
					Level string    `json:"level"`
					Msg   string    `json:"msg"`
				}
				if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Time.IsZero() || rec.Level == "" || rec.Msg == "" {
					t.Errorf("log line is not a JSON record with time, level and msg (%v): %s", err, line)
				}
				msgs = append(msgs, rec.Msg)
			}
			if !strings.Contains(strings.Join(msgs, "|"), "gateway listening") {
				t.Errorf("no \"gateway listening\" record among %q", msgs)
			}
		})
	}
}

func TestLogFormatRefused(t *testing.T) {
	err := run(context.Background(), []string{"serve", "--log-format", "yaml", "--data", filepath.Join(t.TempDir(), "s.db")}, &syncBuffer{}, &syncBuffer{})
	want := `serve: --log-format "yaml": want text or json`
	if _, ok := err.(usageError); !ok || err.Error() != want {
		t.Errorf("serve --log-format yaml: %v, want the usage error %q", err, want)
	}
}

// serveLogs runs serve with extra args until it has started, stops it and
// returns its log.
func serveLogs(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, logs syncBuffer
	done := make(chan error, 1)
	args = append([]string{"serve", "--addr", "127.0.0.1:0", "--data", filepath.Join(t.TempDir(), "s.db")}, args...)
	go func() { done <- run(ctx, args, &out, &logs) }()
	started := regexp.MustCompile(`MCP endpoint  http://`)
	deadline := time.Now().Add(10 * time.Second)
	for !started.MatchString(out.String()) {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("serve did not start:\n%s\n%s", out.String(), logs.String())
		}
		time.Sleep(10 * time.Millisecond) // poll interval, bounded by the deadline: a real gateway on a socket and a database, which synctest cannot fake
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
	return logs.String()
}
