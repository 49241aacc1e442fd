package dashboard

import (
	"context"
	"net/http"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/upstream"
)

// accountsGoing lists the upstream accounts f selects, read before a
// removal that deletes them with it (a person, a membership): the store
// removes them silently, and [Dashboard.auditGone] tells the audit log.
func (d *Dashboard) accountsGoing(ctx context.Context, f store.UpstreamFilter) ([]upstream.Account, error) {
	if d.upstream == nil {
		return nil, nil
	}
	return d.upstream.Accounts(ctx, f)
}

// auditGone writes an upstream.disconnect entry, by whoever made r, for
// each of email's accounts that went with a removal.
func (d *Dashboard) auditGone(r *http.Request, as []upstream.Account, email string) {
	for _, a := range as {
		host := remoteHost(a.Resource)
		d.log.Info("upstream account disconnected", "projectId", a.ProjectID, "agentKey", a.AgentKeyID, "host", host, "user", email,
			"by", principalFrom(r.Context()).name())
		d.audit(r, a.ProjectID, actionUpstreamDisconnect, a.AgentKeyID, upstreamAudit(a.AgentKeyID, host, email), nil)
	}
}
