package mcpfront

import (
	"context"
	"sync"
	"time"

	"github.com/spacefix/spacefix/internal/store"
)

// settingsCache keeps project settings for ttl, so the call path does not
// read the store on every request.
type settingsCache struct {
	store store.Store
	ttl   time.Duration

	mu sync.Mutex
	m  map[int64]cachedSettings
}

type cachedSettings struct {
	s       store.ProjectSettings
	expires time.Time
}

func newSettingsCache(s store.Store, ttl time.Duration) *settingsCache {
	return &settingsCache{store: s, ttl: ttl, m: make(map[int64]cachedSettings)}
}

// get returns a project's settings; on a store error, the last known ones
// (or the defaults) keep the gateway serving.
func (c *settingsCache) get(ctx context.Context, projectID int64) store.ProjectSettings {
	now := time.Now()
	c.mu.Lock()
	cs, ok := c.m[projectID]
	c.mu.Unlock()
	if ok && now.Before(cs.expires) {
		return cs.s
	}
	p, err := c.store.ProjectByID(context.WithoutCancel(ctx), projectID)
	if err == nil {
		cs.s = p.Settings
	}
	cs.expires = now.Add(c.ttl)
	c.mu.Lock()
	c.m[projectID] = cs
	c.mu.Unlock()
	return cs.s
}

func (c *settingsCache) forget(projectID int64) {
	c.mu.Lock()
	delete(c.m, projectID)
	c.mu.Unlock()
}
