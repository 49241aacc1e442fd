package wire

import (
	"mime"
	"net/http"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// PlainHeaders reports whether a POST's headers are those of a request go-sdk
// would serve as they are: JSON in, both answer types accepted, no stream
// to resume, and the protocol version the path speaks.
func PlainHeaders(r *http.Request, modern bool) bool {
	if ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || ct != "application/json" {
		return false
	}
	if !acceptsBoth(r.Header.Values("Accept")) || len(r.Header.Values("Last-Event-Id")) > 0 {
		return false
	}
	pv := r.Header.Get("Mcp-Protocol-Version")
	if modern {
		return pv == ModernVersion
	}
	return pv == "" || (pv < ModernVersion && slices.Contains(mcp.SupportedProtocolVersions(), pv))
}

// acceptsBoth reports whether Accept takes both application/json and
// text/event-stream, as go-sdk requires (wildcards count).
func acceptsBoth(values []string) bool {
	var jsonOK, streamOK bool
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
			switch strings.ToLower(strings.TrimSpace(mt)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK && streamOK
}
