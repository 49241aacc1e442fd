package pattern

import "testing"

func TestSchemaSplitToRE2(t *testing.T) {
	for _, tc := range []struct {
		src, want string
		ok        bool
	}{
		{`^[a-z]+$`, `^[a-z]+$`, true},
		{`\d{3}`, `\d{3}`, true},
		{`a.b`, `a[^\n\r\x{2028}\x{2029}]b`, true},
		{`\u00e9`, `\x{00e9}`, true},
		{`[\b]`, `[\x08]`, true},
		{`(?=a)`, `(?=a)`, true}, // RE2 refuses it when compiling
		{`(a)\1`, ``, false},
		{`[]`, ``, false},
		{`[a`, ``, false},
		{`\cA`, ``, false},
	} {
		got, ok := ToRE2(tc.src)
		if ok != tc.ok || ok && got != tc.want {
			t.Errorf("ToRE2(%q) = %q, %v; want %q, %v", tc.src, got, ok, tc.want, tc.ok)
		}
	}
}
