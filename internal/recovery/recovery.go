// Package recovery keeps a panic in one request from ending the gateway.
// Every path that serves outside input — MCP methods, HTTP handlers (admin
// API, dashboard, agent registration) and the goroutines of an agent's
// WebSocket — recovers through here: the panic is logged at ERROR with its
// stack, the caller gets a plain internal error, and the process goes on.
// The panic's text never reaches a client: it may hold anything.
package recovery

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync/atomic"
)

// Message is what a client reads when its request hit a panic.
const Message = "Internal error in the gateway; the call was not completed. It has been logged."

// ErrPanic is returned by [Do] when fn panicked.
var ErrPanic = errors.New("internal error (a panic, logged)")

// panics counts the panics recovered in this process, for metrics.
var panics atomic.Int64

// Count returns how many panics this process has recovered.
func Count() int64 { return panics.Load() }

// Log logs a recovered panic v at ERROR with the stack, saying where it
// happened, and counts it.
func Log(log *slog.Logger, where string, v any) {
	panics.Add(1)
	log.Error("panic recovered; the gateway goes on", "where", where, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
}

// Do runs fn and returns [ErrPanic] if it panicked, after logging the
// panic.
func Do(log *slog.Logger, where string, fn func()) (err error) {
	defer func() {
		if v := recover(); v != nil {
			Log(log, where, v)
			err = ErrPanic
		}
	}()
	Hook(where)
	fn()
	return nil
}

// Go runs fn on a new goroutine that logs a panic instead of ending the
// process.
func Go(log *slog.Logger, where string, fn func()) {
	go Do(log, where, fn)
}

// HTTP answers 500 with [Message] when next panics while serving a request,
// unless the response has started, and logs the panic. http.ErrAbortHandler
// keeps its meaning: the connection is dropped without a log.
func HTTP(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rw := &started{ResponseWriter: w}
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			Log(log, r.Method+" "+r.URL.Path, v)
			if !rw.wrote {
				http.Error(w, Message, http.StatusInternalServerError)
			}
		}()
		Hook(r.Method + " " + r.URL.Path)
		next.ServeHTTP(rw, r)
	})
}

// started notes whether a response has begun.
type started struct {
	http.ResponseWriter
	wrote bool
}

func (s *started) WriteHeader(code int) {
	if code >= 200 {
		s.wrote = true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *started) Write(b []byte) (int, error) {
	s.wrote = true
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the flusher and the hijacker
// (SSE streams, WebSocket upgrades).
func (s *started) Unwrap() http.ResponseWriter { return s.ResponseWriter }

var testHook atomic.Pointer[func(where string)]

// SetTestHook makes every recovering path call fn(where) before its work,
// where being what [Log] would name ("POST /api/…", "mcp tools/call",
// "agent message progress"). Tests use it to force a panic on one path;
// nil removes it. Production code never sets it.
func SetTestHook(fn func(where string)) {
	if fn == nil {
		testHook.Store(nil)
		return
	}
	testHook.Store(&fn)
}

// Hook calls the test hook, if one is set.
func Hook(where string) {
	if fn := testHook.Load(); fn != nil {
		(*fn)(where)
	}
}
