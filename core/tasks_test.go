package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// A tool's task support goes in its registration as execution.taskSupport,
// only when the tool may run as a task; a bad mode is refused at AddTool.
func TestTaskSupportRegistration(t *testing.T) {
	p := newPlayer(t)
	a, _ := newTestAgent(t, p)
	report := func(context.Context, emptyIn) (string, error) { return "", nil }
	must(t, AddTool(a, "report", "A report.", report, TaskSupport(TaskOptional)))
	must(t, a.RawTool("export", "An export.", []byte(`{"type":"object"}`),
		func(context.Context, json.RawMessage) (any, error) { return "", nil }, TaskSupport(TaskRequired)))
	must(t, AddTool(a, "plain", "Plain.", report, TaskSupport(TaskForbidden)))
	err := AddTool(a, "odd", "Odd.", report, TaskSupport("sometimes"))
	if want := `core: add tool "odd": TaskSupport("sometimes"): use TaskForbidden, TaskOptional or TaskRequired`; err == nil || err.Error() != want {
		t.Errorf("TaskSupport(sometimes): got %v, want %s", err, want)
	}
	p.play(a, script(t, `
-- register --
{"protocol":1,"tools":[{"name":"report","execution":{"taskSupport":"optional"}},{"name":"export","execution":{"taskSupport":"required"}},{"name":"plain"}]}
-- gateway --
`+welcome("r-1", 5000)+"\n"), nil)
	reg := string(p.registrations()[0])
	if strings.Count(reg, `"execution"`) != 2 {
		t.Errorf("registration %s: want execution on report and export only", reg)
	}
}

// A handler's ProtocolError, returned as is or wrapped, goes as an error
// message with its code and data; code 0 goes as -32603; an ordinary error
// carries no code.
func TestProtocolErrorMessage(t *testing.T) {
	p := newPlayer(t)
	a, _ := newTestAgent(t, p)
	must(t, AddTool(a, "book", "Books.", func(context.Context, emptyIn) (string, error) {
		return "", fmt.Errorf("book: %w", &ProtocolError{Code: CodeInvalidParams, Message: "bad dates", Data: map[string]string{"field": "from"}})
	}))
	must(t, AddTool(a, "zero", "Zero.", func(context.Context, emptyIn) (string, error) {
		return "", &ProtocolError{Message: "no code"}
	}))
	must(t, a.Resource("orders://open", ResourceOptions{Name: "Open"}, func(context.Context) (any, error) {
		return nil, &ProtocolError{Code: 4001, Message: "archived"}
	}))
	must(t, AddTool(a, "plain", "Plain.", func(context.Context, emptyIn) (string, error) {
		return "", errors.New("no such order")
	}))
	steps := script(t, connected+`
-- gateway --
{"type":"call","id":"c-1","kind":"tool","name":"book","args":{}}
-- agent --
{"type":"error","id":"c-1","message":"bad dates","code":-32602,"data":{"field":"from"}}
-- gateway --
{"type":"call","id":"c-2","kind":"tool","name":"zero","args":{}}
-- agent --
{"type":"error","id":"c-2","message":"no code","code":-32603}
-- gateway --
{"type":"call","id":"c-3","kind":"resource","name":"orders://open","args":{}}
-- agent --
{"type":"error","id":"c-3","message":"archived","code":4001}
-- gateway --
{"type":"call","id":"c-4","kind":"tool","name":"plain","args":{}}
-- agent --
{"type":"error","id":"c-4","message":"no such order"}
`)
	steps[len(steps)-1].check = func(t *testing.T, data []byte) {
		if want := `{"type":"error","id":"c-4","message":"no such order"}`; string(data) != want {
			t.Errorf("an ordinary error: got %s, want %s", data, want)
		}
	}
	p.play(a, steps, nil)
}

// Together asks several forms in one ask, by ids of their own or the
// caller's, and returns their answers in order.
func TestTogetherElicits(t *testing.T) {
	p := newPlayer(t)
	a, _ := newTestAgent(t, p)
	got := make(chan Answers, 1)
	must(t, AddTool(a, "plan", "Plans.", func(ctx context.Context, _ emptyIn) (string, error) {
		ans, err := Together(ctx, Inputs{Elicits: []ElicitRequest{
			{Message: "Your name?", Schema: map[string]any{"type": "object"}},
			{Message: "Your city?", Schema: map[string]any{"type": "object"}, ID: "city"},
		}})
		if err != nil {
			return "", err
		}
		got <- ans
		return "ok", nil
	}))
	p.play(a, script(t, connected+`
-- gateway --
{"type":"call","id":"c-1","kind":"tool","name":"plan","args":{}}
-- agent --
{"type":"ask","id":"c-1","requests":{"in-1-elicit-1":{"method":"elicitation/create","params":{"mode":"form","message":"Your name?"}},"city":{"method":"elicitation/create","params":{"message":"Your city?"}}}}
-- gateway --
{"type":"answered","id":"c-1","responses":{"in-1-elicit-1":{"action":"accept","content":{"name":"Ada"}},"city":{"action":"decline"}}}
-- agent --
{"type":"result","id":"c-1","result":{"content":[{"type":"text","text":"ok"}]}}
`), nil)
	ans := receive(t, got, "the answers")
	if len(ans.Elicits) != 2 || ans.Elicits[0].Content["name"] != "Ada" || ans.Elicits[1].Action != "decline" {
		t.Errorf("answers %+v: want Ada accepted, then a decline", ans.Elicits)
	}
}

// Together refuses repeated ids and more than the gateway passes on.
func TestTogetherRefuses(t *testing.T) {
	ctx := context.Background()
	_, err := Together(ctx, Inputs{ElicitID: "x", Elicit: &ElicitRequest{}, Elicits: []ElicitRequest{{ID: "x"}}})
	if want := `core: together: input request id "x" is given twice; each request needs its own`; err == nil || err.Error() != want {
		t.Errorf("repeated id: got %v, want %s", err, want)
	}
	_, err = Together(ctx, Inputs{Elicits: make([]ElicitRequest, 9)})
	if want := "core: together: 9 input requests; at most 8 go in one round"; err == nil || err.Error() != want {
		t.Errorf("nine forms: got %v, want %s", err, want)
	}
}
