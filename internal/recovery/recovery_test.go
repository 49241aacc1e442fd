package recovery

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestPanicHTTP(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	cases := []struct {
		name     string
		handler  http.HandlerFunc
		wantCode int
		wantBody string
	}{
		{"before the response", func(w http.ResponseWriter, r *http.Request) { panic("key sfx_secret") }, 500, Message + "\n"},
		{"after the response began", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusAccepted)
			w.Write([]byte("partial"))
			panic("late")
		}, http.StatusAccepted, "partial"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			HTTP(log, c.handler).ServeHTTP(rec, httptest.NewRequest("GET", "/x", nil))
			if rec.Code != c.wantCode || rec.Body.String() != c.wantBody {
				t.Errorf("got %d %q, want %d %q", rec.Code, rec.Body.String(), c.wantCode, c.wantBody)
			}
		})
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), `where="GET /x"`) {
		t.Errorf("log:\n%s", logs.String())
	}
	defer func() {
		if v := recover(); v != http.ErrAbortHandler {
			t.Errorf("ErrAbortHandler: recovered %v, want it passed on", v)
		}
	}()
	HTTP(log, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) })).
		ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/x", nil))
}

func TestPanicDo(t *testing.T) {
	var logs bytes.Buffer
	if err := Do(slog.New(slog.NewTextHandler(&logs, nil)), "work", func() { panic("x") }); err != ErrPanic {
		t.Errorf("Do = %v, want ErrPanic", err)
	}
	if !strings.Contains(logs.String(), "stack=") {
		t.Errorf("no stack in the log:\n%s", logs.String())
	}
}
