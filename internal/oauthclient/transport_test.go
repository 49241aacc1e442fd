package oauthclient

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A form body larger than resourceTransport reads is not one
// golang.org/x/oauth2 sends: it goes on whole and unchanged.
func TestResourceTransportLargeBody(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = string(b)
	}))
	defer srv.Close()
	body := "grant_type=refresh_token&pad=" + strings.Repeat("x", maxTokenRequest)
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := (&http.Client{Transport: resourceTransport{resource: "https://mcp.example/mcp"}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if got != body {
		t.Errorf("the server got %d bytes (resource added: %v), want the %d sent unchanged", len(got), strings.Contains(got, "resource="), len(body))
	}
}
