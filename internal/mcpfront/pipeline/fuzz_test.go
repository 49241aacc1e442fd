package pipeline

import (
	"encoding/json"
	"testing"
)

// FuzzDecodeResult reads arbitrary tool results as an agent may send them
// (the "result" of a result frame) and encodes what it read as go-sdk would
// send it to the client. Neither step may panic, and a result that decodes
// must encode: the client always gets an answer.
func FuzzDecodeResult(f *testing.F) {
	for _, s := range []string{
		`{"content":[{"type":"text","text":"{\"id\":\"1042\"}"}],"structuredContent":{"id":"1042"},"isError":false}`,
		`{"content":[{"type":"text","text":"no order"}],"isError":true}`,
		`{"content":[{"type":"image","data":"aGk=","mimeType":"image/png"},{"type":"audio","data":"aGk=","mimeType":"audio/wav"}]}`,
		`{"content":[{"type":"resource","resource":{"uri":"x://y","text":"t","mimeType":"text/plain"}}]}`,
		`{"content":[{"type":"resource_link","uri":"x://y","name":"y"}]}`,
		`{"content":[{"type":"text","text":"a","annotations":{"audience":["user"],"priority":0.5},"_meta":{"k":1}}],"_meta":{"k":2}}`,
		`{"content":[],"structuredContent":null}`,
		`{"content":[null]}`, `{"content":[{"type":"image"}]}`, `{"content":[{"type":"nope"}]}`,
		`{"content":"x"}`, `{"structuredContent":[1,2]}`, `null`, `7`, `{}`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		out, err := DecodeResult(raw)
		if err != nil {
			return
		}
		if out == nil {
			t.Fatalf("DecodeResult(%q) = nil, nil", raw)
		}
		if _, err := json.Marshal(out); err != nil {
			t.Errorf("DecodeResult(%q) gave a result that does not encode: %v", raw, err)
		}
	})
}
