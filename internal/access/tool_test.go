package access

import (
	"encoding/json"
	"testing"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/store"
)

func TestAccessDescription(t *testing.T) {
	community := store.Key{ID: "key_1", Name: "radar key", KeyMeta: store.KeyMeta{DisplayName: "Test radar", Author: "Ada", Community: true}}
	for _, tt := range []struct {
		name string
		s    store.ToolSettings
		k    store.Key
		want string
	}{
		{"registered", store.ToolSettings{}, store.Key{}, "Runs tests."},
		{"override", store.ToolSettings{Description: "Run the suite."}, store.Key{}, "Run the suite."},
		{"community", store.ToolSettings{}, community, `[Custom agent "Test radar" by Ada, community code] Runs tests.`},
		{"community override", store.ToolSettings{Description: "X."}, community, `[Custom agent "Test radar" by Ada, community code] X.`},
		{"community, names from the agent", store.ToolSettings{}, store.Key{KeyMeta: store.KeyMeta{Community: true}},
			`[Custom agent "Test Radar" by Grace, community code] Runs tests.`},
		{"community, nothing known", store.ToolSettings{}, store.Key{ID: "key_9", KeyMeta: store.KeyMeta{Community: true}},
			`[Custom agent "key_9" by an unknown author, community code] Runs tests.`},
	} {
		reg := &agentproto.Registration{Name: "test-radar", DisplayName: "Test Radar", Author: "Grace"}
		if tt.k.ID == "key_9" {
			reg = nil
		}
		if got := Description("Runs tests.", tt.s, tt.k, reg); got != tt.want {
			t.Errorf("%s: Description = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestAccessReadOnly(t *testing.T) {
	for _, tt := range []struct {
		declared bool
		access   string
		want     bool
	}{
		{true, store.AccessFollow, true}, {false, store.AccessFollow, false},
		{false, store.AccessRead, true}, {true, store.AccessWrite, false},
	} {
		if got := ReadOnly(tt.declared, store.ToolSettings{Access: tt.access}); got != tt.want {
			t.Errorf("ReadOnly(%v, %q) = %v, want %v", tt.declared, tt.access, got, tt.want)
		}
	}
}

func TestAccessDefinitionAndConsent(t *testing.T) {
	yes := true
	v1 := agentproto.Tool{Name: "get_order", Description: "Look up.", InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}}}`)}
	same := v1
	same.InputSchema = json.RawMessage(`{ "properties": {"id": {"type":"string"}}, "type": "object" }`)
	same.TimeoutMs = 5000 // not covered by consent
	if string(Definition(v1)) != string(Definition(same)) {
		t.Errorf("definitions differ by key order or timeout:\n%s\n%s", Definition(v1), Definition(same))
	}
	changed := v1
	changed.Annotations = &agentproto.Annotations{ReadOnlyHint: &yes}
	d1, d2 := Definition(v1), Definition(changed)
	if string(d1) == string(d2) {
		t.Fatal("an annotation change does not change the definition")
	}

	for _, tt := range []struct {
		name string
		a    *store.Approval
		def  []byte
		want Consent
	}{
		{"new", nil, d1, PendingNew},
		{"approved", &store.Approval{Definition: d1}, d1, Approved},
		{"changed", &store.Approval{Definition: d1}, d2, PendingChange},
		{"change rejected", &store.Approval{Definition: d1, Rejected: d2}, d2, RejectedChange},
		{"new rejected", &store.Approval{Rejected: d1}, d1, RejectedNew},
		{"changed again after a rejection", &store.Approval{Definition: d1, Rejected: d2}, Definition(same), Approved},
	} {
		if got := State(tt.def, tt.a); got != tt.want {
			t.Errorf("%s: State = %v, want %v", tt.name, got, tt.want)
		}
	}

	back, err := ApprovedTool(changed, d1)
	if err != nil {
		t.Fatal(err)
	}
	if back.Annotations != nil || back.Description != "Look up." || back.Name != "get_order" {
		t.Errorf("ApprovedTool = %+v; want the approved v1 fields under the same name", back)
	}
}
