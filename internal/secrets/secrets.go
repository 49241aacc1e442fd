// Package secrets seals the values the gateway must keep but never store in
// the clear — people's tokens at upstream remotes, upstream client secrets,
// the identity signing keys — with AES-256-GCM, under keys read from a key file.
//
// The key file has one key a line: the standard base64 of 32 random bytes
// (`head -c 32 /dev/urandom | base64`). Blank lines and lines that start
// with '#' are comments. The first key seals; every key opens. To rotate,
// put a new key on the first line and keep the old ones below until every
// value is sealed again with the new one ([Box.Current] tells).
//
// A sealed value is one version byte, the 8-byte id of the key that
// sealed it, a 12-byte random nonce and the ciphertext with its tag. The
// context a value is sealed with (what it is and whose, such as
// "upstream-access:key_x:7") is the additional authenticated data: a value
// opens only under the context it was sealed with, so one copied into
// another row does not.
//
// The package knows no store and no HTTP.
package secrets

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// KeySize is the size of a key, in bytes.
const KeySize = 32

// version is the first byte of every sealed value.
const version = 1

const (
	idSize    = 8
	nonceSize = 12
	header    = 1 + idSize + nonceSize
)

// ErrOpen is what Open returns for a value it cannot open: not sealed by
// this package, sealed with a key the file no longer has, under another
// context, or changed since.
var ErrOpen = errors.New("cannot open the sealed value: it was sealed with another key or context, or changed since")

// Box seals and opens values with the keys of a key file. It is safe for
// concurrent use.
type Box struct {
	keys []boxKey // the first seals
}

type boxKey struct {
	id   [idSize]byte
	aead cipher.AEAD
	raw  []byte // for Derive
}

// New returns a Box of keys (raw, [KeySize] bytes each); the first seals.
func New(keys ...[]byte) (*Box, error) {
	if len(keys) == 0 {
		return nil, errors.New("no key")
	}
	b := &Box{}
	seen := map[[idSize]byte]bool{}
	for i, k := range keys {
		if len(k) != KeySize {
			return nil, fmt.Errorf("key %d has %d bytes, want %d", i+1, len(k), KeySize)
		}
		bk, err := newKey(k)
		if err != nil {
			return nil, err
		}
		if seen[bk.id] {
			continue
		}
		seen[bk.id] = true
		b.keys = append(b.keys, bk)
	}
	return b, nil
}

func newKey(k []byte) (boxKey, error) {
	block, err := aes.NewCipher(k)
	if err != nil {
		return boxKey{}, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return boxKey{}, err
	}
	bk := boxKey{aead: aead, raw: bytes.Clone(k)}
	// The id names the key without telling anything of it.
	sum := sha256.Sum256(append([]byte("spacefix secret key id\x00"), k...))
	copy(bk.id[:], sum[:idSize])
	return bk, nil
}

// Seal encrypts plain under the first key, bound to context.
func (b *Box) Seal(plain []byte, context string) []byte {
	k := b.keys[0]
	out := make([]byte, header, header+len(plain)+k.aead.Overhead())
	out[0] = version
	copy(out[1:], k.id[:])
	rand.Read(out[1+idSize : header]) // never fails (crypto/rand)
	return k.aead.Seal(out, out[1+idSize:header], plain, []byte(context))
}

// Open decrypts what Seal made under the same context, with whichever key
// of the box sealed it; [ErrOpen] if it cannot.
func (b *Box) Open(sealed []byte, context string) ([]byte, error) {
	k, ok := b.keyOf(sealed)
	if !ok || len(sealed) < header+k.aead.Overhead() {
		return nil, ErrOpen
	}
	plain, err := k.aead.Open(nil, sealed[1+idSize:header], sealed[header:], []byte(context))
	if err != nil {
		return nil, ErrOpen
	}
	return plain, nil
}

// Current reports whether sealed was sealed with the box's first key: a
// value for which it is false is sealed again after a rotation.
func (b *Box) Current(sealed []byte) bool {
	return len(sealed) >= header && sealed[0] == version && bytes.Equal(sealed[1:1+idSize], b.keys[0].id[:])
}

// Derive returns a key of [KeySize] bytes for purpose label from each of
// the box's keys, in the box's order: the first is the one to sign or
// encrypt with, every one is one to check with. A key for another purpose
// than sealing (a MAC between gateways) comes from here rather than from
// the key file itself, so that one use of a key tells nothing of another;
// label names the purpose and its version ("spacefix gateway forward v1").
func (b *Box) Derive(label string) [][]byte {
	out := make([][]byte, len(b.keys))
	for i, k := range b.keys {
		d, err := hkdf.Key(sha256.New, k.raw, nil, label, KeySize)
		if err != nil { // only for a length HKDF-SHA256 cannot give
			panic("secrets: derive: " + err.Error())
		}
		out[i] = d
	}
	return out
}

// Keys says how many keys the box has.
func (b *Box) Keys() int { return len(b.keys) }

func (b *Box) keyOf(sealed []byte) (boxKey, bool) {
	if len(sealed) < header || sealed[0] != version {
		return boxKey{}, false
	}
	for _, k := range b.keys {
		if bytes.Equal(sealed[1:1+idSize], k.id[:]) {
			return k, true
		}
	}
	return boxKey{}, false
}

// NewKey returns a new key as a key file line holds it: the standard
// base64 of [KeySize] random bytes.
func NewKey() string {
	k := make([]byte, KeySize)
	rand.Read(k) // never fails (crypto/rand)
	return base64.StdEncoding.EncodeToString(k)
}

// Load reads the key file at path. Its errors name the file and the line
// at fault, never what the line holds.
func Load(path string) (*Box, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the secret key file: %w", err)
	}
	var keys [][]byte
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := base64.StdEncoding.DecodeString(line)
		switch {
		case err != nil:
			return nil, fmt.Errorf("secret key file %s, line %d: not a key in base64; each line holds one key, made with: head -c 32 /dev/urandom | base64", path, i+1)
		case len(k) != KeySize:
			return nil, fmt.Errorf("secret key file %s, line %d: the key has %d bytes, want %d; make one with: head -c 32 /dev/urandom | base64", path, i+1, len(k), KeySize)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("secret key file %s holds no key; make one with: head -c 32 /dev/urandom | base64 > %s", path, path)
	}
	return New(keys...)
}

// fileHeader opens a key file LoadOrCreate writes.
const fileHeader = `# Spacefix secret key: it encrypts the tokens the gateway keeps for people's
# upstream accounts and the keys it signs identity tokens with. Keep it with
# the database and back it up with it: without it those tokens cannot be read
# and the signing keys must be reset. To rotate, put a new key (head -c 32
# /dev/urandom | base64) on the first line and keep this one below it until the
# gateway has started once with both.
`

// LoadOrCreate reads the key file at path, or, when there is none, creates
// it (mode 0600) with one new key and says so. Processes that create it at
// the same moment end up with the same key.
func LoadOrCreate(path string) (*Box, bool, error) {
	if _, err := os.Stat(path); err == nil || !errors.Is(err, fs.ErrNotExist) {
		b, err := Load(path)
		return b, false, err
	}
	created, err := create(path)
	if err != nil {
		return nil, false, err
	}
	b, err := Load(path)
	return b, created, err
}

// create writes a new key file at path unless one appeared meanwhile: the
// file is written whole under a temporary name and linked into place, so
// no process ever reads it half written. The file and then its folder are
// synced before it is used, so that a crash right after cannot lose the
// key while the store keeps what was sealed with it.
func create(path string) (bool, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".secret-key-*")
	if err != nil {
		return false, fmt.Errorf("create the secret key file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil && runtime.GOOS != "windows" {
		tmp.Close()
		return false, fmt.Errorf("create the secret key file: %w", err)
	}
	_, err = tmp.WriteString(fileHeader + NewKey() + "\n")
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, fmt.Errorf("create the secret key file: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil // another process made it first
		}
		return false, fmt.Errorf("create the secret key file: %w", err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return false, fmt.Errorf("create the secret key file: sync its folder: %w", err)
	}
	return true, nil
}

// syncDir makes a new entry of folder dir durable. Windows cannot sync a
// folder, and needs not.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// PermissionWarning returns, for a key file that group or others may
// read or write, a sentence for the gateway to log at WARN; "" when only
// its owner may, or on systems without Unix file modes. Write matters as
// much as read: whoever can put a key of their own in the file has the
// gateway seal new values and sign its forwards to other gateways with it.
func PermissionWarning(path string) string {
	if runtime.GOOS == "windows" {
		return ""
	}
	fi, err := os.Stat(path)
	if err != nil {
		return ""
	}
	perm := fi.Mode().Perm()
	const (
		read  = "anyone who reads it can decrypt the upstream tokens and signing keys in the store"
		write = "anyone who changes it can put in a key of their own, which the gateway then seals with and signs its requests to other gateways with"
	)
	var who, what string
	switch r, w := perm&0o044 != 0, perm&0o022 != 0; {
	case r && w:
		who, what = "read and changed", read+", and "+write
	case r:
		who, what = "read", read
	case w:
		who, what = "changed", write
	default:
		return ""
	}
	return fmt.Sprintf("the secret key file %s may be %s by others than its owner (mode %04o): %s; run: chmod 600 %s",
		path, who, perm, what, path)
}
