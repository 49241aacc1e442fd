package cluster

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// NATS carries at most max_payload bytes in one message (1 MB unless the
// server says more), while a call's arguments may be up to 32 MiB and a
// result 4 MiB, and a registration may be large too. A larger message goes
// as parts: each carries the header partHeader, "<id> <index> <count>",
// and the receiver puts them together before it handles the message. One
// publisher's messages on one subject arrive in order, so parts need no
// sorting; parts of a message that never completes are dropped after
// partsTTL.
const (
	partHeader = "Spacefix-Part"
	partsTTL   = time.Minute
	// maxAssembled caps what one message may add up to.
	maxAssembled = 64 << 20
)

// send publishes data on subj (with reply, if not empty), in parts when it
// is larger than one NATS message may be.
func (c *Cluster) send(subj, reply string, data []byte) error {
	limit := int(c.nc.MaxPayload()) - 4096 // room for the headers
	if limit <= 0 || len(data) <= limit {
		return c.nc.PublishMsg(&nats.Msg{Subject: subj, Reply: reply, Data: data})
	}
	if len(data) > maxAssembled {
		return fmt.Errorf("a bus message of %d bytes is over the %d the gateways put together", len(data), maxAssembled)
	}
	c.mu.Lock()
	c.seq++
	id := c.opts.Gateway + "-" + strconv.FormatUint(c.seq, 36)
	c.mu.Unlock()
	n := (len(data) + limit - 1) / limit
	for i := range n {
		m := nats.NewMsg(subj)
		m.Reply = reply
		m.Header.Set(partHeader, fmt.Sprintf("%s %d %d", id, i, n))
		m.Data = data[i*limit : min(len(data), (i+1)*limit)]
		if err := c.nc.PublishMsg(m); err != nil {
			return err
		}
	}
	return nil
}

// parts puts together the messages sent in parts.
type parts struct {
	mu   sync.Mutex
	open map[string]*partial
}

type partial struct {
	data  []byte
	next  int
	count int
	since time.Time
}

// assemble wraps a handler so that it sees whole messages.
func (c *Cluster) assemble(fn nats.MsgHandler) nats.MsgHandler {
	return func(m *nats.Msg) {
		h := m.Header.Get(partHeader)
		if h == "" {
			fn(m)
			return
		}
		whole, err := c.parts.add(h, m.Data)
		if err != nil {
			c.log.Warn("a bus message in parts was dropped", "subject", m.Subject, "err", err)
			return
		}
		if whole != nil {
			fn(&nats.Msg{Subject: m.Subject, Reply: m.Reply, Data: whole, Sub: m.Sub})
		}
	}
}

// add takes one part and returns the whole message once its last part is
// in.
func (ps *parts) add(header string, data []byte) ([]byte, error) {
	f := strings.Fields(header)
	if len(f) != 3 {
		return nil, errors.New("malformed part header")
	}
	i, err1 := strconv.Atoi(f[1])
	n, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return nil, errors.New("malformed part header")
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	now := time.Now()
	for id, p := range ps.open {
		if now.Sub(p.since) > partsTTL {
			delete(ps.open, id)
		}
	}
	p := ps.open[f[0]]
	if p == nil {
		if i != 0 {
			return nil, errors.New("a part without its first")
		}
		if ps.open == nil {
			ps.open = make(map[string]*partial)
		}
		p = &partial{count: n, since: now}
		ps.open[f[0]] = p
	}
	if i != p.next || n != p.count || len(p.data)+len(data) > maxAssembled {
		delete(ps.open, f[0])
		return nil, errors.New("parts out of order or too large")
	}
	p.data = append(p.data, data...)
	p.next++
	if p.next < p.count {
		return nil, nil
	}
	delete(ps.open, f[0])
	return p.data, nil
}
