package upstream

// Sealing again with the key file's first key after a rotation.

import (
	"context"
	"fmt"

	"github.com/spacefix/spacefix/internal/oauthclient"
	"github.com/spacefix/spacefix/internal/store"
)

// Reseal seals again, with the key file's first key, every stored value
// sealed with an older one (after a key rotation), and returns how many
// values it sealed again. A value no key opens is left as it is and
// counted in the error (the person connects again); the others are still
// sealed again. A store error ends it.
func (s *Service) Reseal(ctx context.Context) (int, error) {
	n, failed := 0, 0
	var first error
	fail := func(err error) {
		if failed++; first == nil {
			first = err
		}
	}
	as, err := s.o.Store.UpstreamAccounts(ctx, store.UpstreamFilter{})
	if err != nil {
		return 0, fmt.Errorf("reseal: %w", err)
	}
	for _, a := range as {
		for range 3 { // a write racing ours: read again and retry
			next, k, err := s.resealAccount(a)
			if err != nil {
				fail(err)
				break
			}
			if k == 0 {
				break
			}
			ok, err := s.o.Store.UpdateUpstreamAccount(ctx, next)
			if err != nil {
				return n, fmt.Errorf("reseal: %w", err)
			}
			if ok {
				n += k
				break
			}
			if a, err = s.o.Store.UpstreamAccount(ctx, a.AgentKeyID, a.UserID); err != nil {
				break // gone
			}
		}
	}
	cs, err := s.o.Store.UpstreamClients(ctx)
	if err != nil {
		return n, fmt.Errorf("reseal: %w", err)
	}
	for _, c := range cs {
		if c.Secret == nil || s.o.Box.Current(c.Secret) {
			continue
		}
		plain, err := s.o.Box.Open(c.Secret, clientContext(c.Resource))
		if err != nil {
			fail(fmt.Errorf("reseal the client secret of %s: %w", oauthclient.Host(c.Resource), err))
			continue
		}
		c.Secret = s.o.Box.Seal(plain, clientContext(c.Resource))
		if err := s.o.Store.PutUpstreamClient(ctx, c); err != nil {
			return n, fmt.Errorf("reseal: %w", err)
		}
		n++
	}
	if failed > 0 {
		return n, fmt.Errorf("reseal: %d sealed values open with no key of the secret key file, and stay as they are (the first: %w)", failed, first)
	}
	return n, nil
}

// resealAccount returns a with its values sealed by the first key, and how
// many it sealed again.
func (s *Service) resealAccount(a store.UpstreamAccount) (store.UpstreamAccount, int, error) {
	k := 0
	for _, v := range []struct {
		val *[]byte
		ctx string
	}{{&a.Access, accessContext(a.AgentKeyID, a.UserID)}, {&a.Refresh, refreshContext(a.AgentKeyID, a.UserID)}} {
		if *v.val == nil || s.o.Box.Current(*v.val) {
			continue
		}
		plain, err := s.o.Box.Open(*v.val, v.ctx)
		if err != nil {
			return a, 0, fmt.Errorf("reseal the %s account of user %d: %w", oauthclient.Host(a.Resource), a.UserID, err)
		}
		*v.val = s.o.Box.Seal(plain, v.ctx)
		k++
	}
	return a, k, nil
}
