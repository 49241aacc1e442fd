package dashboard

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A setup or invite link's secret never reaches the log with the path of a
// page that failed: whoever reads the log could use it.
func TestLogPathLeavesOutSecrets(t *testing.T) {
	mux := http.NewServeMux()
	var got string
	record := func(w http.ResponseWriter, r *http.Request) { got = logPath(r) }
	mux.HandleFunc("GET /setup/{secret}", record)
	mux.HandleFunc("POST /join/{secret}/accept", record)
	mux.HandleFunc("GET /p/{project}/tools", record)
	for _, tt := range []struct{ method, path, want string }{
		{"GET", "/setup/S3CRETsetup", "/setup/…"},
		{"POST", "/join/S3CRETjoin/accept", "/join/…/accept"},
		{"GET", "/p/default/tools", "/p/default/tools"},
	} {
		mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(tt.method, tt.path, nil))
		if got != tt.want || strings.Contains(got, "S3CRET") {
			t.Errorf("%s %s logged as %q, want %q", tt.method, tt.path, got, tt.want)
		}
	}
}
