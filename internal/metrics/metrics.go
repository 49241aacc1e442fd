// Package metrics keeps the gateway's Prometheus metrics. Each gateway owns
// a registry of its own (never the global default), so several gateways in
// one process, as in tests, do not clash.
//
// Labels carry project names and exposed tool names, never keys or
// secrets. Resource URIs are not labels: a resource template can make
// them without bound, so reads are counted per project and kind only.
package metrics

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/spacefix/spacefix/internal/recovery"
	"github.com/spacefix/spacefix/internal/store"
)

// Options say where the metrics read live state. Every function is called
// at scrape time and must be safe for concurrent use.
type Options struct {
	// Store names projects for labels. Required.
	Store store.Projects
	// Agents returns how many agent replicas are connected, by project
	// id; nil means none are.
	Agents func() map[int64]int
	// Sessions returns how many MCP sessions are open, by protocol era;
	// nil means none are.
	Sessions func() map[string]int
	// Dropped returns how many call records were lost; nil means none.
	Dropped func() int64
	// Bus reports whether the bus between gateways (NATS) is connected;
	// nil means the gateway has no bus, and spacefix_bus_connected is not
	// exported.
	Bus func() bool
	// Buffered returns how many call records wait in memory to be
	// written; nil means none.
	Buffered func() int64
	// Retries returns how many call log writes repeated a failed one;
	// nil means none.
	Retries func() int64
	// CacheHits returns how many tool calls the cache answered; nil means
	// none.
	CacheHits func() int64
}

// Metrics is the gateway's registry and the instruments the request path
// updates. Every method is safe for concurrent use.
type Metrics struct {
	reg      *prometheus.Registry
	st       store.Projects
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	reads    *prometheus.CounterVec
	inflight prometheus.Gauge
	answers  *prometheus.CounterVec
	policy   policyMetrics // policy.go

	mu    sync.RWMutex
	names map[int64]string // project names by id; projects are never renamed
}

// New returns the metrics of one gateway. It panics without a Store.
func New(opts Options) *Metrics {
	if opts.Store == nil {
		panic("metrics.New: Store is required")
	}
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		st:  opts.Store,
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spacefix_calls_total",
			Help: "Tool calls that reached an agent, by project, exposed tool name and outcome (ok, error, timeout, cancelled, disconnected).",
		}, []string{"project", "tool", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "spacefix_call_duration_seconds",
			Help:    "How long tool calls that reached an agent took, from delivery to result, by project and tool.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"project", "tool"}),
		reads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spacefix_reads_total",
			Help: "Resource reads and prompt gets that reached an agent, by project, kind (resource, prompt) and outcome.",
		}, []string{"project", "kind", "outcome"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "spacefix_http_requests_in_flight",
			Help: "HTTP requests being served now, open SSE streams and agent connections included.",
		}),
		answers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spacefix_http_responses_total",
			Help: "HTTP responses by status code: 421 (a Host not allowed), 413 (a body over the limit), 429 (a key over its sessions or requests in flight) and 5xx show refusals and faults.",
		}, []string{"code"}),
		names: make(map[int64]string),
	}
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.calls, m.duration, m.reads, m.inflight, m.answers,
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "spacefix_panics_recovered_total",
			Help: "Panics recovered in a request path (MCP methods, HTTP handlers, agent connections); each is logged at ERROR with its stack. Above zero is a bug to report.",
		}, func() float64 { return float64(recovery.Count()) }),
		&agentsCollector{m: m, agents: opts.Agents},
		&sessionsCollector{sessions: opts.Sessions},
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "spacefix_call_log_dropped_total",
			Help: "Call records lost before they reached the store (call log and usage): the queue and buffer were full, or the gateway stopped while the store refused writes. Above zero means lost metering; see the dashboard and the gateway's log.",
		}, func() float64 {
			if opts.Dropped == nil {
				return 0
			}
			return float64(opts.Dropped())
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "spacefix_call_log_buffered",
			Help: "Call records in memory, not yet written to the store: queued, or kept after a failed write to be written again. It grows while the store refuses writes; records are lost (spacefix_call_log_dropped_total) only once the buffer is full.",
		}, func() float64 { return float64(orZero(opts.Buffered)) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "spacefix_call_log_retries_total",
			Help: "Call log writes that repeated a failed one (100 ms doubling to 5 s apart while the store refuses writes).",
		}, func() float64 { return float64(orZero(opts.Retries)) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "spacefix_cache_hits_total",
			Help: "Tool calls answered from the gateway's result cache: they reach no agent and are not in spacefix_calls_total, the call log or usage.",
		}, func() float64 {
			if opts.CacheHits == nil {
				return 0
			}
			return float64(opts.CacheHits())
		}),
	)
	m.policy = newPolicyMetrics(m.reg)
	if opts.Bus != nil {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "spacefix_bus_connected",
			Help: "1 while the gateway is connected to the bus (NATS), 0 while it is not: it then serves only the agents connected to it, and changes made on other gateways reach it when the bus is back.",
		}, func() float64 {
			if opts.Bus() {
				return 1
			}
			return 0
		}))
	}
	return m
}

// orZero returns what f returns, or 0 if f is nil.
func orZero(f func() int64) int64 {
	if f == nil {
		return 0
	}
	return f()
}

// ObserveCall counts one call record; the call log calls it for every
// record it is given ([store.CallLogOptions.Observe]).
func (m *Metrics) ObserveCall(c store.Call) {
	if c.Replica == "" && c.Policy != "" && !c.Billable && !c.Replay {
		// Refused by the project's policy before any agent: counted in
		// spacefix_policy_decisions_total, not as a call.
		return
	}
	project := m.projectName(c.ProjectID)
	if c.Kind != "tool" {
		m.reads.WithLabelValues(project, c.Kind, c.Outcome).Inc()
		return
	}
	m.calls.WithLabelValues(project, c.Name, c.Outcome).Inc()
	m.duration.WithLabelValues(project, c.Name).Observe(c.Duration.Seconds())
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// InFlight counts the requests next serves in spacefix_http_requests_in_flight,
// and their answers by status code in spacefix_http_responses_total.
func (m *Metrics) InFlight(next http.Handler) http.Handler {
	return promhttp.InstrumentHandlerInFlight(m.inflight, promhttp.InstrumentHandlerCounter(m.answers, next))
}

// projectName returns the label of a project: its name, or its id when the
// store cannot say. The answer is kept either way, so a store in trouble
// costs one lookup per project, not one per call; the next scrape, which
// lists projects, puts the name in place of an id.
func (m *Metrics) projectName(id int64) string {
	m.mu.RLock()
	name, ok := m.names[id]
	m.mu.RUnlock()
	if ok {
		return name
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	name = strconv.FormatInt(id, 10)
	if p, err := m.st.ProjectByID(ctx, id); err == nil {
		name = p.Name
	}
	m.remember(id, name)
	return name
}

func (m *Metrics) remember(id int64, name string) {
	m.mu.Lock()
	m.names[id] = name
	m.mu.Unlock()
}

// agentsCollector reports connected replicas per project at scrape time,
// zero for projects with none, so that an alert on "no agent" can fire.
type agentsCollector struct {
	m      *Metrics
	agents func() map[int64]int
}

var agentsDesc = prometheus.NewDesc("spacefix_agents_connected",
	"Agent replicas connected now, by project.", []string{"project"}, nil)

func (c *agentsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- agentsDesc }

func (c *agentsCollector) Collect(ch chan<- prometheus.Metric) {
	counts := map[int64]int{}
	if c.agents != nil {
		counts = c.agents()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if ps, err := c.m.st.Projects(ctx); err == nil {
		for _, p := range ps {
			c.m.remember(p.ID, p.Name)
			if _, ok := counts[p.ID]; !ok {
				counts[p.ID] = 0
			}
		}
	}
	for id, n := range counts {
		ch <- prometheus.MustNewConstMetric(agentsDesc, prometheus.GaugeValue, float64(n), c.m.projectName(id))
	}
}

// sessionsCollector reports open MCP sessions by era at scrape time.
type sessionsCollector struct{ sessions func() map[string]int }

var sessionsDesc = prometheus.NewDesc("spacefix_sessions",
	"MCP sessions open now, by era: the protocol version a 2025 session negotiated; 2026-07-28 requests are stateless and show only while served.",
	[]string{"era"}, nil)

func (c *sessionsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- sessionsDesc }

func (c *sessionsCollector) Collect(ch chan<- prometheus.Metric) {
	if c.sessions == nil {
		return
	}
	for era, n := range c.sessions() {
		ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(n), era)
	}
}
