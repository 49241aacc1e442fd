package gateway

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"

	"github.com/spacefix/spacefix/internal/agentfront"
	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/cluster"
)

// joinBus joins the other gateways over --bus, if set.
func (g *Gateway) joinBus() error {
	if g.cfg.Bus == "" {
		return nil
	}
	c, err := cluster.Join(g.ctx, cluster.Options{
		URL: g.cfg.Bus, Gateway: g.me.ID, Addr: g.me.Addr,
		Registry: g.reg, Changes: g.changes, Compile: agentfront.Compile, Redeem: g.agents.RedeemTicket,
		Heartbeat: g.cfg.BusHeartbeat, Logger: g.log,
	})
	if err != nil {
		return err
	}
	g.cluster.Store(c)
	g.log.Info("joined the bus", "gateway", g.me.ID)
	return nil
}

// redeemElsewhere asks the other gateways for a ticket this one did not
// issue.
func (g *Gateway) redeemElsewhere(ctx context.Context, ticket, keyID string) (*agentproto.Registration, bool) {
	c := g.cluster.Load()
	if c == nil {
		return nil, false
	}
	return c.Redeem(ctx, ticket, keyID)
}

// observer tells the bus of the registry's replicas; without a bus it
// does nothing.
type observer struct{ g *Gateway }

func (o observer) ReplicaUp(rep *agents.Replica) {
	if c := o.g.cluster.Load(); c != nil {
		c.ReplicaUp(rep)
	}
}

func (o observer) ReplicaDown(rep *agents.Replica) {
	if c := o.g.cluster.Load(); c != nil {
		c.ReplicaDown(rep)
	}
}

func (o observer) ReplicaChanged(rep *agents.Replica) {
	if c := o.g.cluster.Load(); c != nil {
		c.ReplicaChanged(rep)
	}
}

// forwardedHeader marks a request one gateway forwarded to another, which
// serves it whatever it finds: a request is forwarded at most once.
const forwardedHeader = "X-Spacefix-Forwarded-By"

// forwardSessions sends a request of an MCP session (protocol 2025) that
// another gateway owns to that gateway: sessions live in the memory of
// the gateway that made them, and a load balancer without stickiness
// sends a session's requests anywhere. A session whose owner is gone is
// answered here, with the spec's 404, and the client starts a new one.
func (g *Gateway) forwardSessions(next http.Handler) http.Handler {
	if g.cfg.Bus == "" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := g.cluster.Load()
		sid := r.Header.Get("Mcp-Session-Id")
		owner, _, ok := strings.Cut(sid, ".")
		if c == nil || !ok || owner == g.me.ID || r.Header.Get(forwardedHeader) != "" {
			next.ServeHTTP(w, r)
			return
		}
		addr, ok := c.PeerAddr(owner)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		g.proxyTo(addr).ServeHTTP(w, r)
	})
}

// proxyTo returns a reverse proxy to another gateway's listener. It keeps
// the client's Host (every gateway answers the same names), flushes at
// once (SSE carries progress) and marks the request as forwarded.
func (g *Gateway) proxyTo(addr string) http.Handler {
	target := &url.URL{Scheme: "http", Host: addr}
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
			pr.Out.Header.Set(forwardedHeader, g.me.ID)
		},
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			g.log.Warn("forward an MCP session's request to the gateway that owns it", "to", addr, "err", err)
			http.Error(w, "The gateway that holds this MCP session cannot be reached; start a new session.", http.StatusBadGateway)
		},
	}
}

// advertiseAddr is the address the other gateways reach this one at:
// --advertise-addr, else the listen address, with an unspecified IP
// (0.0.0.0, ::) replaced by this host's first non-loopback address.
func advertiseAddr(configured string, ln net.Addr) string {
	if configured != "" {
		return configured
	}
	host, port, err := net.SplitHostPort(ln.String())
	if err != nil {
		return ln.String()
	}
	if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
		return ln.String()
	}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return net.JoinHostPort(n.IP.String(), port)
		}
	}
	if h, err := os.Hostname(); err == nil {
		return net.JoinHostPort(h, port)
	}
	return ln.String()
}
