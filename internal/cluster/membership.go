package cluster

// Membership: which other gateways are on the bus. Each says it is alive
// with a heartbeat that also carries the numbers the others check their
// mirror of its replicas and its changes against; one that misses three is
// dropped, and its replicas with it. The bookkeeping is the members and
// peer types, which the cluster guards with its mu; the bus handlers only
// decode, apply and send what the bookkeeping asks for.

import (
	"encoding/json"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spacefix/spacefix/internal/agents"
)

// DefaultHeartbeat is how often a gateway says it is alive; three missed
// heartbeats drop it.
const DefaultHeartbeat = time.Second

// heartbeat says a gateway is alive, and what it holds.
type heartbeat struct {
	Gw       string `json:"gw"`
	Addr     string `json:"addr"`
	AddrMAC  string `json:"addrMac,omitempty"` // Addr signed (see Options.Peers)
	Replicas int    `json:"replicas"`
	// Seq is the sequence number of the sender's last replica
	// announcement, and Digest that of the ids of its replicas then
	// (see digest).
	Seq     uint64 `json:"seq"`
	Digest  string `json:"digest"`
	Changes uint64 `json:"changes"` // the number of the sender's last change
	EveryMs int64  `json:"everyMs"` // the sender's interval: three missed ones drop it
	// Busy are the calls in flight of the sender's replicas that have any,
	// from every gateway, by replica id: least-in-flight everywhere counts
	// them (a replica not named has none).
	Busy map[string]int64 `json:"busy,omitempty"`
}

// peer is another gateway, as its heartbeats and announcements tell.
type peer struct {
	id    string
	addr  string     // "" until it advertises one that verifies
	said  string     // the address its last heartbeat gave, verified or not
	ip    netip.Addr // addr's host when it is an IP; the zero Addr when a name
	seen  time.Time
	every time.Duration // its heartbeat interval
	// mirror is this gateway's copy of the replicas it holds.
	mirror mirror
	// changes follows the numbers of the changes it broadcasts.
	changes changeSeq
}

// members are the other gateways on the bus, by id. Not safe for
// concurrent use: the cluster holds its mu.
type members map[string]*peer

// get returns the peer with that id, making it (seen now) if this gateway
// had not heard of it.
func (ms members) get(id string) (p *peer, isNew bool) {
	p = ms[id]
	if p == nil {
		p = &peer{id: id, seen: time.Now(), mirror: mirror{replicas: make(map[string]*agents.Replica)}}
		ms[id] = p
		isNew = true
	}
	return p, isNew
}

// silent takes out and returns the peers not heard for three of their
// heartbeat intervals (every, for one that did not say its own).
func (ms members) silent(every time.Duration) []*peer {
	var gone []*peer
	for id, p := range ms {
		e := p.every
		if e <= 0 {
			e = every
		}
		if time.Since(p.seen) > 3*e {
			delete(ms, id)
			gone = append(gone, p)
		}
	}
	return gone
}

// PeerAddr returns the address another gateway advertised, while it is
// alive on the bus.
func (c *Cluster) PeerAddr(id string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.peers[id]
	if p == nil || p.addr == "" {
		return "", false
	}
	return p.addr, true
}

// IsPeerIP reports whether a is the IP address another gateway alive on
// the bus advertises (a host name is not resolved): the connections it
// opens to forward its clients' session requests here come from it. It
// takes no lock: the gateway asks for every connection it accepts.
func (c *Cluster) IsPeerIP(a netip.Addr) bool {
	ips := c.peerIPs.Load()
	if ips == nil {
		return false
	}
	return slices.Contains(*ips, a.Unmap())
}

// storePeerIPs rebuilds what IsPeerIP reads; c.mu is held.
func (c *Cluster) storePeerIPs() {
	var ips []netip.Addr
	for _, p := range c.peers {
		if p.ip.IsValid() {
			ips = append(ips, p.ip)
		}
	}
	c.peerIPs.Store(&ips)
}

// hostIP is the IP of a host:port, or the zero Addr when the host is a
// name or it does not parse.
func hostIP(hostport string) netip.Addr {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return netip.Addr{}
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return ip.Unmap()
}

// Peers returns how many other gateways are alive on the bus.
func (c *Cluster) Peers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.peers)
}

// beat sends a heartbeat every interval and drops gateways that went
// silent, until Close.
func (c *Cluster) beat() {
	t := time.NewTicker(c.opts.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		c.heartbeat()
		c.dropSilent()
	}
}

// heartbeat says on the bus that this gateway is alive.
func (c *Cluster) heartbeat() {
	c.publish(subjHeartbeat, c.beatMsg())
}

// beatMsg returns this gateway's heartbeat: the number of its last
// replica announcement and the digest of its replicas then, taken
// together, the number of its last change, and its replicas' calls in
// flight.
func (c *Cluster) beatMsg() heartbeat {
	hb := heartbeat{Gw: c.opts.Gateway, Addr: c.opts.Addr, EveryMs: c.opts.Heartbeat.Milliseconds()}
	if c.opts.Peers != nil {
		hb.AddrMAC = c.opts.Peers.SignAddr(hb.Gw, hb.Addr)
	}
	c.chMu.Lock()
	hb.Changes = c.chSeq
	c.chMu.Unlock()
	c.annMu.Lock()
	c.mu.Lock()
	hb.Seq, hb.Digest = c.repSeq, digest(c.local)
	c.annMu.Unlock()
	hb.Replicas = len(c.local)
	for id, rep := range c.local {
		if n := rep.Inflight(); n > 0 {
			if hb.Busy == nil {
				hb.Busy = make(map[string]int64)
			}
			hb.Busy[id] = n
		}
	}
	c.mu.Unlock()
	return hb
}

// dropSilent drops the gateways that missed three heartbeats.
func (c *Cluster) dropSilent() {
	c.mu.Lock()
	gone := c.peers.silent(c.opts.Heartbeat)
	if len(gone) > 0 {
		c.storePeerIPs()
	}
	c.mu.Unlock()
	for _, p := range gone {
		c.log.Warn("gateway went silent on the bus; its agents are dropped here", "peer", p.id, "addr", p.addr, "replicas", len(p.mirror.replicas))
		c.dropPeer(p, "the gateway holding the agent's connection went away")
		if c.opts.PeerGone != nil {
			c.opts.PeerGone(p.id)
		}
	}
}

// dropPeer takes a gone gateway's replicas out of the registry; their calls
// in flight end as disconnected. The calls this gateway relays for it end
// too: nobody waits for their results.
func (c *Cluster) dropPeer(p *peer, reason string) {
	for _, rep := range p.mirror.replicas {
		c.opts.Registry.Remove(rep)
		rep.Conn.(*remoteConn).end(reason)
	}
	c.endRelays(p.id)
}

// onHeartbeat hears another gateway's heartbeat: a new one is greeted
// with this gateway's at once, a mirror that differs from what the
// heartbeat says asks the holder to announce again, and a change lost on
// the bus makes this gateway re-read what it caches.
func (c *Cluster) onHeartbeat(m *nats.Msg) {
	var hb heartbeat
	if json.Unmarshal(m.Data, &hb) != nil || hb.Gw == c.opts.Gateway || hb.Gw == "" {
		return
	}
	isNew, ask, lostChange := c.heard(hb)
	if isNew {
		c.log.Info("gateway joined the bus", "peer", hb.Gw, "addr", hb.Addr)
		c.heartbeat() // so that it learns of this one without waiting a beat
	}
	if ask != nil {
		c.askSync(hb.Gw, ask)
	}
	if lostChange {
		c.log.Info("a change made on another gateway was lost on the bus; re-reading what this gateway caches from the store", "peer", hb.Gw)
		c.rereadAll(hb.Gw)
	}
}

// heard applies another gateway's heartbeat to its peer: it is alive at
// its address, its replicas' calls in flight are as it says, and the
// mirror of them and the changes heard from it are checked against its
// numbers. It returns whether the peer is new, the resync to ask it for
// (nil: none) and whether a change it made was lost here; nothing once
// Close began.
func (c *Cluster) heard(hb heartbeat) (isNew bool, ask *syncMsg, lostChange bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false, nil, false
	}
	var p *peer
	p, isNew = c.peers.get(hb.Gw)
	p.seen, p.every = time.Now(), time.Duration(hb.EveryMs)*time.Millisecond
	if p.said != hb.Addr || (p.addr == "" && hb.Addr != "") {
		addr := hb.Addr
		if c.opts.Peers != nil && !c.opts.Peers.VerifyAddr(hb.Gw, hb.Addr, hb.AddrMAC) {
			if p.said != hb.Addr {
				c.log.Warn("a gateway on the bus advertises an address not signed with this gateway's secret key file: no request is forwarded to it (give every gateway the same --secret-key-file)", "peer", hb.Gw, "addr", hb.Addr)
			}
			addr = ""
		}
		p.said = hb.Addr
		if p.addr != addr {
			p.addr, p.ip = addr, hostIP(addr)
			c.storePeerIPs()
		}
	}
	if resync, state := p.mirror.behind(hb.Seq, hb.Digest); resync {
		ask = p.mirror.request(c.opts.Gateway, state, 2*c.opts.Heartbeat)
	}
	lostChange = p.changes.beat(hb.Changes)
	for id, rep := range p.mirror.replicas {
		rep.Report(hb.Busy[id])
	}
	return isNew, ask, lostChange
}
