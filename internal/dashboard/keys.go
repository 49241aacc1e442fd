package dashboard

import (
	"net/http"
	"strings"
	"time"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/auth"
	"github.com/spacefix/spacefix/internal/changes"
	"github.com/spacefix/spacefix/internal/store"
)

// keyJSON is a key without its secret.
type keyJSON struct {
	ID          string   `json:"id"`
	Kind        string   `json:"kind"`
	Name        string   `json:"name"`
	ReadOnly    bool     `json:"readOnly"`
	Tools       []string `json:"tools"`
	DisplayName string   `json:"displayName,omitempty"`
	Author      string   `json:"author,omitempty"`
	Community   bool     `json:"community,omitempty"`
	// IdentityAudience, on an agent key, is the audience of the identity
	// tokens its calls carry; empty: none.
	IdentityAudience string    `json:"identityAudience,omitempty"`
	CreatedAt        time.Time `json:"createdAt"`
	Revoked          bool      `json:"revoked"`
	RevokedAt        time.Time `json:"revokedAt,omitzero"`
}

func keyOut(k store.Key) keyJSON {
	tools := k.Tools
	if tools == nil {
		tools = []string{}
	}
	return keyJSON{
		ID: k.ID, Kind: k.Kind, Name: k.Name, ReadOnly: k.ReadOnly, Tools: tools,
		DisplayName: k.DisplayName, Author: k.Author, Community: k.Community,
		IdentityAudience: k.IdentityAudience, CreatedAt: k.CreatedAt, Revoked: k.Revoked(), RevokedAt: k.RevokedAt,
	}
}

func (d *Dashboard) apiKeys(w http.ResponseWriter, r *http.Request) error {
	p, err := d.project(r)
	if err != nil {
		return err
	}
	ks, err := d.st.Keys(r.Context(), p.ID)
	if err != nil {
		return err
	}
	out := make([]keyJSON, 0, len(ks))
	kind := r.URL.Query().Get("kind")
	for _, k := range ks {
		if kind == "" || k.Kind == kind {
			out = append(out, keyOut(k))
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// newKeyJSON asks for a key.
type newKeyJSON struct {
	Kind        string   `json:"kind"`
	Name        string   `json:"name"`
	ReadOnly    bool     `json:"readOnly"`
	Tools       []string `json:"tools"`
	DisplayName string   `json:"displayName"`
	Author      string   `json:"author"`
	Community   bool     `json:"community"`
}

func (in newKeyJSON) key(projectID int64) (store.Key, error) {
	k := store.Key{ProjectID: projectID, Kind: in.Kind, Name: strings.TrimSpace(in.Name), ReadOnly: in.ReadOnly}
	switch in.Kind {
	case store.KindClient:
		if in.DisplayName != "" || in.Author != "" || in.Community {
			return k, errorf(http.StatusBadRequest, "displayName, author and community describe agent keys; leave them out for a client key.")
		}
		for _, t := range in.Tools {
			if t = strings.TrimSpace(t); t == "" {
				continue
			} else if !agentproto.ValidName(t) {
				return k, fieldError("tools", "%q is not a tool name: 1 to 64 characters from A-Z a-z 0-9 _ -", t)
			}
			k.Tools = append(k.Tools, strings.TrimSpace(t))
		}
	case store.KindAgent:
		if in.ReadOnly || len(in.Tools) > 0 {
			return k, errorf(http.StatusBadRequest, "readOnly and tools limit client keys; leave them out for an agent key.")
		}
		meta, err := keyMetaPatch{DisplayName: &in.DisplayName, Author: &in.Author, Community: &in.Community}.apply(store.KeyMeta{})
		if err != nil {
			return k, err
		}
		k.KeyMeta = meta
	default:
		return k, fieldError("kind", "want %q or %q, not %q", store.KindAgent, store.KindClient, in.Kind)
	}
	return k, nil
}

func (d *Dashboard) apiCreateKey(w http.ResponseWriter, r *http.Request) error {
	p, err := d.project(r)
	if err != nil {
		return err
	}
	var in newKeyJSON
	if err := readJSON(r, &in); err != nil {
		return err
	}
	k, err := in.key(p.ID)
	if err != nil {
		return err
	}
	k, secret, err := auth.CreateKey(r.Context(), d.st, k)
	if err != nil {
		return err
	}
	d.notify(p.ID)
	d.log.Info("key created", "project", p.Name, "key", k.ID, "kind", k.Kind, "by", principalFrom(r.Context()).name())
	d.audit(r, p.ID, "key.create", k.ID, nil, store.KeyAudit(k))
	writeJSON(w, http.StatusCreated, struct {
		Key    keyJSON `json:"key"`
		Secret string  `json:"secret"`
	}{keyOut(k), secret})
	return nil
}

func (d *Dashboard) apiRevokeKey(w http.ResponseWriter, r *http.Request) error {
	p, err := d.project(r)
	if err != nil {
		return err
	}
	k, err := d.projectKey(r, p)
	if err != nil {
		return err
	}
	if err := d.st.RevokeKey(r.Context(), k.ID); err != nil {
		return err
	}
	// A revoked agent key's replicas go now, not at their next reconnect.
	for _, rep := range d.reg.Replicas(p.ID) {
		if rep.AgentKey == k.ID && rep.Conn != nil {
			rep.Conn.Close("agent key revoked")
		}
	}
	d.changes.Publish(changes.Change{Project: p.ID, Kind: changes.KeyRevoked, Key: k.ID})
	d.log.Info("key revoked", "project", p.Name, "key", k.ID, "by", principalFrom(r.Context()).name())
	before := store.KeyAudit(k)
	k, err = d.st.Key(r.Context(), k.ID)
	if err != nil {
		return err
	}
	d.audit(r, p.ID, "key.revoke", k.ID, before, store.KeyAudit(k))
	writeJSON(w, http.StatusOK, keyOut(k))
	return nil
}
