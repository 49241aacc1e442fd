package gateway

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/spacefix/spacefix/internal/store"
)

// Gateways sharing one store record themselves in it every beatEvery.
// Without a bus between them, each would hold its own registry: a client
// of one would not see the agents connected to the other, and a call
// could not reach them. So a gateway refuses to start while an older one
// is alive on the same store, unless both have a bus (--bus).
var (
	beatEvery = 5 * time.Second // a variable for tests
)

// beatLost is how long after its last record a gateway counts as gone.
func beatLost() time.Duration { return 3 * beatEvery }

// Lost is how long after its last record in the store a gateway counts as
// gone (spacefix gateways list shows the others).
func Lost() time.Duration { return beatLost() }

// liveHere holds the ids of the gateways running in this process, so that
// a record with this host and pid can be told from one a previous run of
// the process left (a container restarted with the same pid).
var liveHere sync.Map

// claimStore records this gateway in the store and returns an error that
// says what to do if an older gateway is alive on it. Of gateways starting
// at the same moment, the one that started first wins.
func (g *Gateway) claimStore(ctx context.Context, addr string) error {
	host, _ := os.Hostname()
	g.me = store.Gateway{ID: g.me.ID, Host: host, PID: os.Getpid(), Addr: addr, Bus: g.cfg.Bus != "", StartedAt: time.Now().UTC()}
	if err := g.store.RecordGateway(ctx, g.me); err != nil {
		return err
	}
	others, err := g.store.Gateways(ctx, time.Now().Add(-beatLost()))
	if err != nil {
		return errors.Join(err, g.store.RemoveGateway(ctx, g.me.ID))
	}
	for _, o := range others {
		if o.ID == g.me.ID {
			break // the rest started after this gateway
		}
		if g.gone(o) {
			if err := g.store.RemoveGateway(ctx, o.ID); err != nil {
				g.log.Warn("could not forget a gateway that is gone", "gateway", o.ID, "err", err)
			}
			continue
		}
		if o.Bus && g.me.Bus {
			continue // they share agents and calls over the bus
		}
		g.store.RemoveGateway(ctx, g.me.ID)
		seen := fmt.Sprintf("%s, listening on %s on host %s (pid %d), last seen %s ago", o.ID, o.Addr, o.Host, o.PID, time.Since(o.SeenAt).Round(time.Second))
		forgotten := fmt.Sprintf("A gateway that stopped without a word is forgotten %s after it was last seen", beatLost())
		if o.Bus {
			return fmt.Errorf("another gateway is using this store with a bus: %s. Start this one with --bus too, "+
				"naming the same NATS servers, so that they share agents and calls. %s", seen, forgotten)
		}
		if g.me.Bus {
			return fmt.Errorf("another gateway is using this store without a bus: %s. It would not share its agents "+
				"and calls with this one: restart it with --bus, naming the same NATS servers, or stop it. %s", seen, forgotten)
		}
		return fmt.Errorf("another gateway is using this store: %s. Gateways sharing a store would each see only the "+
			"agents connected to them; to run several, start each with --bus nats://HOST:PORT (NATS). Stop the other "+
			"gateway, or give this one its own --data. %s", seen, forgotten)
	}
	liveHere.Store(g.me.ID, true)
	every, lost := beatEvery, beatLost()
	g.conns.Add(1) // Shutdown waits for it before closing the store
	go func() {
		defer g.conns.Done()
		g.beat(every, lost)
	}()
	return nil
}

// gone reports whether a recorded gateway is known to be gone although its
// record is recent: it ran on this host and its process is not running, or
// it is an earlier run of this very process.
func (g *Gateway) gone(o store.Gateway) bool {
	if o.Host != g.me.Host {
		return false // nothing to ask: wait for its record to age
	}
	if o.PID == g.me.PID {
		_, live := liveHere.Load(o.ID)
		return !live
	}
	return processGone(o.PID)
}

// beat records the gateway every interval until it closes, then forgets it.
func (g *Gateway) beat(every, lost time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-g.ctx.Done():
			liveHere.Delete(g.me.ID)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := g.store.RemoveGateway(ctx, g.me.ID); err != nil {
				g.log.Warn("could not remove this gateway's record from the store; another may start here once it is "+lost.String()+" old", "err", err)
			}
			return
		case <-t.C:
			if err := g.store.RecordGateway(g.ctx, g.me); err != nil && g.ctx.Err() == nil {
				g.log.Warn("could not record this gateway in the store", "err", err)
			}
		}
	}
}

// liveGateways returns the ids of the gateways whose record in the store
// is not older than beatLost: the task runtime fails the running tasks of
// any other gateway (one killed, with no peer on a bus to notice).
func (g *Gateway) liveGateways(ctx context.Context) ([]string, error) {
	gws, err := g.store.Gateways(ctx, time.Now().Add(-beatLost()))
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(gws))
	for i, gw := range gws {
		ids[i] = gw.ID
	}
	return ids, nil
}
