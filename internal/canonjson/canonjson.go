// Package canonjson writes JSON in one canonical form, so that documents
// that mean the same compare equal byte for byte: object members sorted by
// key (recursively), array order kept, insignificant space dropped, strings
// re-escaped one way and numbers written as a normalised decimal.
//
// The form is for comparing and hashing, not for people: 1.50, 15e-1 and
// 1.5 all become 15e-1.
package canonjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Canonical returns the canonical form of the JSON document raw. Duplicate
// object keys keep the last value, as encoding/json does.
func Canonical(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("canonical JSON: %w", err)
	}
	if rest := bytes.TrimSpace(raw[dec.InputOffset():]); len(rest) > 0 {
		return nil, errors.New("canonical JSON: text after the value")
	}
	var b bytes.Buffer
	b.Grow(len(raw))
	if err := write(&b, v); err != nil {
		return nil, fmt.Errorf("canonical JSON: %w", err)
	}
	return b.Bytes(), nil
}

func write(b *bytes.Buffer, v any) error {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case json.Number:
		n, err := Number(string(v))
		if err != nil {
			return err
		}
		b.WriteString(n)
	case string:
		writeString(b, v)
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := write(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, k)
			b.WriteByte(':')
			if err := write(b, v[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		return fmt.Errorf("unexpected %T", v)
	}
	return nil
}

func writeString(b *bytes.Buffer, s string) {
	enc, _ := json.Marshal(s) // a string always encodes
	b.Write(enc)
}

// Number returns the canonical form of a JSON number literal: "0" for any
// zero, otherwise an optional "-", the significant digits without leading
// or trailing zeros, and "e" with the decimal exponent that makes the value
// exact ("1.50" → "15e-1", "100" → "1e2", "7" → "7e0"). The value is kept
// exactly, however many digits it has.
func Number(lit string) (string, error) {
	neg := strings.HasPrefix(lit, "-")
	s := strings.TrimPrefix(lit, "-")
	mant, exp := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		if err != nil {
			return "", fmt.Errorf("number %q: exponent out of range", lit)
		}
		mant, exp = s[:i], e
	}
	if whole, frac, ok := strings.Cut(mant, "."); ok {
		mant = whole + frac
		exp -= len(frac)
	}
	if mant == "" || strings.Trim(mant, "0123456789") != "" {
		return "", fmt.Errorf("number %q is not a JSON number", lit)
	}
	mant = strings.TrimLeft(mant, "0")
	if mant == "" {
		return "0", nil
	}
	trimmed := strings.TrimRight(mant, "0")
	exp += len(mant) - len(trimmed)
	out := trimmed + "e" + strconv.Itoa(exp)
	if neg {
		out = "-" + out
	}
	return out, nil
}
