package metrics

import "github.com/prometheus/client_golang/prometheus"

// ConnStats is what the gateway's listener counts.
type ConnStats struct {
	Open    int   // connections open now
	Max     int   // the cap, --max-conns
	Refused int64 // connections closed at once: their address was over --max-conns-per-addr
	Waited  int64 // connections that waited to be accepted: Max were open
}

// WatchConns exposes the listener's counts, read from stats at scrape
// time; stats must be safe for concurrent use. Call it once.
func (m *Metrics) WatchConns(stats func() ConnStats) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "spacefix_connections_open",
			Help: "Client connections open now: HTTP (SSE streams included) and agent WebSockets.",
		}, func() float64 { return float64(stats().Open) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "spacefix_connections_max",
			Help: "The cap on open connections (--max-conns; by default the file limit less a reserve). Over it, new connections wait.",
		}, func() float64 { return float64(stats().Max) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "spacefix_connections_refused_total",
			Help: "Connections closed at once because their client address had --max-conns-per-addr open.",
		}, func() float64 { return float64(stats().Refused) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "spacefix_connections_waited_total",
			Help: "Connections that had to wait to be accepted because --max-conns were open. Above zero: raise --max-conns if the file limit allows.",
		}, func() float64 { return float64(stats().Waited) }),
	)
}
