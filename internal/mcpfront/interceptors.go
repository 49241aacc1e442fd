package mcpfront

import (
	"context"

	"github.com/spacefix/spacefix/internal/interceptors"
)

// InterceptorStatus is what this gateway found at the interceptor servers
// of the project's policy, and the policy version they are of
// ([pipeline.Pipeline.InterceptorStatus]); the dashboard shows it.
func (f *Front) InterceptorStatus(ctx context.Context, projectID int64) (version int64, servers []interceptors.ServerStatus) {
	return f.pipe.InterceptorStatus(ctx, projectID)
}
