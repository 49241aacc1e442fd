package pipeline

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/spacefix/spacefix/internal/access"
	"github.com/spacefix/spacefix/internal/interceptors"
)

// policyState is the front's part of the policy point: the options and
// each project's interceptor chain.
type policyState struct {
	opts    PolicyOptions
	version string // the gateway's, in the interceptors' client info
	log     *slog.Logger

	mu     sync.Mutex
	chains map[int64]projectChain // by project
}

// projectChain is the interceptor chain of one policy version.
type projectChain struct {
	version int64
	chain   *interceptors.Chain // nil: the version lists none
}

// chain returns the project's interceptor chain for the policy version
// its controls carry: one chain per project and version, listed
// (interceptors/list) in the background when the version is first seen,
// and closed when a newer version replaces it; bridged carries the
// requests of the entries that name a bridged agent of the project (the
// chain lists those again when the agent connects again). Nil: no
// interceptors.
func (ps *policyState) chain(projectID int64, c *access.Controls, bridged interceptors.Agents) *interceptors.Chain {
	if c.Policy == nil || len(c.Policy.Document().Interceptors) == 0 {
		ps.mu.Lock()
		old, ok := ps.chains[projectID]
		delete(ps.chains, projectID)
		ps.mu.Unlock()
		if ok && old.chain != nil {
			// Calls under way may still run on it.
			time.AfterFunc(chainGrace, old.chain.Close)
		}
		return nil
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	cur, ok := ps.chains[projectID]
	if ok && cur.version >= c.PolicyVersion {
		// A gateway may read an older version for up to a second after a
		// newer one: it uses the newer chain rather than flap.
		return cur.chain
	}
	ch := interceptors.New(c.Policy.Document().Interceptors, interceptors.Options{
		HTTPClient: ps.opts.HTTPClient, Version: ps.version, Log: ps.log, Agents: bridged,
	})
	if ps.chains == nil {
		ps.chains = make(map[int64]projectChain)
	}
	ps.chains[projectID] = projectChain{version: c.PolicyVersion, chain: ch}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, err := range ch.Discover(ctx) {
			ps.log.Warn("list a project's interceptors", "project", projectID, "version", c.PolicyVersion, "err", err)
		}
	}()
	if ok && cur.chain != nil {
		// Calls under way may still run on it.
		time.AfterFunc(chainGrace, cur.chain.Close)
	}
	return ch
}

// chainGrace is how long a project's chain a newer policy version
// replaced (or dropped) stays open for the calls still running on it.
const chainGrace = time.Minute

// close closes every chain.
func (ps *policyState) close() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for id, c := range ps.chains {
		if c.chain != nil {
			c.chain.Close()
		}
		delete(ps.chains, id)
	}
}

// InterceptorStatus is what this gateway found at the interceptor servers
// of the project's policy, for the version its controls carry now
// ([interceptors.Chain.Status]: it lists those an event would list now),
// in the policy's order, and that version. No servers when the policy
// lists none, or does not compile on this gateway.
func (f *Pipeline) InterceptorStatus(ctx context.Context, projectID int64) (version int64, servers []interceptors.ServerStatus) {
	c := f.controls.Get(ctx, projectID)
	return c.PolicyVersion, f.policy.chain(projectID, c, f.Bridged(projectID)).Status(ctx)
}
