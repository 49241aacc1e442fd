package store

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// What every implementation stores the same way. Each of these is part of
// the contract (store/storetest checks it), so it lives here once.

// CheckNewKey refuses a key CreateKey must not store: no id or project, a
// kind other than agent or client, or a hash that is not a SHA-256.
func CheckNewKey(k Key, hash []byte) error {
	switch {
	case k.ID == "":
		return errors.New("empty id")
	case k.ProjectID == 0:
		return errors.New("no project id")
	case k.Kind != KindAgent && k.Kind != KindClient:
		return fmt.Errorf("kind %q is neither %q nor %q", k.Kind, KindAgent, KindClient)
	}
	return CheckHash(hash)
}

// MaxIdentityAudience is the longest identity audience an agent key may
// have, in bytes.
const MaxIdentityAudience = 200

// CheckIdentityAudience refuses an audience a JWT's aud should not carry:
// longer than [MaxIdentityAudience] or with spaces or control characters.
// "" (no identity tokens) is fine. The message is written for the person
// who typed it.
func CheckIdentityAudience(aud string) error {
	if len(aud) > MaxIdentityAudience {
		return fmt.Errorf("the identity audience has %d bytes; use at most %d, for example https://orders.example.com", len(aud), MaxIdentityAudience)
	}
	for _, r := range aud {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == utf8.RuneError {
			return errors.New("the identity audience may not contain spaces or control characters; use a URL or a name such as https://orders.example.com")
		}
	}
	return nil
}

// CheckHash refuses anything but a SHA-256.
func CheckHash(hash []byte) error {
	if len(hash) != sha256.Size {
		return fmt.Errorf("hash has %d bytes, want a SHA-256 of %d", len(hash), sha256.Size)
	}
	return nil
}

// EmailKey is what makes two emails the same user: case and surrounding
// space do not count.
func EmailKey(email string) string { return strings.ToLower(strings.TrimSpace(email)) }

// OptTime is the time of Unix milliseconds ms in UTC, where 0 means unset
// (the zero time): how the OAuth tables keep optional times.
func OptTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// DayMillis returns the Unix milliseconds of midnight UTC of the day t
// falls on: how usage counters are keyed.
func DayMillis(t time.Time) int64 {
	u := t.UTC()
	return time.Date(u.Year(), u.Month(), u.Day(), 0, 0, 0, 0, time.UTC).UnixMilli()
}

// EncodeList encodes a list of strings (a key's tools, a call's progress)
// as a JSON array; nil encodes as [].
func EncodeList(l []string) (string, error) {
	if l == nil {
		l = []string{}
	}
	b, err := json.Marshal(l)
	return string(b), err
}

// DecodeList decodes what EncodeList made; an empty list becomes nil.
func DecodeList(s string) ([]string, error) {
	if s == "" || s == "[]" {
		return nil, nil
	}
	var l []string
	err := json.Unmarshal([]byte(s), &l)
	return l, err
}

// CloneList copies a list; an empty one becomes nil.
func CloneList(l []string) []string {
	if len(l) == 0 {
		return nil
	}
	return append([]string(nil), l...)
}

// CleanText returns s fit for a TEXT column of every store: bytes that
// are not UTF-8, and NULs, become U+FFFD. Call records carry text from
// agents and clients, and PostgreSQL refuses both (SQLSTATE 22021), which
// would fail the whole batch every time the call log retried it.
func CleanText(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}
