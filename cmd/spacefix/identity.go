package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spacefix/spacefix/internal/identity"
	"github.com/spacefix/spacefix/internal/store"
)

// identityCmd manages the keys the gateways sign identity assertions with.
func identityCmd(ctx context.Context, args []string, stdout io.Writer) error {
	return dispatch(ctx, "identity", args, stdout, command{"rotate", identityRotate})
}

// identityRotate makes the next signing key the current one now, on the
// store every gateway shares: they sign with it within a minute, and the
// old key stays published until its last token has expired. Audited
// identity.rotate, with key ids only.
func identityRotate(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("identity rotate", stdout)
	data := dataFlag(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	return withStore(ctx, *data, func(st store.Store) error {
		s := identity.New(identity.Options{Store: st, Issuer: func() string { return "" }})
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
