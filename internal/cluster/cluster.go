// Package cluster joins the gateways that share a store over a NATS bus, so
// that a client of any gateway sees and calls the agents connected to all
// of them.
//
// Each gateway announces the replicas whose connections it holds (subject
// spacefix.rep: up, down, changed) and a heartbeat (spacefix.hb) that
// counts them. Every other gateway mirrors those replicas into its own
// registry, with a [agents.Conn] that carries calls over the bus to the
// holder (spacefix.gw.<id>.call, answered frame by frame on the caller's
// reply subject; cancel, answers to questions and close on
// spacefix.gw.<id>.ctl). A gateway whose heartbeat stops is dropped after
// three intervals: its replicas leave every registry and their calls in
// flight end as disconnected. A heartbeat whose count differs from what a
// gateway mirrors asks the holder to announce what differs again, so lost
// announcements, restarts and reconnects heal by themselves (see
// [Cluster.onHeartbeat]).
//
// Saved-state changes (settings, tool edits, revoked keys) published on one
// gateway's change bus are broadcast (spacefix.changes) and published on
// every other's, so caches empty and views rebuild everywhere at once.
// Each gateway numbers the changes it broadcasts, and its heartbeat says
// the last number: a gateway that sees a number skipped, or its bus
// connection come back, may have missed one, and re-reads what it caches
// from the store (a settings change for every project, see
// [Options.Projects]).
//
// Core NATS is enough: nothing here needs persistence. A frame lost on the
// bus is a call that times out, as a frame lost on an agent's socket is.
//
// The package holds one concept a file: this one the [Cluster] type, its
// [Options], joining and leaving the bus and the subjects it listens on;
// membership.go the other gateways and their heartbeats; replicas.go the
// replicas this gateway announces; mirror.go those of the others mirrored
// here; remote.go the calls carried to them; changes.go the saved-state
// changes; rates.go the shared rate-limit counts; tickets.go registration
// tickets; largemsg.go messages too large for one NATS message, sent in
// parts; recent.go the cancels that came before their calls.
package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/changes"
	"github.com/spacefix/spacefix/internal/ratelimit"
	"github.com/spacefix/spacefix/internal/recovery"
	"github.com/spacefix/spacefix/internal/schema"
)

// Subjects.
const (
	subjReplicas  = "spacefix.rep"
	subjHeartbeat = "spacefix.hb"
	subjChanges   = "spacefix.changes"
	subjTickets   = "spacefix.ticket"
	subjRates     = "spacefix.rate"
)

func subjCall(gw string) string  { return "spacefix.gw." + gw + ".call" }
func subjCtl(gw string) string   { return "spacefix.gw." + gw + ".ctl" }
func subjSync(gw string) string  { return "spacefix.gw." + gw + ".sync" }
func subjReply(gw string) string { return "spacefix.reply." + gw }

// Options configure a [Cluster].
type Options struct {
	// URL is the NATS server list, nats://host:port[,nats://…].
	URL string
	// Gateway is this gateway's id; Addr the address it listens on.
	Gateway, Addr string
	// Registry is this gateway's registry: the cluster mirrors the other
	// gateways' replicas into it. The registry's Observer must be the
	// cluster (see [Cluster.ReplicaUp]).
	Registry *agents.Registry
	// Changes is this gateway's change bus.
	Changes *changes.Bus
	// Compile compiles the input schemas of a registration another gateway
	// announced (it checked the registration already).
	Compile func(*agentproto.Registration) (map[string]*schema.Schema, error)
	// Redeem takes a registration ticket this gateway issued, for a
	// WebSocket that reached another gateway; nil answers no ticket.
	Redeem func(ticket, keyID string) (*agentproto.Registration, bool)
	// Limiter is this gateway's rate limiter, shared (ratelimit.Share):
	// the calls it allows go to the others every RateEvery, and theirs
	// count here. Nil: rate limits stay per gateway.
	Limiter *ratelimit.Limiter
	// Projects lists the store's projects: when this gateway may have
	// missed a change another one made, it publishes a settings change for
	// each on Changes, so that what it caches is read again. Nil: nothing
	// is re-read.
	Projects func(context.Context) ([]int64, error)
	// Heartbeat is how often to say this gateway is alive; 0 means
	// [DefaultHeartbeat].
	Heartbeat time.Duration
	Logger    *slog.Logger
	// PeerGone, if set, is told the id of each gateway dropped for its
	// silence (the tasks it ran fail); it must not block for long.
	PeerGone func(gatewayID string)
	// Peers signs the address this gateway advertises in its heartbeats
	// and checks the others': an address that does not verify is not
	// used ([Cluster.PeerAddr], [Cluster.IsPeerIP]), so requests are
	// forwarded only to gateways of the same key file. Nil: addresses are
	// neither signed nor checked.
	Peers *ForwardAuth
}

// Cluster is this gateway's membership of the bus.
type Cluster struct {
	opts Options
	log  *slog.Logger
	nc   *nats.Conn
	subs []*nats.Subscription
	stop chan struct{}
	wg   sync.WaitGroup

	mu    sync.Mutex
	local map[string]*agents.Replica // replicas this gateway holds, by id
	peers members                    // other gateways, by id
	// peerIPs are the IPs the peers advertise, for IsPeerIP on the accept
	// path without mu; rebuilt under mu when they change.
	peerIPs atomic.Pointer[[]netip.Addr]
	calls   map[string]*remoteCall // calls this gateway sent over the bus, by reply token
	relays  map[string]*relay      // calls this gateway serves for others, by replica/call id
	// cancelled are the calls (replica/call id) whose cancel came before
	// the call: it is refused when it comes.
	cancelled recentIDs
	seq       uint64
	// closed: Close began. New work (relays, resyncs) starts only while
	// it is false, under mu, so that Close's wg.Wait never runs while the
	// WaitGroup is added to.
	closed bool

	parts parts // messages sent in parts, being put together

	// annMu orders this gateway's replica announcements: each takes the
	// next repSeq and is published under it, so a heartbeat's digest and
	// sequence number say the same state, and an answer to a resync never
	// announces a replica after its "down".
	annMu  sync.Mutex
	repSeq uint64

	// chMu orders this gateway's broadcast changes as they are numbered.
	chMu  sync.Mutex
	chSeq uint64

	// merged counts the calls other gateways allowed that this one's
	// limiter counted (see RatesMerged).
	merged atomic.Int64

	// downSince is when the bus connection was lost (Unix nanoseconds),
	// 0 while it is up.
	downSince atomic.Int64

	// reread: a re-read of the store's projects is running; rereadAgain:
	// another was asked for meanwhile. Guarded by mu.
	reread, rereadAgain bool
}

// Join connects to NATS and starts serving this gateway's part of the bus.
// It fails with an error that says what to do if NATS cannot be reached.
func Join(ctx context.Context, opts Options) (*Cluster, error) {
	c := newCluster(opts)
	if err := c.connect(ctx); err != nil {
		return nil, err
	}
	c.start()
	return c, nil
}

// newCluster returns this gateway's part of the bus, not yet on it: its
// bookkeeping works, nothing is sent.
func newCluster(opts Options) *Cluster {
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	c := &Cluster{
		opts: opts, log: opts.Logger, stop: make(chan struct{}),
		local: make(map[string]*agents.Replica), peers: make(members),
		calls: make(map[string]*remoteCall), relays: make(map[string]*relay),
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	c.log = c.log.With("gateway", opts.Gateway)
	return c
}

// connect connects to NATS and subscribes to this gateway's subjects,
// returning once the server has them.
func (c *Cluster) connect(ctx context.Context) error {
	url := c.opts.URL
	nc, err := nats.Connect(url, c.natsOptions()...)
	if err != nil {
		return fmt.Errorf("connect to the bus %s: %w; check that NATS is running and reachable", redactURL(url), err)
	}
	c.nc = nc
	if err := c.subscribe(); err != nil {
		nc.Close()
		return err
	}
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = nc.FlushWithContext(fctx)
	cancel()
	if err != nil {
		nc.Close()
		return fmt.Errorf("connect to the bus %s: %w", redactURL(url), err)
	}
	return nil
}

// natsOptions are the connection's options: reconnect for ever, and note
// when the bus is lost and back (a gateway that was cut off may have
// missed changes).
func (c *Cluster) natsOptions() []nats.Option {
	return []nats.Option{
		nats.Name("spacefix " + c.opts.Gateway),
		nats.Timeout(5 * time.Second),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			c.downSince.CompareAndSwap(0, time.Now().UnixNano())
			c.log.Warn("bus disconnected; reconnecting; meanwhile calls reach only agents connected to this gateway", "bus", redactURL(c.opts.URL), "err", err)
		}),
		nats.ReconnectHandler(func(*nats.Conn) {
			c.downSince.Store(0)
			c.log.Info("bus reconnected; re-reading what this gateway caches from the store, in case it missed changes")
			c.rereadAll("the bus")
		}),
	}
}

// subscribe subscribes each subject this gateway listens on to its
// handler, which sees whole messages and never panics out.
func (c *Cluster) subscribe() error {
	gw := c.opts.Gateway
	for subj, fn := range map[string]nats.MsgHandler{
		subjReplicas:         c.onReplica,
		subjHeartbeat:        c.onHeartbeat,
		subjChanges:          c.onChange,
		subjCall(gw):         c.onCall,
		subjCtl(gw):          c.onCtl,
		subjSync(gw):         c.onSync,
		subjReply(gw) + ".*": c.onReply,
		subjTickets:          c.onTicket,
		subjRates:            c.onRates,
	} {
		sub, err := c.nc.Subscribe(subj, c.guard(subj, c.assemble(fn)))
		if err != nil {
			return fmt.Errorf("subscribe to %s: %w", subj, err)
		}
		sub.SetPendingLimits(-1, 256<<20)
		c.subs = append(c.subs, sub)
	}
	return nil
}

// start runs the heartbeat and the rate-sharing loops and broadcasts this
// gateway's changes, until Close; the first heartbeat goes at once, so the
// others learn of this gateway and announce to it.
func (c *Cluster) start() {
	unsub := c.opts.Changes.Subscribe(c.broadcastChange)
	c.wg.Add(2)
	go func() {
		defer c.wg.Done()
		defer unsub()
		c.beat()
	}()
	go func() {
		defer c.wg.Done()
		c.shareRates()
	}()
	c.heartbeat()
}

// guard recovers a panic in a bus handler, so a malformed frame from a
// peer never ends the gateway.
func (c *Cluster) guard(subj string, fn nats.MsgHandler) nats.MsgHandler {
	return func(m *nats.Msg) { recovery.Do(c.log, "bus "+subj, func() { fn(m) }) }
}

// Unreachable reports whether the bus is unreachable now, and since
// when. A gateway without the bus still serves its own agents' calls: it
// is degraded, not down.
func (c *Cluster) Unreachable() (since time.Time, down bool) {
	if c.nc.Status() == nats.CONNECTED {
		return time.Time{}, false
	}
	if ns := c.downSince.Load(); ns != 0 {
		return time.Unix(0, ns), true
	}
	return time.Now(), true
}

// Close leaves the bus: the other gateways drop this one's replicas at
// once, and calls this gateway sent over the bus end as disconnected.
// It first stops taking new work (calls that arrive are answered as
// disconnected), then waits for the relays and loops it runs.
func (c *Cluster) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	var ids []string
	for id := range c.local {
		ids = append(ids, id)
	}
	peers := c.peers
	c.peers = make(members)
	c.peerIPs.Store(nil)
	c.mu.Unlock()
	close(c.stop)
	c.wg.Wait()
	for _, id := range ids {
		c.publish(subjReplicas, repMsg{Op: "down", Gw: c.opts.Gateway, Rep: repInfo{ID: id}})
	}
	for _, p := range peers {
		c.dropPeer(p, "gateway shutting down")
	}
	c.nc.Drain()
}

// publish sends v, as JSON, on subj; a failure is logged, as a message
// lost on the bus is healed by what follows it.
func (c *Cluster) publish(subj string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		c.log.Error("encode a bus message", "subject", subj, "err", err)
		return
	}
	if err := c.send(subj, "", b); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		c.log.Warn("publish on the bus", "subject", subj, "err", err)
	}
}

// redactURL drops credentials from a NATS URL list for messages.
func redactURL(u string) string {
	parts := strings.Split(u, ",")
	for i, p := range parts {
		if at := strings.LastIndex(p, "@"); at >= 0 {
			if s := strings.Index(p, "://"); s >= 0 && s < at {
				parts[i] = p[:s+3] + "xxxxx" + p[at:]
			}
		}
	}
	return strings.Join(parts, ",")
}
