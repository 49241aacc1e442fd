package wire

import (
	"encoding/json"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Call is a tools/call the early path may answer.
type Call struct {
	ID   []byte // the request's id as sent: an integer or a plain string
	Name string
	Args json.RawMessage
	Meta json.RawMessage // the params' _meta, if any
	// LogLevel is the level of log messages _meta asks for, "" for none
	// (or a level that is not a string, which go-sdk takes as none).
	LogLevel string
}

// ParseCall reads a tools/call the early path can answer: one plain
// JSON-RPC request (see [Request]) with exactly the members it needs, each
// once, spelled as the protocol spells them, an id echoed as sent, object
// arguments (or none), and at 2026-07-28 the request _meta go-sdk
// requires. Anything it does not know means no. Only the client's
// capabilities and info are decoded, to check their shape as go-sdk will.
func ParseCall(req *Request, modern bool) (Call, bool) {
	// Any other member of params (requestState, inputResponses, task, ...)
	// means no.
	if !req.Plain || req.ExtraTop || req.ExtraParams || req.Task != nil || req.Params == nil || req.Params[0] != '{' ||
		string(req.RPC) != `"2.0"` || string(req.MethodRaw) != `"tools/call"` || !PlainID(req.ID) {
		return Call{}, false
	}
	call := Call{ID: req.ID, Args: req.Args, Meta: req.Meta}
	// Arguments left out or null are {}, as on go-sdk's path.
	if len(call.Args) > 0 && call.Args[0] != '{' && string(call.Args) != "null" {
		return Call{}, false
	}
	var ok bool
	if call.Name, ok = JSONString(req.Name); !ok || call.Name == "" {
		return Call{}, false
	}
	if req.Meta != nil {
		if req.Meta[0] != '{' {
			return Call{}, false
		}
		if l, ok := JSONString(req.Level); ok {
			call.LogLevel = l
		}
	}
	if !modern {
		// A 2025 session's request must not claim the stateless protocol.
		return call, req.Version == nil
	}
	return call, req.Meta != nil && modernMeta(req.Version, req.Caps, req.Info)
}

// metaLogLevel is the _meta key of the level of log messages a 2026-07-28
// request wants (mcp.MetaKeyLogLevel, deprecated with logging itself).
const metaLogLevel = "io.modelcontextprotocol/logLevel"

// modernMeta reports whether a 2026-07-28 request's _meta is what go-sdk
// accepts as it is: that version, client capabilities, and client info if
// any, each of the right shape.
func modernMeta(version, caps, info []byte) bool {
	if string(version) != `"`+ModernVersion+`"` || len(caps) == 0 || caps[0] != '{' {
		return false
	}
	if string(caps) != "{}" {
		var c struct {
			mcp.ClientCapabilities
			Roots *struct {
				ListChanged bool `json:"listChanged,omitempty"`
			} `json:"roots,omitempty"`
		}
		if json.Unmarshal(caps, &c) != nil {
			return false
		}
	}
	if info != nil {
		var impl mcp.Implementation
		if info[0] != '{' || json.Unmarshal(info, &impl) != nil {
			return false
		}
	}
	return true
}

// Members calls f with the key and the value's bytes of each member of
// obj, a JSON object already checked to be valid JSON, in order, until f
// returns false. It returns false if obj is not an object, a key is
// spelled with escapes, or f returned false.
func Members(obj []byte, f func(key, val []byte) bool) bool {
	if len(obj) < 2 || obj[0] != '{' {
		return false
	}
	i := skipSpace(obj, 1)
	if obj[i] == '}' {
		return true
	}
	for {
		end := i + 1 // obj[i] is the key's opening quote
		for obj[end] != '"' {
			if obj[end] == '\\' {
				return false
			}
			end++
		}
		key := obj[i+1 : end]
		i = skipSpace(obj, skipSpace(obj, end+1)+1) // past the colon
		vend := skipValue(obj, i)
		if !f(key, obj[i:vend]) {
			return false
		}
		i = skipSpace(obj, vend)
		if obj[i] == '}' {
			return true
		}
		i = skipSpace(obj, i+1) // past the comma
	}
}

// skipValue returns the index just past the JSON value at b[i] (valid JSON).
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	}
	for i < len(b) && !strings.ContainsRune(",}] \t\r\n", rune(b[i])) {
		i++ // a number, true, false or null
	}
	return i
}

// skipString returns the index just past the JSON string at b[i].
func skipString(b []byte, i int) int {
	for i++; b[i] != '"'; i++ {
		if b[i] == '\\' {
			i++
		}
	}
	return i + 1
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// JSONString returns the JSON string raw decoded; ok is false if raw is not
// a string. Plain ASCII without escapes, the usual name, is not decoded.
func JSONString(raw []byte) (s string, ok bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	for _, b := range raw[1 : len(raw)-1] {
		if b == '\\' || b >= 0x80 {
			return s, json.Unmarshal(raw, &s) == nil
		}
	}
	return string(raw[1 : len(raw)-1]), true
}

// PlainID reports whether id is one go-sdk writes back exactly as sent: an
// integer of up to 15 digits, or a string of printable ASCII with no
// escapes.
func PlainID(id json.RawMessage) bool {
	if len(id) == 0 {
		return false
	}
	if id[0] == '"' {
		if len(id) < 2 || id[len(id)-1] != '"' || len(id) > 258 {
			return false
		}
		for _, b := range id[1 : len(id)-1] {
			if b < 0x20 || b > 0x7e || b == '"' || b == '\\' {
				return false
			}
		}
		return true
	}
	digits := id
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 15 || (digits[0] == '0' && len(digits) > 1) {
		return false
	}
	for _, b := range digits {
		if b < '0' || b > '9' {
			return false
		}
	}
	return true
}
