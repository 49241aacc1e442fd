package agentproto

import "testing"

func TestClientErrorCode(t *testing.T) {
	for _, tc := range []struct{ in, want int }{
		{-32602, -32602}, // invalid params: as is
		{-32603, -32603}, // internal error: as is
		{0, -32603},      // no code given
		{-32601, -32603}, // method not found: the protocol's own
		{-32021, -32603}, // missing capability: the protocol's own
		{-32768, -32603}, // the reserved range's ends
		{-32000, -32603},
		{-31999, -31999}, // application codes: as they are
		{-32769, -32769},
		{1, 1},
		{4242, 4242},
	} {
		if got := ClientErrorCode(tc.in); got != tc.want {
			t.Errorf("ClientErrorCode(%d) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestCheckTaskSupport(t *testing.T) {
	for _, ts := range []string{"", TaskForbidden, TaskOptional, TaskRequired} {
		if err := CheckTaskSupport(&Tool{Name: "report", Execution: &Execution{TaskSupport: ts}}); err != nil {
			t.Errorf("taskSupport %q refused: %v", ts, err)
		}
	}
	if err := CheckTaskSupport(&Tool{Name: "report"}); err != nil {
		t.Errorf("no execution refused: %v", err)
	}
	err := CheckTaskSupport(&Tool{Name: "report", Execution: &Execution{TaskSupport: "sometimes"}})
	want := `Task support of tool "report" is "sometimes"; use "forbidden", "optional" or "required".`
	if err == nil || err.Error() != want {
		t.Errorf("taskSupport sometimes: got %v, want %s", err, want)
	}
	if got := (&Tool{}).TaskSupport(); got != TaskForbidden {
		t.Errorf("TaskSupport of a tool without execution = %q, want forbidden", got)
	}
}
