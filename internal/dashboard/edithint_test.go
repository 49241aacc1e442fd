package dashboard_test

import (
	"encoding/json"
	"html"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/spacefix/spacefix/internal/agentproto"
)

// The Edit dialog's hint under Reads or writes tells an agent that
// declares readOnlyHint: false from one that declares none.
func TestEditDialogSaysWhatTheAgentDeclares(t *testing.T) {
	e := newEnv(t)
	c := e.admin()
	no := false
	write := tool("cancel_order", "Cancel an order.", false)
	write.Annotations = &agentproto.Annotations{ReadOnlyHint: &no}
	e.connect("r-1", "", tool("get_order", "Look up one order.", true), write, tool("create_order", "Create an order.", false))
	got := map[string]string{}
	for _, m := range regexp.MustCompile(`data-edit="([^"]*)"`).FindAllStringSubmatch(c.get("/p/shop/tools").text(), -1) {
		var edit struct{ Name, Declared string }
		if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &edit); err != nil {
			t.Fatal(err)
		}
		got[edit.Name] = edit.Declared
	}
	want := map[string]string{
		"get_order":    "The agent declares this tool a read (readOnlyHint: true).",
		"cancel_order": "The agent declares this tool a write (readOnlyHint: false).",
		"create_order": "The agent declares no readOnlyHint, so the tool counts as a write.",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the Edit dialog's hints (-want +got):\n%s", diff)
	}
	if r := c.tools()["cancel_order"]; !r.ReadOnlyHintDeclared || r.DeclaredReadOnly {
		t.Errorf("cancel_order in the API: readOnlyHintDeclared %v, declaredReadOnly %v; want true, false", r.ReadOnlyHintDeclared, r.DeclaredReadOnly)
	}
}
