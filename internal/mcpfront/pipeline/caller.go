package pipeline

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/oauth"
	"github.com/spacefix/spacefix/internal/store"
)

// Who is calling, in the gateway's own words: every call, read, get and
// completion tells its agent the key, the project and the scopes, and for
// an OAuth token the person, the app and the person's role. The client's
// own secret (its key or token) is never part of it: a Caller is built
// from what the store says about the key, never from the request.

// errWho is what a client reads when the gateway could not look up who
// an OAuth call's person is (a store failure; the log has it).
var errWho = errors.New("The gateway could not look up who is calling. Try again in a moment.")

// callerTTL is how long a grant's person, app and role are kept: a grant's
// person never changes, but an email or a role may.
const callerTTL = time.Minute

// people is what the gateway reads to say who an OAuth call's person is;
// the store has it.
type people interface {
	OAuthGrant(ctx context.Context, id string) (store.OAuthGrant, error)
	Member(ctx context.Context, projectID, userID int64) (store.Member, error)
}

// callers keeps, per OAuth grant, who is calling; the zero value is ready.
type callers struct {
	mu sync.Mutex
	m  map[string]cachedCaller // by grant id
}

type cachedCaller struct {
	c       agentproto.Caller // its pointers and slice are shared: never written
	expires time.Time
}

// Caller returns who makes a call with key, with the client capabilities
// caps the handler may use. A client key speaks for no one person: it has
// the key, the project and the scopes the key allows. An OAuth key (a
// grant) also has the person who approved it, the app and the person's
// role in the project, looked up once a minute per grant. The error,
// errWho, is for the client; the log has the cause.
func (f *Pipeline) Caller(ctx context.Context, key store.Key, caps []string) (agentproto.Caller, error) {
	if !key.OAuth {
		scopes := scopesRW
		if key.ReadOnly {
			scopes = scopesR
		}
		return agentproto.Caller{KeyID: key.ID, KeyName: key.Name, Capabilities: caps,
			Project: key.ProjectName, Scopes: scopes}, nil
	}
	c, err := f.grantCaller(ctx, key)
	if err != nil {
		f.log.Error("look up an OAuth call's person", "grant", key.ID, "err", err)
		return agentproto.Caller{}, errWho
	}
	c.Capabilities = caps
	return c, nil
}

// The scopes of a client key: slices shared by every caller, never written.
var (
	scopesR  = []string{oauth.ScopeRead}
	scopesRW = []string{oauth.ScopeRead, oauth.ScopeWrite}
)

// grantCaller returns who calls with OAuth key (the grant), from the cache
// or the store.
func (f *Pipeline) grantCaller(ctx context.Context, key store.Key) (agentproto.Caller, error) {
	now := time.Now()
	cs := &f.callers
	cs.mu.Lock()
	e, ok := cs.m[key.ID]
	cs.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.c, nil
	}
	p, ok := f.store.(people)
	if !ok {
		return agentproto.Caller{}, errors.New("the store cannot say who a grant's person is")
	}
	g, err := p.OAuthGrant(ctx, key.ID)
	if err != nil {
		return agentproto.Caller{}, err
	}
	c := agentproto.Caller{
		KeyID: key.ID, KeyName: key.Name,
		Person:  &agentproto.Person{ID: strconv.FormatInt(g.UserID, 10), Email: g.UserEmail, Name: g.UserName},
		App:     &agentproto.App{ID: g.ClientID, Name: g.ClientName},
		Project: g.ProjectName,
		Scopes:  strings.Fields(g.Scope),
	}
	m, err := p.Member(ctx, g.ProjectID, g.UserID)
	switch {
	case err == nil:
		c.Role = string(m.Role)
	case !errors.Is(err, store.ErrNotFound): // not a member (any more): no role
		return agentproto.Caller{}, err
	}
	cs.mu.Lock()
	if cs.m == nil || len(cs.m) > 10000 { // bounded: grants come and go
		cs.m = make(map[string]cachedCaller)
	}
	cs.m[key.ID] = cachedCaller{c: c, expires: now.Add(callerTTL)}
	cs.mu.Unlock()
	return c, nil
}
