package metrics

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlite"
)

// TestMetricsLabels: tools are counted by name; resource URIs never become
// labels; a project the store does not know is labelled by its id.
func TestMetricsLabels(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p, err := st.CreateProject(context.Background(), "shop")
	if err != nil {
		t.Fatal(err)
	}
	m := New(Options{Store: st, Dropped: func() int64 { return 4 }, Buffered: func() int64 { return 17 }, Retries: func() int64 { return 3 }})
	m.ObserveCall(store.Call{ProjectID: p.ID, Kind: "tool", Name: "get_order", Outcome: store.OutcomeOK, Duration: 30 * time.Millisecond})
	m.ObserveCall(store.Call{ProjectID: p.ID, Kind: "resource", Name: "orders://1042", Outcome: store.OutcomeOK})
	m.ObserveCall(store.Call{ProjectID: 99, Kind: "tool", Name: "get_order", Outcome: store.OutcomeTimeout})

	want := `
# HELP spacefix_calls_total Tool calls that reached an agent, by project, exposed tool name and outcome (ok, error, timeout, cancelled, disconnected).
# TYPE spacefix_calls_total counter
spacefix_calls_total{outcome="ok",project="shop",tool="get_order"} 1
spacefix_calls_total{outcome="timeout",project="99",tool="get_order"} 1
# HELP spacefix_reads_total Resource reads and prompt gets that reached an agent, by project, kind (resource, prompt) and outcome.
# TYPE spacefix_reads_total counter
spacefix_reads_total{kind="resource",outcome="ok",project="shop"} 1
# HELP spacefix_call_log_dropped_total Call records lost before they reached the store (call log and usage): the queue and buffer were full, or the gateway stopped while the store refused writes. Above zero means lost metering; see the dashboard and the gateway's log.
# TYPE spacefix_call_log_dropped_total counter
spacefix_call_log_dropped_total 4
# HELP spacefix_call_log_buffered Call records in memory, not yet written to the store: queued, or kept after a failed write to be written again. It grows while the store refuses writes; records are lost (spacefix_call_log_dropped_total) only once the buffer is full.
# TYPE spacefix_call_log_buffered gauge
spacefix_call_log_buffered 17
# HELP spacefix_call_log_retries_total Call log writes that repeated a failed one (100 ms doubling to 5 s apart while the store refuses writes).
# TYPE spacefix_call_log_retries_total counter
spacefix_call_log_retries_total 3
`
	if err := testutil.GatherAndCompare(m.reg, strings.NewReader(want), "spacefix_calls_total", "spacefix_reads_total",
		"spacefix_call_log_dropped_total", "spacefix_call_log_buffered", "spacefix_call_log_retries_total"); err != nil {
		t.Error(err)
	}
}
