package mcpfront

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/recovery"
)

// tellSubscribers passes resource updates on, in the order they came,
// until stop is closed.
func (f *Front) tellSubscribers(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case c := <-f.updated:
			recovery.Do(f.log, "tell subscribers a resource changed", func() { f.resourceUpdated(c.Project, c.URI) })
		}
	}
}

// resourceUpdated tells the project's sessions subscribed to uri that it
// changed (notifications/resources/updated), as its agent said.
func (f *Front) resourceUpdated(projectID int64, uri string) {
	f.mu.Lock()
	var servers []*mcp.Server
	for _, v := range f.views {
		if v.key.ProjectID == projectID {
			servers = append(servers, v.server)
		}
	}
	f.mu.Unlock()
	for _, s := range servers {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := s.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
			f.log.Debug("tell subscribers a resource changed", "uri", uri, "err", err)
		}
		cancel()
	}
}
