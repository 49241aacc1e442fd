package main

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"
)

func TestTable(t *testing.T) {
	var b bytes.Buffer
	tab := newTable(&b, "ID", "NAME")
	tab.row("key_1", "orders")
	tab.row("key_22", "-")
	if err := tab.flush(); err != nil {
		t.Fatal(err)
	}
	const want = "ID      NAME\nkey_1   orders\nkey_22  -\n"
	if b.String() != want {
		t.Errorf("table:\n%q\nwant\n%q", b.String(), want)
	}
	b.Reset()
	kv := newTable(&b)
	kv.row("Call wait", "30 s")
	kv.row("Project", "default")
	kv.flush()
	if want := "Call wait  30 s\nProject    default\n"; b.String() != want {
		t.Errorf("name-and-value table:\n%q\nwant\n%q", b.String(), want)
	}
}

func TestPrintEach(t *testing.T) {
	items := []int{1, 2}
	double := func(n int) any { return map[string]int{"n": n * 2} }
	var b bytes.Buffer
	printEach(&b, items, false, double)
	if want := `[{"n":2},{"n":4}]` + "\n"; b.String() != want {
		t.Errorf("as an array: %q, want %q", b.String(), want)
	}
	b.Reset()
	printEach(&b, items, true, double)
	if want := "{\"n\":2}\n{\"n\":4}\n"; b.String() != want {
		t.Errorf("one per line: %q, want %q", b.String(), want)
	}
	b.Reset()
	printEach(&b, []int{}, false, double)
	if want := "[]\n"; b.String() != want {
		t.Errorf("none: %q, want %q (never null)", b.String(), want)
	}
}

func TestPrintAs(t *testing.T) {
	raw := json.RawMessage(`{"name":"default"}`)
	type project struct{ Name string }
	show := func(w io.Writer, p project) error { _, err := io.WriteString(w, "project "+p.Name+"\n"); return err }
	var b bytes.Buffer
	if err := printAs(&b, false, raw, show); err != nil || b.String() != "project default\n" {
		t.Errorf("for people: %q, %v", b.String(), err)
	}
	b.Reset()
	if err := printAs(&b, true, raw, show); err != nil || b.String() != "{\n  \"name\": \"default\"\n}\n" {
		t.Errorf("--json: %q, %v", b.String(), err)
	}
	if err := printAs(&b, false, json.RawMessage(`[1]`), show); err == nil {
		t.Error("an answer of another shape printed without an error")
	}
}
