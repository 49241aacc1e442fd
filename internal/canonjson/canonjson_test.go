package canonjson

import "testing"

func TestCanonical(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`{"b":2,"a":1}`, `{"a":1e0,"b":2e0}`},
		{` { "a" : [ 2 , 1 ] } `, `{"a":[2e0,1e0]}`},
		{`{"z":{"y":1,"x":[{"d":1,"c":2}]},"a":null}`, `{"a":null,"z":{"x":[{"c":2e0,"d":1e0}],"y":1e0}}`},
		{`"\u0041\/"`, `"A/"`},
		{`[true,false,null,""]`, `[true,false,null,""]`},
		{`{"a":1,"a":2}`, `{"a":2e0}`},
		{`12345678901234567890123`, `12345678901234567890123e0`},
	} {
		got, err := Canonical([]byte(tt.in))
		if err != nil || string(got) != tt.want {
			t.Errorf("Canonical(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{``, `{`, `{"a":1} x`, `[1,]`, `nul`} {
		if got, err := Canonical([]byte(bad)); err == nil {
			t.Errorf("Canonical(%q) = %s, want an error", bad, got)
		}
	}
}

func TestNumber(t *testing.T) {
	same := [][]string{
		{"1", "1.0", "1.00", "10e-1", "0.1e1", "1e0", "1E+0", "100e-2"},
		{"0", "0.0", "-0", "0e10", "-0.000"},
		{"-2.5", "-25e-1", "-0.25e1"},
		{"1500", "1.5e3", "15e2", "1500.000"},
		{"9007199254740993", "9007199254740993.0"},
	}
	for _, group := range same {
		want, err := Number(group[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, lit := range group[1:] {
			if got, err := Number(lit); err != nil || got != want {
				t.Errorf("Number(%s) = %s, %v; want %s like %s", lit, got, err, want, group[0])
			}
		}
	}
	// Distinct values stay distinct, also past float64 precision.
	a, _ := Number("9007199254740993")
	b, _ := Number("9007199254740992")
	if a == b {
		t.Errorf("Number maps 2^53+1 and 2^53 to the same %s", a)
	}
}
