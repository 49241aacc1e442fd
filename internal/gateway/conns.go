package gateway

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spacefix/spacefix/internal/metrics"
)

// Deriving the default of Config.MaxConns from the process's file limit:
// a tenth of the limit, at least reserveMin and at most reserveMax
// descriptors, stays free for the store, the bus, outgoing fetches and
// log files. A limit that cannot be read (Windows has none to read) gives
// fallbackMaxConns.
const (
	reserveMin       = 64
	reserveMax       = 1024
	fallbackMaxConns = 20_000
	fileLimitCeiling = 1 << 20 // "unlimited" and the like
)

// DefaultMaxConns is the default of Config.MaxConns on this process: its
// file limit (RLIMIT_NOFILE, which Go raises to the hard limit at start)
// less what is kept for the rest of the gateway.
func DefaultMaxConns() int { return maxConnsFor(fileLimit()) }

// maxConnsFor returns the connection cap for a file limit; 0 means the
// limit is unknown.
func maxConnsFor(limit uint64) int {
	if limit == 0 {
		return fallbackMaxConns
	}
	limit = min(limit, fileLimitCeiling)
	reserve := min(max(limit/10, reserveMin), reserveMax)
	if limit < 2*reserve { // a tiny limit: keep half
		return max(int(limit/2), 1)
	}
	return int(limit - reserve)
}

// Per-address caps: the default of Config.MaxConnsPerAddr is an eighth of
// MaxConns within these bounds, so that one address never holds all the
// connections however low the file limit.
const (
	perAddrMin = 16
	perAddrMax = 1_000
)

func defaultPerAddr(maxConns int) int { return min(max(maxConns/8, perAddrMin), perAddrMax) }

// refusedAnswer is written to a connection over the per-address cap before
// it is closed, so that a person with curl or a browser learns why.
const refusedAnswer = "HTTP/1.1 429 Too Many Requests\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 77\r\n\r\n" +
	"Too many open connections from your address: close some and try again later.\n"

// refusalLogEvery bounds the log lines about refused connections.
const refusalLogEvery = time.Minute

// connLimit caps the gateway's open connections, in all and per client
// address, and counts what it did for /metrics. Its methods are safe for
// concurrent use.
//
// Over the cap in all, a new connection waits in the kernel's backlog
// until one closes, so the process never runs out of file descriptors.
// Over the cap of its address, it is answered 429 and closed at once: one
// address must not be able to make everyone wait. Agent WebSockets leave
// their address's count once accepted (they are authenticated, and a
// thousand agents behind one NAT are normal); trusted proxies and the
// other gateways of a cluster are not counted per address at all.
type connLimit struct {
	sem     chan struct{} // one token per open connection
	perAddr int
	exempt  func(netip.Addr) bool
	log     *slog.Logger

	mu       sync.Mutex
	byAddr   map[netip.Prefix]int
	loggedAt time.Time // the last refusal log line
	unlogged int64     // refusals since it

	open    atomic.Int64 // accepted and not closed; sem also holds the token of an Accept waiting for a connection
	refused atomic.Int64
	waited  atomic.Int64
	warned  atomic.Bool
}

func newConnLimit(maxConns, perAddr int, exempt func(netip.Addr) bool, log *slog.Logger) *connLimit {
	return &connLimit{
		sem: make(chan struct{}, maxConns), perAddr: perAddr, exempt: exempt, log: log,
		byAddr: make(map[netip.Prefix]int),
	}
}

// stats reads the counts for /metrics.
func (l *connLimit) stats() metrics.ConnStats {
	return metrics.ConnStats{Open: int(l.open.Load()), Max: cap(l.sem), Refused: l.refused.Load(), Waited: l.waited.Load()}
}

// addrKey is what one client address is counted by: an IPv4 address, or
// the /64 of an IPv6 one (one host's share of a network).
func addrKey(a netip.Addr) netip.Prefix {
	a = a.Unmap()
	if a.Is4() {
		return netip.PrefixFrom(a, 32)
	}
	p, _ := a.WithZone("").Prefix(64)
	return p
}

// enter counts a new connection from addr; false means its address is
// over the cap. counted says whether leave must be called.
func (l *connLimit) enter(addr net.Addr) (key netip.Prefix, counted, ok bool) {
	tcp, isTCP := addr.(*net.TCPAddr)
	if !isTCP {
		return netip.Prefix{}, false, true
	}
	a := tcp.AddrPort().Addr()
	if l.exempt != nil && l.exempt(a) {
		return netip.Prefix{}, false, true
	}
	key = addrKey(a)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byAddr[key] >= l.perAddr {
		l.refusedLocked(a)
		return key, false, false
	}
	l.byAddr[key]++
	return key, true, true
}

func (l *connLimit) leave(key netip.Prefix) {
	l.mu.Lock()
	if l.byAddr[key]--; l.byAddr[key] <= 0 {
		delete(l.byAddr, key)
	}
	l.mu.Unlock()
}

// refusedLocked counts a refusal and logs, at most once per
// refusalLogEvery, how many there were: a client's excess is worth an INFO
// line, not one per connection.
func (l *connLimit) refusedLocked(a netip.Addr) {
	l.refused.Add(1)
	l.unlogged++
	if now := time.Now(); now.Sub(l.loggedAt) >= refusalLogEvery {
		l.log.Info("refused connections over the per-address cap; raise --max-conns-per-addr if one address really needs more, or list a proxy in --trusted-proxies",
			"addr", a.String(), "cap", l.perAddr, "refused", l.unlogged)
		l.loggedAt, l.unlogged = now, 0
	}
}

// full notes that every slot is taken: a new connection waits. The first
// time, it says so at WARN with the flag that raises the cap.
func (l *connLimit) full() {
	l.waited.Add(1)
	if l.warned.CompareAndSwap(false, true) {
		l.log.Warn("open connections reached the cap; new ones wait until one closes. Raise --max-conns (env SPACEFIX_MAX_CONNS) if the file limit allows; this is said once",
			"maxConns", cap(l.sem), "fileLimit", fileLimit())
	}
}

// listen wraps ln in the caps.
func (l *connLimit) listen(ln net.Listener) *limitListener {
	return &limitListener{Listener: ln, l: l, done: make(chan struct{})}
}

// limitListener accepts within its connLimit.
type limitListener struct {
	net.Listener
	l         *connLimit
	done      chan struct{}
	closeOnce sync.Once
}

func (ll *limitListener) Accept() (net.Conn, error) {
	l := ll.l
	for {
		select {
		case l.sem <- struct{}{}:
		default:
			l.full()
			select {
			case l.sem <- struct{}{}:
			case <-ll.done:
				return nil, net.ErrClosed
			}
		}
		c, err := ll.Listener.Accept()
		if err != nil {
			<-l.sem
			return nil, err
		}
		key, counted, ok := l.enter(c.RemoteAddr())
		if !ok {
			_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			_, _ = c.Write([]byte(refusedAnswer))
			c.Close()
			<-l.sem
			continue
		}
		l.open.Add(1)
		return &limitConn{Conn: c, l: l, key: key, counted: counted}, nil
	}
}

func (ll *limitListener) Close() error {
	ll.closeOnce.Do(func() { close(ll.done) })
	return ll.Listener.Close()
}

// limitConn gives its slots back once, when it closes; its address's slot
// earlier, when the HTTP server hands it to the agent WebSocket.
type limitConn struct {
	net.Conn
	l         *connLimit
	key       netip.Prefix
	counted   bool
	closeOnce sync.Once
	leaveOnce sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.leaveAddr()
	c.closeOnce.Do(func() {
		c.l.open.Add(-1)
		<-c.l.sem
	})
	return err
}

// leaveAddr takes the connection out of its address's count.
func (c *limitConn) leaveAddr() {
	if c.counted {
		c.leaveOnce.Do(func() { c.l.leave(c.key) })
	}
}

// uncapped says which client addresses the per-address cap leaves out: the
// trusted proxies, and the other gateways on the bus (by the IP they
// advertise), which open a connection here for each session request or
// stream of their clients that this gateway holds.
func (g *Gateway) uncapped(a netip.Addr) bool {
	if g.edge.trusts(a) {
		return true
	}
	c := g.cluster.Load()
	return c != nil && c.IsPeerIP(a)
}

// connState is the HTTP server's ConnState hook: a hijacked connection
// (an accepted agent WebSocket) no longer counts against its address.
func connState(c net.Conn, s http.ConnState) {
	if s != http.StateHijacked {
		return
	}
	if lc, ok := c.(*limitConn); ok {
		lc.leaveAddr()
	}
}

// SyscallConn returns the socket's, so that an agent's hijacked connection
// can wait for data holding no buffer (agentfront's lazyConn): a limitConn
// reads what its socket reads.
func (c *limitConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	return sc.SyscallConn()
}
