package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// The show and list commands print one way: for people, a table (a header
// and a row per item, or a name and a value per line); for programs, with
// --json, JSON — the admin API's own answer as it came, or for the commands
// that read the store, one object per item.

// apiShow is a show or list command over the admin API: the API's flags
// and --json, one GET of the path, then the answer printed by show or, with
// --json, as it came.
func apiShow[T any](ctx context.Context, name string, args []string, stdout io.Writer,
	path func(*apiClient) string, show func(io.Writer, T) error) error {
	fs := newFlagSet(name, stdout)
	client := apiFlags(fs)
	asJSON := fs.Bool("json", false, "print the admin API's JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	c, err := client()
	if err != nil {
		return err
	}
	var raw json.RawMessage
	if err := c.do(ctx, "GET", path(c), nil, &raw); err != nil {
		return err
	}
	return printAs(stdout, *asJSON, raw, show)
}

// printAs prints raw, an admin API answer, as JSON or through show.
func printAs[T any](w io.Writer, asJSON bool, raw json.RawMessage, show func(io.Writer, T) error) error {
	if asJSON {
		return printJSON(w, raw)
	}
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("read the admin API's answer: %w", err)
	}
	return show(w, v)
}

// printEach prints items as JSON, one array (or with lines, one object per
// line), each as asJSON makes it.
func printEach[T any](w io.Writer, items []T, lines bool, asJSON func(T) any) error {
	enc := json.NewEncoder(w)
	if lines {
		for _, it := range items {
			if err := enc.Encode(asJSON(it)); err != nil {
				return err
			}
		}
		return nil
	}
	out := make([]any, 0, len(items))
	for _, it := range items {
		out = append(out, asJSON(it))
	}
	return enc.Encode(out)
}

// table prints aligned columns for people.
type table struct{ tw *tabwriter.Writer }

// newTable starts a table on w with header as its first row (none when
// header is empty, for name-and-value lists).
func newTable(w io.Writer, header ...string) *table {
	t := &table{tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	if len(header) > 0 {
		t.row(header...)
	}
	return t
}

// row adds a row of cells.
func (t *table) row(cells ...string) { fmt.Fprintln(t.tw, strings.Join(cells, "\t")) }

// flush writes the aligned table.
func (t *table) flush() error { return t.tw.Flush() }
