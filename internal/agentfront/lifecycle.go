package agentfront

import (
	"context"
	"errors"
	"time"

	"github.com/spacefix/spacefix/internal/recovery"
)

// errStarted is Start called twice, or after Close: a programmer's error.
var errStarted = errors.New("agentfront: Start called twice or after Close")

// Start starts the watchdog, which closes the connections of agents gone
// silent (see watchdog) until Shutdown or Close. It returns once the
// watchdog runs; ctx bounds the start only. Agents may connect before Start, but nothing
// closes a silent one until then.
func (f *Front) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.started || f.closing {
		return errStarted
	}
	f.started = true
	f.watcher.Add(1)
	recovery.Go(f.log, "watch agent connections", func() {
		defer f.watcher.Done()
		f.watchdog()
	})
	return nil
}

// Shutdown refuses new agent connections and lets those being served end
// on their own until ctx ends: an agent told goodbye (see route.Conn.Close)
// reads what was queued for it and closes. Then it ends the rest, and
// waits for them and the watchdog. It is safe to call twice.
func (f *Front) Shutdown(ctx context.Context) error {
	f.mu.Lock()
	f.closing = true // from here on conns does not grow
	f.mu.Unlock()
	ended := make(chan struct{})
	go func() {
		f.conns.Wait()
		close(ended)
	}()
	select {
	case <-ended:
	case <-ctx.Done():
	}
	f.cancel()
	<-ended
	f.watcher.Wait()
	return nil
}

// Close is Shutdown that ends every agent connection at once.
func (f *Front) Close() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return f.Shutdown(ctx)
}

// track counts an agent connection that Shutdown waits for; false once
// Shutdown has started (a WaitGroup must not grow from zero while someone
// waits on it).
func (f *Front) track() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closing {
		return false
	}
	f.conns.Add(1)
	return true
}

// watch puts t under the watchdog.
func (f *Front) watch(t *wsTransport) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.live[t] = struct{}{}
}

// unwatch takes t from the watchdog's care.
func (f *Front) unwatch(t *wsTransport) {
	f.mu.Lock()
	delete(f.live, t)
	f.mu.Unlock()
}

// watchdog closes, every half heartbeat, the connections whose agent sent
// nothing for two heartbeats: the SDKs ping every heartbeat, so such an
// agent is dead, or cut off, or too stuck to serve calls. It runs until
// Shutdown or Close (or the end of Options.Context).
func (f *Front) watchdog() {
	hb := f.opts.Heartbeat
	tick := time.NewTicker(hb / 2)
	defer tick.Stop()
	for {
		var now time.Time
		select {
		case <-f.ctx.Done():
			return
		case now = <-tick.C:
		}
		var dead []*wsTransport
		f.mu.Lock()
		for t := range f.live {
			if t.silent(now) > 2*hb {
				dead = append(dead, t)
			}
		}
		f.mu.Unlock()
		for _, t := range dead {
			t.log.Warn("agent sent nothing, not even a ping, for two heartbeats; closing its connection", "heartbeat", hb)
			t.ws.CloseNow()
		}
	}
}
