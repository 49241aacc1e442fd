package agentfront

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/recovery"
	"github.com/spacefix/spacefix/internal/route"
)

// What waits for an agent's socket: senders queue encoded messages and
// return, and one writer goroutine writes them in order. A caller is thus
// held by its own wait only, never by a socket that is full because the
// agent stopped reading or its link is slow. The writer runs only while
// there is something to write (an idle agent has no goroutine: at 10,000
// agents, a goroutine each costs some 80 MB of stacks), and takes
// everything queued at each turn.
const (
	// maxQueued is the most messages waiting for one agent's socket.
	maxQueued = 256
	// maxQueuedBytes is the most bytes waiting for one agent's socket
	// (one message, whatever its size, may wait in an empty queue).
	maxQueuedBytes = agentproto.MaxFrameBytes
	// closeGrace bounds a polite close: what is queued and the closing
	// handshake, on a socket that may take nothing more.
	closeGrace = 2 * time.Second
)

// errClosed is what Send returns once the connection is ending.
var errClosed = errors.New("agent connection closed")

// sendQueue is the messages waiting for one agent's socket.
type sendQueue struct {
	mu      sync.Mutex
	q       [][]byte // encoded messages, in order
	spare   [][]byte // the other slice of the two the writer swaps
	size    int      // bytes in q
	writing bool     // a writer goroutine runs
	closing bool     // Close was called: nothing more is queued
	reason  string   // the reason of a polite close, written after q
	failed  bool     // the writer met an error: the connection is gone
	// room, made by a sender that waits, is closed by the writer when it
	// takes what is queued: every waiting sender looks again.
	room chan struct{}
	// writers counts writer goroutines, for the connection's end.
	writers sync.WaitGroup
}

// fits reports whether n more bytes may be queued; mu is held.
func (q *sendQueue) fits(n int) bool {
	return len(q.q) == 0 || (len(q.q) < maxQueued && q.size+n <= maxQueuedBytes)
}

// wake has every sender waiting for room look again; mu is held.
func (q *sendQueue) wake() {
	if q.room != nil {
		close(q.room)
		q.room = nil
	}
}

// fail drops what is queued and refuses what comes: the connection is
// gone. mu is held.
func (q *sendQueue) fail() {
	q.failed, q.closing = true, true
	clear(q.q)
	q.q, q.size = q.q[:0], 0
	q.wake()
}

// Send encodes m and queues it for the writer. While the queue is full it
// waits for room until ctx ends or, for a call, its deadline passes (see
// [route.Transport]).
func (t *wsTransport) Send(ctx context.Context, m *agentproto.Message) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	q := &t.out
	q.mu.Lock()
	if !q.fits(len(b)) && !q.closing {
		if err := q.waitRoom(ctx, len(b), m.Deadline); err != nil {
			return err
		}
	}
	if q.closing {
		q.mu.Unlock()
		return errClosed
	}
	q.q = append(q.q, b)
	q.size += len(b)
	start := !q.writing
	if start {
		q.writing = true
		q.writers.Add(1)
	}
	q.mu.Unlock()
	if start {
		go t.writer() // a func value made once: a method value allocates
	}
	return nil
}

// waitRoom waits, with mu held, until n bytes fit or the queue is closing;
// it returns holding mu, unless ctx ends or deadline (unix milliseconds;
// 0 for none) passes first.
func (q *sendQueue) waitRoom(ctx context.Context, n int, deadline int64) error {
	var expired <-chan time.Time
	if deadline != 0 {
		tm := time.NewTimer(time.Until(time.UnixMilli(deadline)))
		defer tm.Stop()
		expired = tm.C
	}
	for !q.fits(n) && !q.closing {
		if q.room == nil {
			q.room = make(chan struct{})
		}
		room := q.room
		q.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return ctx.Err()
		case <-expired:
			return route.ErrSendTimeout
		}
		q.mu.Lock()
	}
	return nil
}

// write is the writer goroutine: it writes what is queued until the queue
// is empty, then ends; after a polite Close, it says goodbye with the
// closing handshake once the queue is written.
func (t *wsTransport) write() {
	q := &t.out
	defer q.writers.Done()
	defer t.recoverWriter()
	for {
		q.mu.Lock()
		batch := q.q
		if len(batch) == 0 || q.failed {
			t.idle() // unlocks
			return
		}
		q.q, q.spare, q.size = q.spare[:0], nil, 0
		q.wake()
		q.mu.Unlock()
		var err error
		for i, b := range batch {
			if err == nil {
				err = t.ws.Write(context.Background(), websocket.MessageText, b)
			}
			batch[i] = nil
		}
		q.mu.Lock()
		q.spare = batch[:0]
		if err != nil {
			q.fail()
		}
		q.mu.Unlock()
		if err != nil {
			// The agent is gone, or Close's bound ran out: the reader
			// ends too.
			t.ws.CloseNow()
		}
	}
}

// recoverWriter logs a panic of the writer and ends the connection: the
// gateway goes on, and the agent reconnects.
func (t *wsTransport) recoverWriter() {
	v := recover()
	if v == nil {
		return
	}
	recovery.Log(t.log, "write to an agent", v)
	q := &t.out
	q.mu.Lock()
	q.writing = false
	q.fail()
	q.mu.Unlock()
	t.ws.CloseNow()
}

// idle ends a writer's turn with q.mu held, which it unlocks: after a
// polite Close the closing handshake goes last, bounded by the deadline
// Close set.
func (t *wsTransport) idle() {
	q := &t.out
	goodbye := q.closing && !q.failed && q.reason != ""
	q.writing = false
	if goodbye {
		q.failed = true // no second handshake
	}
	q.wake()
	q.mu.Unlock()
	if goodbye {
		t.ws.Close(websocket.StatusGoingAway, q.reason)
	}
}

// Close ends the connection without waiting: with reason, what is queued
// goes first and then the closing handshake carrying reason, all within
// closeGrace; without, at once. Senders waiting for room give up.
func (t *wsTransport) Close(reason string) {
	q := &t.out
	q.mu.Lock()
	if q.closing && (reason != "" || q.failed) {
		q.mu.Unlock()
		if reason == "" {
			t.ws.CloseNow()
		}
		return
	}
	q.closing = true
	if reason == "" {
		q.fail()
	} else {
		q.reason = reason
		q.wake()
	}
	start := !q.writing && reason != ""
	if start {
		q.writing = true
		q.writers.Add(1)
	}
	q.mu.Unlock()
	if reason == "" {
		t.ws.CloseNow()
	} else if t.nc != nil {
		// Bounds the writes still to come and the handshake's wait: a
		// socket that takes nothing more fails them then.
		t.nc.SetDeadline(time.Now().Add(closeGrace))
	} else {
		time.AfterFunc(closeGrace, func() { t.ws.CloseNow() })
	}
	if start {
		go t.writer()
	}
}

// wait returns once no writer goroutine runs; Close was called, so none
// starts again.
func (t *wsTransport) wait() { t.out.writers.Wait() }
