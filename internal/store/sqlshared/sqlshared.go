// Package sqlshared holds statement text for the SQL store body
// (store/sqlstore), written once with ? placeholders in [Q], and the
// functions that scan rows into store types. PostgreSQL's $1, $2, …
// placeholders come from [Numbered], which sqlstore runs over every
// statement once, when a store opens, never per call.
//
// The package knows no driver: its scan functions take a [Row], which
// both *sql.Row (and *sql.Rows) and pgx.Row satisfy, and turn "no rows"
// (sql.ErrNoRows, which pgx.ErrNoRows wraps) into [store.ErrNotFound].
package sqlshared

import (
	"database/sql"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/spacefix/spacefix/internal/store"
)

// Row is one row to scan: a *sql.Row, a *sql.Rows or a pgx.Row.
type Row interface{ Scan(dest ...any) error }

// Param returns the placeholder of the nth argument (from 1) of a
// statement built at run time: [Question] for SQLite, [Dollar] for
// PostgreSQL.
type Param func(n int) string

// Question is SQLite's placeholder: ? whatever n.
func Question(int) string { return "?" }

// Dollar is PostgreSQL's placeholder: $n.
func Dollar(n int) string { return "$" + strconv.Itoa(n) }

// where builds a WHERE clause of conditions joined by AND, numbering
// their placeholders with param as arguments are added.
type where struct {
	param Param
	conds []string
	args  []any
}

// add adds the condition cond, which ends where its argument's
// placeholder goes ("name ="), with its argument.
func (w *where) add(cond string, arg any) {
	w.args = append(w.args, arg)
	w.conds = append(w.conds, cond+" "+w.param(len(w.args)))
}

// clause is the WHERE clause with its leading space, "" for none.
func (w *where) clause() string {
	if len(w.conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(w.conds, " AND ")
}

// Numbered returns q with its ? placeholders rewritten as $1, $2, … in
// order. A ? inside a quoted string or identifier is left as it is.
func Numbered(q string) string {
	var (
		b     strings.Builder
		n     int
		quote byte // the quote we are inside, or 0
	)
	b.Grow(len(q) + 8)
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '?':
			n++
			b.WriteString(Dollar(n))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// RebindAll rewrites, with fn, every string field of the struct st
// points to: the statements of a [Statements] (or another struct of
// statements) for one engine's placeholders.
func RebindAll(st any, fn func(string) string) {
	v := reflect.ValueOf(st).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.String && f.CanSet() {
			f.SetString(fn(f.String()))
		}
	}
}

// Millis is a time as the stores keep it: Unix milliseconds.
func Millis(t time.Time) int64 { return t.UnixMilli() }

// FromMillis is the time, in UTC, of stored Unix milliseconds.
func FromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// FromNullMillis is [FromMillis] for a nullable column: NULL is the zero
// time.
func FromNullMillis(ms *int64) time.Time {
	if ms == nil {
		return time.Time{}
	}
	return FromMillis(*ms)
}

// Now is the current time at the precision the stores keep.
func Now() time.Time { return FromMillis(time.Now().UnixMilli()) }

// notFound turns "no rows" into [store.ErrNotFound].
func notFound(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	return err
}
