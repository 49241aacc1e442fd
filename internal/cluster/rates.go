package cluster

// Shared rate limits: every RateEvery each gateway tells the others the
// calls it allowed to keys with a rate limit, and counts theirs in its own
// limiter, so that a key's limit holds across the gateways rather than per
// gateway.

import (
	"encoding/json"
	"time"

	"github.com/nats-io/nats.go"
)

// RateEvery is how often a gateway tells the others the calls it allowed
// to keys with a rate limit: the most a key can overshoot its limit is
// what the other gateways allow it in that time.
const RateEvery = 250 * time.Millisecond

// rateMsg carries the calls a gateway allowed to rate-limited keys, as
// Unix milliseconds by key id.
type rateMsg struct {
	Gw    string             `json:"gw"`
	Calls map[string][]int64 `json:"calls"`
}

// shareRates sends the calls this gateway allowed every RateEvery, until
// Close.
func (c *Cluster) shareRates() {
	if c.opts.Limiter == nil {
		return
	}
	t := time.NewTicker(RateEvery)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		if fresh := c.opts.Limiter.Fresh(); fresh != nil {
			c.publish(subjRates, newRateMsg(c.opts.Gateway, fresh))
		}
	}
}

// newRateMsg returns the message that tells the calls gateway gw allowed,
// by key id.
func newRateMsg(gw string, fresh map[string][]time.Time) rateMsg {
	msg := rateMsg{Gw: gw, Calls: make(map[string][]int64, len(fresh))}
	for key, calls := range fresh {
		ms := make([]int64, len(calls))
		for i, t := range calls {
			ms[i] = t.UnixMilli()
		}
		msg.Calls[key] = ms
	}
	return msg
}

// onRates counts the calls another gateway allowed in this one's limiter.
func (c *Cluster) onRates(m *nats.Msg) {
	var msg rateMsg
	if c.opts.Limiter == nil || json.Unmarshal(m.Data, &msg) != nil || msg.Gw == c.opts.Gateway {
		return
	}
	for key, ms := range msg.Calls {
		calls := make([]time.Time, len(ms))
		for i, v := range ms {
			calls[i] = time.UnixMilli(v)
		}
		c.opts.Limiter.Merge(key, calls)
		c.merged.Add(int64(len(calls)))
	}
}

// RatesMerged returns how many calls other gateways allowed to
// rate-limited keys that this gateway's limiter counted.
func (c *Cluster) RatesMerged() int64 { return c.merged.Load() }
