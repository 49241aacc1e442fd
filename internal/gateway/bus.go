package gateway

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spacefix/spacefix/internal/agentfront"
	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/cluster"
)

// joinBus joins the other gateways over --bus, if set; ctx bounds the
// joining.
func (g *Gateway) joinBus(ctx context.Context) error {
	if g.cfg.Bus == "" {
		return nil
	}
	c, err := cluster.Join(ctx, cluster.Options{
		URL: g.cfg.Bus, Gateway: g.me.ID, Addr: g.me.Addr,
		Registry: g.reg, Changes: g.changes, Compile: agentfront.Compile, Redeem: g.agents.RedeemTicket, Limiter: g.limiter,
		Projects: g.projectIDs, Heartbeat: g.cfg.BusHeartbeat, Logger: g.log, PeerGone: g.peerGone,
		Peers: g.peers, // forwards go only to addresses signed with the key file
	})
	if err != nil {
		return err
	}
	g.cluster.Store(c)
	g.log.Info("joined the bus", "gateway", g.me.ID)
	return nil
}

// projectIDs lists the store's projects, for the cluster to re-read what
// this gateway caches of them when it may have missed a change.
func (g *Gateway) projectIDs(ctx context.Context) ([]int64, error) {
	ps, err := g.store.Projects(ctx)
	if err != nil {
		return nil, err
	}
	ids := make([]int64, len(ps))
	for i, p := range ps {
		ids[i] = p.ID
	}
	return ids, nil
}

// busDegraded returns what /readyz adds to "ready" while the bus is
// unreachable, or "". Without the bus the gateway still serves: its own
// agents' calls, the dashboard, sign-ins. It is degraded, not unready, so
// that a NATS outage behind a load balancer does not take every gateway
// out of rotation.
func (g *Gateway) busDegraded() string {
	c := g.cluster.Load()
	if c == nil {
		return ""
	}
	since, down := c.Unreachable()
	if !down {
		return ""
	}
	return " (degraded: bus unreachable since " + since.UTC().Format(time.RFC3339) +
		"; calls reach only agents connected to this gateway)"
}

// busConnected returns the spacefix_bus_connected gauge's source, nil
// without --bus.
func (g *Gateway) busConnected() func() bool {
	if g.cfg.Bus == "" {
		return nil
	}
	return func() bool {
		c := g.cluster.Load()
		if c == nil {
			return false
		}
		_, down := c.Unreachable()
		return !down
	}
}

// Cluster returns this gateway's membership of the bus, nil without --bus.
func (g *Gateway) Cluster() *cluster.Cluster { return g.cluster.Load() }

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

// forwardSessions sends a request of an MCP session (protocol 2025) that
// another gateway owns to that gateway, and so a 2026-07-28 retry that
// carries the requestState of a call another gateway holds: sessions and
// calls waiting for the user live in the memory of the gateway that made
// them, and a load balancer without stickiness sends their requests
// anywhere. A session or call whose gateway is gone is answered here (the
// spec's 404; "not pending any more") and the client starts again.
//
// A request that says it was forwarded is served here, as a request is
// forwarded at most once, but only if its signature verifies (see
// [cluster.ForwardAuth]): a client cannot pose as a peer. Without a bus
// nothing is forwarded and the forwarding headers are only deleted.
func (g *Gateway) forwardSessions(next http.Handler) http.Handler {
	if g.cfg.Bus == "" {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			cluster.StripForwarding(r.Header)
			next.ServeHTTP(w, r)
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cluster.IsForwarded(r.Header) {
			if err := g.peers.Verify(r); err != nil {
				g.refuseForward(w, r, err)
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		c := g.cluster.Load()
		if c == nil {
			next.ServeHTTP(w, r)
			return
		}
		owner, _, _ := strings.Cut(r.Header.Get("Mcp-Session-Id"), ".")
		if owner == "" && r.Method == http.MethodPost {
			owner = heldCallOwner(r)
		}
		if owner == "" || owner == g.me.ID {
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

// msgForwardRefused is what the sender of a forward that does not verify
// reads.
const msgForwardRefused = "This request carries the headers a Spacefix gateway adds when it forwards a request to another gateway, but its signature does not verify here. MCP clients must not send X-Spacefix-Forwarded-By or X-Spacefix-Forward-Auth; gateways of one cluster must share the same --secret-key-file and keep their clocks within 30 seconds of each other."

// refuseForward answers a forward that does not verify with 403, and
// logs who sent it and why, never what its headers hold.
func (g *Gateway) refuseForward(w http.ResponseWriter, r *http.Request, why error) {
	g.log.Warn("refused a request forwarded by another gateway: "+why.Error(), "peer", r.RemoteAddr, "path", r.URL.Path)
	http.Error(w, msgForwardRefused, http.StatusForbidden)
}

// statePeek is how much of a stateless request's body is read to find a
// requestState; a longer body is served where it landed.
const statePeek = 1 << 20

// heldCallOwner returns the gateway id a stateless request's requestState
// starts with, or "". It reads at most statePeek bytes of the body and
// puts them back.
func heldCallOwner(r *http.Request) string {
	if r.Header.Get("Mcp-Session-Id") != "" || r.Body == nil {
		return ""
	}
	buf, err := io.ReadAll(io.LimitReader(r.Body, statePeek))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(buf), r.Body), r.Body}
	if err != nil {
		return ""
	}
	i := bytes.Index(buf, []byte(`"requestState"`))
	if i < 0 {
		return ""
	}
	rest := bytes.TrimLeft(buf[i+len(`"requestState"`):], " \t\r\n")
	rest, ok := bytes.CutPrefix(rest, []byte(":"))
	if !ok {
		return ""
	}
	rest, ok = bytes.CutPrefix(bytes.TrimLeft(rest, " \t\r\n"), []byte(`"gw-`))
	if !ok {
		return ""
	}
	id, _, ok := bytes.Cut(rest, []byte("."))
	if !ok || len(id) > 32 {
		return ""
	}
	return "gw-" + string(id)
}

// proxyTo returns a reverse proxy to another gateway's listener. It keeps
// the client's Host (every gateway answers the same names), flushes at
// once (SSE carries progress) and marks the request as forwarded, signed
// with the key file's key.
func (g *Gateway) proxyTo(addr string) http.Handler {
	target := &url.URL{Scheme: "http", Host: addr}
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
			g.peers.Sign(pr.Out, g.me.ID)
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

// peerGone fails the MCP tasks a gateway that went silent was running.
func (g *Gateway) peerGone(id string) {
	go func() {
		ctx, cancel := context.WithTimeout(g.ctx, 30*time.Second)
		defer cancel()
		if err := g.tasks.FailGateway(ctx, id); err != nil {
			g.log.Warn("fail the tasks of a gateway that went silent", "peer", id, "err", err)
		}
	}()
}
