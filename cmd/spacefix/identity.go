package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spacefix/spacefix/internal/gateway"
	"github.com/spacefix/spacefix/internal/identity"
	"github.com/spacefix/spacefix/internal/secrets"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/postgres"
)

// identityCmd manages the keys the gateways sign identity assertions with.
func identityCmd(ctx context.Context, args []string, stdout io.Writer) error {
	return dispatch(ctx, "identity", args, stdout,
		command{"rotate", identityRotate}, command{"reset", identityReset})
}

// identityRotate makes the next signing key the current one now, on the
// store every gateway shares: they sign with it within a minute, and the
// old key stays published until its last token has expired. Audited
// identity.rotate, with key ids only.
func identityRotate(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("identity rotate", stdout)
	data := dataFlag(fs)
	keyFile := secretKeyFileFlag(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	return withSigner(ctx, *data, *keyFile, func(st store.Store, s *identity.Signer) error {
		if err := s.Load(ctx); err != nil {
			return err
		}
		before := s.KeyID()
		if err := s.Rotate(ctx); err != nil {
			return err
		}
		after := s.KeyID()
		cliAudit(ctx, st, 0, "identity.rotate", after, map[string]any{"kid": before}, map[string]any{"kid": after})
		fmt.Fprintf(stdout, "Rotated the identity signing key: %s signs now (was %s).\n", after, before)
		fmt.Fprintf(stdout, "Running gateways take it within a minute; %s stays published until its last token has expired.\n", before)
		return nil
	})
}

// identityReset replaces every signing key with new ones, for when the
// stored keys cannot be read because the secret key file that sealed them
// is lost. Tokens signed with the old keys stop verifying at once.
// Audited identity.reset, with key ids only.
func identityReset(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("identity reset", stdout)
	data := dataFlag(fs)
	keyFile := secretKeyFileFlag(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	return withSigner(ctx, *data, *keyFile, func(st store.Store, s *identity.Signer) error {
		if err := s.Reset(ctx); err != nil {
			return err
		}
		cliAudit(ctx, st, 0, "identity.reset", s.KeyID(), nil, map[string]any{"kid": s.KeyID()})
		fmt.Fprintf(stdout, "Made new identity signing keys: %s signs now. Tokens signed with the old keys no longer verify.\n", s.KeyID())
		fmt.Fprintln(stdout, "Running gateways take them within a minute, if their --secret-key-file is the one given here; restart the others with it.")
		return nil
	})
}

// secretKeyFileFlag is serve's --secret-key-file, for commands that read
// or write what it seals.
func secretKeyFileFlag(fs *flag.FlagSet) *string {
	return fs.String("secret-key-file", os.Getenv("SPACEFIX_SECRET_KEY_FILE"), "the gateways' secret key `file`, which seals the signing keys in the store; default secret.key beside a SQLite file, if there is one (env SPACEFIX_SECRET_KEY_FILE)")
}

// withSigner runs fn with the store at data and an identity Signer on it
// that seals with the secret key file: the one given, else, beside a
// SQLite file, the secret.key a gateway made there, if there is one.
// Without a file, keys in the clear stay so, and sealed ones are refused
// with what to give.
func withSigner(ctx context.Context, data, keyFile string, fn func(store.Store, *identity.Signer) error) error {
	box, err := openSecretKeyFile(data, keyFile)
	if err != nil {
		return err
	}
	return withStore(ctx, data, func(st store.Store) error {
		return fn(st, identity.New(identity.Options{Store: st, Issuer: func() string { return "" }, Box: box}))
	})
}

// openSecretKeyFile loads the secret key file as serve finds it, without
// ever creating one; nil when there is none to find.
func openSecretKeyFile(data, path string) (*secrets.Box, error) {
	switch {
	case path != "":
	case postgres.IsURL(data):
		return nil, nil
	default:
		path = filepath.Join(filepath.Dir(data), gateway.DefaultSecretKeyFile)
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
	}
	box, err := secrets.Load(path)
	if err != nil {
		return nil, fmt.Errorf("the secret key file (--secret-key-file): %w", err)
	}
	return box, nil
}
