package store

import (
	"strings"
	"testing"
)

func TestCheckIdentityAudience(t *testing.T) {
	for _, tt := range []struct {
		aud string
		ok  bool
	}{
		{"", true},
		{"https://orders.example.com", true},
		{"api://orders-backend", true},
		{"orders", true},
		{"has space", false},
		{"tab\there", false},
		{"new\nline", false},
		{"bad\xffutf8", false},
	} {
		if err := CheckIdentityAudience(tt.aud); (err == nil) != tt.ok {
			t.Errorf("CheckIdentityAudience(%q) = %v, want ok %v", tt.aud, err, tt.ok)
		}
	}
	long := "https://" + strings.Repeat("a", MaxIdentityAudience+1-len("https://"))
	if err := CheckIdentityAudience(long); err == nil || err.Error() != "the identity audience has 201 bytes; use at most 200, for example https://orders.example.com" {
		t.Errorf("CheckIdentityAudience(201 bytes) = %v", err)
	}
	if err := CheckIdentityAudience(long[:MaxIdentityAudience]); err != nil {
		t.Errorf("CheckIdentityAudience(200 bytes) = %v, want ok", err)
	}
}
