package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// policyMetrics are the instruments of the projects' policies: the rules'
// decisions and the interceptors' latency.
type policyMetrics struct {
	decisions    *prometheus.CounterVec
	interceptors *prometheus.HistogramVec
}

func newPolicyMetrics(reg *prometheus.Registry) policyMetrics {
	p := policyMetrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spacefix_policy_decisions_total",
			Help: "Decisions of the projects' policy rules, by project, rule, effect (allow, deny, confirm, redact) and mode: enforce, or audit for what an audit-mode rule would have done.",
		}, []string{"project", "rule", "effect", "mode"}),
		interceptors: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "spacefix_interceptor_duration_seconds",
			Help:    "How long interceptor/invoke took, by project, interceptor (server/name) and outcome (ok, or error for a failure or a timeout).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"project", "interceptor", "outcome"}),
	}
	reg.MustRegister(p.decisions, p.interceptors)
	return p
}

// ObserveDecision counts one decision of a policy rule.
func (m *Metrics) ObserveDecision(projectID int64, rule, effect, mode string) {
	m.policy.decisions.WithLabelValues(m.projectName(projectID), rule, effect, mode).Inc()
}

// ObserveInterceptor records one interceptor's run.
func (m *Metrics) ObserveInterceptor(projectID int64, interceptor string, d time.Duration, failed bool) {
	outcome := "ok"
	if failed {
		outcome = "error"
	}
	m.policy.interceptors.WithLabelValues(m.projectName(projectID), interceptor, outcome).Observe(d.Seconds())
}
