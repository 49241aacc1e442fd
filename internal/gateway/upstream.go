package gateway

import "context"

// resealUpstream seals again, with the secret key file's first key, the
// upstream tokens and client secrets sealed with an older one (a key
// rotation: docs/deployment.md), and logs how many. A failure is logged,
// not fatal: the gateway serves all the rest, and a person whose account
// no key opens connects it again.
func (g *Gateway) resealUpstream(ctx context.Context) {
	n, err := g.upstream.Reseal(ctx)
	if n > 0 {
		g.log.Info("sealed upstream tokens again with the secret key file's first key", "values", n)
	}
	if err != nil {
		g.log.Warn("seal upstream tokens again with the secret key file's first key", "err", err)
	}
}
