package gateway

import (
	"context"
	"errors"
	"fmt"

	"github.com/spacefix/spacefix/internal/auth"
	"github.com/spacefix/spacefix/internal/store"
)

// DefaultProject is the project a first start creates.
const DefaultProject = "default"

// FirstStart holds what a first start created. The secrets exist only here:
// the store keeps their hashes.
type FirstStart struct {
	Project   string
	AgentKey  string
	ClientKey string
}

// Bootstrap prepares an empty store: it creates project "default" with an
// agent key and a client key. On a store that has a project it does nothing
// and returns nil; so does it when another process sharing the store (a
// replica starting at the same moment) creates the project first.
func Bootstrap(ctx context.Context, st store.Store) (*FirstStart, error) {
	ps, err := st.Projects(ctx)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	if len(ps) > 0 {
		return nil, nil
	}
	p, err := st.CreateProject(ctx, DefaultProject)
	if errors.Is(err, store.ErrExists) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	_, agentSecret, err := auth.CreateKey(ctx, st, store.Key{ProjectID: p.ID, Kind: store.KindAgent, Name: "first agent key"})
	if err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	_, clientSecret, err := auth.CreateKey(ctx, st, store.Key{ProjectID: p.ID, Kind: store.KindClient, Name: "first client key"})
	if err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	return &FirstStart{Project: p.Name, AgentKey: agentSecret, ClientKey: clientSecret}, nil
}
