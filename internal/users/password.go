package users

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"
)

// Password rules.
const (
	MinPasswordRunes = 10
	MaxPasswordBytes = 1024 // argon2 hashes anything; this bounds the work
)

// argon2id parameters: the OWASP recommendation of 19 MiB, 2 passes, one
// thread. They are written into every hash, so they can rise later without
// breaking existing passwords.
const (
	argonTime    = 2
	argonMemory  = 19 * 1024 // KiB
	argonThreads = 1
	argonKeyLen  = 32
	argonSaltLen = 16
)

var b64 = base64.RawStdEncoding

// CheckPasswordRules returns a [Problem] if pw is not acceptable.
func CheckPasswordRules(pw string) error {
	switch {
	case utf8.RuneCountInString(pw) < MinPasswordRunes:
		return Problem(fmt.Sprintf("Choose a password of at least %d characters.", MinPasswordRunes))
	case len(pw) > MaxPasswordBytes:
		return Problem(fmt.Sprintf("Choose a password of at most %d bytes.", MaxPasswordBytes))
	}
	return nil
}

// HashPassword returns the argon2id hash of pw as a PHC string
// ($argon2id$v=19$m=…,t=…,p=…$salt$hash).
func HashPassword(pw string) string {
	salt := make([]byte, argonSaltLen)
	rand.Read(salt)
	sum := argon2.IDKey([]byte(pw), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, argonMemory, argonTime, argonThreads, b64.EncodeToString(salt), b64.EncodeToString(sum))
}

// errBadHash means a stored hash is not one HashPassword made.
var errBadHash = errors.New("password hash is not an argon2id PHC string")

// CheckPassword reports whether pw matches a hash made by [HashPassword],
// in time that does not depend on where they differ.
func CheckPassword(hash, pw string) (bool, error) {
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[1] != "argon2id" || parts[2] != fmt.Sprintf("v=%d", argon2.Version) {
		return false, errBadHash
	}
	var (
		mem, tm uint32
		thr     uint8
	)
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &mem, &tm, &thr); err != nil || tm == 0 || thr == 0 {
		return false, errBadHash
	}
	salt, err1 := b64.DecodeString(parts[4])
	want, err2 := b64.DecodeString(parts[5])
	if err1 != nil || err2 != nil || len(want) == 0 {
		return false, errBadHash
	}
	if len(pw) > MaxPasswordBytes {
		return false, nil
	}
	got := argon2.IDKey([]byte(pw), salt, tm, mem, thr, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// dummyHash is checked against when an email is unknown, so that sign-in
// takes as long for unknown users as for known ones.
var dummyHash = sync.OnceValue(func() string { return HashPassword("not a password anyone has") })
