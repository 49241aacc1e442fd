package mcpfront

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// orderRecorder notes whether the session was recorded when the answer's
// header went out.
type orderRecorder struct {
	*httptest.ResponseRecorder
	recorded *bool
	early    bool
}

func (r *orderRecorder) WriteHeader(code int) {
	r.early = *r.recorded
	r.ResponseRecorder.WriteHeader(code)
}

// TestSessionRecordedBeforeAnswer: a new session is recorded (with
// whether its client declared tasks) before the initialize answer's
// header is written, so the client's next request — sent as soon as it
// reads the session id — finds it. (It was recorded after go-sdk had
// answered, and under load a tasks client's first call was taken for a
// client without tasks.)
func TestSessionRecordedBeforeAnswer(t *testing.T) {
	for _, flush := range []bool{false, true} {
		var recorded bool
		rec := &orderRecorder{ResponseRecorder: httptest.NewRecorder(), recorded: &recorded}
		var got string
		w := &sessionStart{ResponseWriter: rec, started: func(id string) { recorded, got = true, id }}
		w.Header().Set("Mcp-Session-Id", "s-1")
		if flush {
			w.Flush()
		} else {
			w.WriteHeader(http.StatusOK)
		}
		w.Write([]byte("{}"))
		if got != "s-1" || !rec.early && !flush {
			t.Errorf("flush=%v: started(%q), recorded before the header: %v; want s-1, true", flush, got, rec.early)
		}
	}
	// An answer without a session id (a refusal) records nothing.
	called := false
	w := &sessionStart{ResponseWriter: httptest.NewRecorder(), started: func(string) { called = true }}
	w.WriteHeader(http.StatusBadRequest)
	if called {
		t.Error("started was called for an answer without a session id")
	}
}
