package dashboard

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spacefix/spacefix/internal/access"
	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/store"
)

// maxMetaRunes bounds a display name or author.
const maxMetaRunes = 100

// agentKeyJSON is an agent key with what people read about it.
type agentKeyJSON struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	DisplayName string `json:"displayName"`
	Author      string `json:"author"`
	Community   bool   `json:"community"`
	// IdentityAudience, when set, is the audience of the identity token
	// every call to the key's replicas carries (docs/identity.md).
	IdentityAudience string    `json:"identityAudience"`
	CreatedAt        time.Time `json:"createdAt"`
	Revoked          bool      `json:"revoked"`
	Connected        int       `json:"connected"` // replicas
	// Differs lists the tools whose connected replicas register different
	// definitions: a sign that two services share this key.
	Differs []toolDifferJSON `json:"differs,omitempty"`
}

// toolDifferJSON is one tool whose replicas differ.
type toolDifferJSON struct {
	Tool        string   `json:"tool"`        // exposed name
	Fields      string   `json:"fields"`      // e.g. "readOnlyHint, description"
	Differences []string `json:"differences"` // e.g. "annotations.readOnlyHint: true vs false"
}

// Detail joins the differences for display.
func (t toolDifferJSON) Detail() string { return strings.Join(t.Differences, "; ") }

// replicaJSON is one connected agent process.
type replicaJSON struct {
	ID       string    `json:"id"`
	AgentKey string    `json:"agentKey"`
	Agent    string    `json:"agent"`
	Instance string    `json:"instance"`
	Version  string    `json:"version"`
	SDK      string    `json:"sdk"`
	Since    time.Time `json:"since"`
	Inflight int64     `json:"inflight"`
	Tools    int       `json:"tools"`
	Disabled bool      `json:"disabled"`
	// Gateway, for a replica another gateway holds (several gateways on
	// one store and bus), is that gateway's id; "" for this one.
	Gateway string `json:"gateway,omitempty"`
	// Bridge, for a replica run by `spacefix bridge`, is the MCP server it
	// stands for: transport, command or URL (without secrets), and the
	// server's own name and version.
	Bridge *agentproto.Bridge `json:"bridge,omitempty"`
}

type agentsJSON struct {
	Keys     []agentKeyJSON `json:"keys"`
	Replicas []replicaJSON  `json:"replicas"`
}

// agentsOf lists a project's agent keys and connected replicas.
func (d *Dashboard) agentsOf(ctx context.Context, projectID int64) (agentsJSON, error) {
	keys, err := d.st.Keys(ctx, projectID)
	if err != nil {
		return agentsJSON{}, err
	}
	reps := d.reg.Replicas(projectID)
	out := agentsJSON{Keys: []agentKeyJSON{}, Replicas: make([]replicaJSON, 0, len(reps))}
	byID := make(map[string]store.Key)
	count := make(map[string]int)
	for _, rep := range reps {
		count[rep.AgentKey]++
	}
	differs := make(map[string][]toolDifferJSON)
	for _, t := range d.reg.Snapshot(projectID).ToolList {
		if len(t.Differs) > 0 {
			differs[t.AgentKey] = append(differs[t.AgentKey], toolDifferJSON{
				Tool: t.Name, Fields: strings.Join(agents.DifferingFields(t.Differs), ", "), Differences: t.Differs,
			})
		}
	}
	for _, k := range keys {
		if k.Kind != store.KindAgent {
			continue
		}
		byID[k.ID] = k
		out.Keys = append(out.Keys, agentKeyJSON{
			ID: k.ID, Name: k.Name, DisplayName: k.DisplayName, Author: k.Author, Community: k.Community,
			IdentityAudience: k.IdentityAudience, CreatedAt: k.CreatedAt, Revoked: k.Revoked(), Connected: count[k.ID], Differs: differs[k.ID],
		})
	}
	for _, rep := range reps {
		out.Replicas = append(out.Replicas, replicaOut(rep, byID[rep.AgentKey]))
	}
	return out, nil
}

func replicaOut(rep *agents.Replica, k store.Key) replicaJSON {
	out := replicaJSON{
		ID: rep.ID, AgentKey: rep.AgentKey, Instance: rep.Instance, Since: rep.Since,
		Inflight: rep.Inflight(), Disabled: rep.Disabled(), Agent: access.AgentName(k, rep.Reg),
		Gateway: rep.Gateway,
	}
	if rep.Reg != nil {
		out.Version, out.SDK, out.Tools = rep.Reg.Version, rep.Reg.SDK, len(rep.Reg.Tools)
		out.Bridge = rep.Reg.Bridge
	}
	return out
}

func (d *Dashboard) apiAgents(w http.ResponseWriter, r *http.Request) error {
	p, err := d.project(r)
	if err != nil {
		return err
	}
	out, err := d.agentsOf(r.Context(), p.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// keyMetaPatch changes the fields that are present.
type keyMetaPatch struct {
	DisplayName *string `json:"displayName"`
	Author      *string `json:"author"`
	Community   *bool   `json:"community"`
	// IdentityAudience turns identity tokens on (an audience) or off ("")
	// for the key's calls; audited apart, as key.identity.
	IdentityAudience *string `json:"identityAudience"`
}

// changesMeta reports whether the patch names a field of [store.KeyMeta].
func (m keyMetaPatch) changesMeta() bool {
	return m.DisplayName != nil || m.Author != nil || m.Community != nil
}

func (m keyMetaPatch) apply(k store.KeyMeta) (store.KeyMeta, error) {
	for _, f := range []struct {
		name string
		v    *string
		dst  *string
	}{{"displayName", m.DisplayName, &k.DisplayName}, {"author", m.Author, &k.Author}} {
		if f.v == nil {
			continue
		}
		s := strings.TrimSpace(*f.v)
		if utf8.RuneCountInString(s) > maxMetaRunes {
			return k, fieldError(f.name, "at most %d characters", maxMetaRunes)
		}
		*f.dst = s
	}
	if m.Community != nil {
		k.Community = *m.Community
	}
	return k, nil
}

func (d *Dashboard) apiPatchAgentKey(w http.ResponseWriter, r *http.Request) error {
	p, err := d.project(r)
	if err != nil {
		return err
	}
	k, err := d.projectKey(r, p)
	if err != nil {
		return err
	}
	if k.Kind != store.KindAgent {
		return errorf(http.StatusBadRequest, "Key %s is a client key; only agent keys have a display name, author, community flag and identity audience.", k.ID)
	}
	var patch keyMetaPatch
	if err := readJSON(r, &patch); err != nil {
		return err
	}
	meta, err := patch.apply(k.KeyMeta)
	if err != nil {
		return err
	}
	aud := k.IdentityAudience
	if patch.IdentityAudience != nil {
		aud = strings.TrimSpace(*patch.IdentityAudience)
		if err := store.CheckIdentityAudience(aud); err != nil {
			return fieldError("identityAudience", "%s", err.Error())
		}
	}
	if patch.changesMeta() || aud == k.IdentityAudience {
		if err := d.st.SetKeyMeta(r.Context(), k.ID, meta); err != nil {
			return err
		}
		d.log.Info("agent key updated", "project", p.Name, "key", k.ID, "by", principalFrom(r.Context()).name())
		d.audit(r, p.ID, "agent_key.update", k.ID, keyMetaAudit(k.KeyMeta), keyMetaAudit(meta))
		k.KeyMeta = meta
	}
	if aud != k.IdentityAudience {
		if err := d.st.SetKeyIdentityAudience(r.Context(), k.ID, aud); err != nil {
			return err
		}
		d.log.Info("agent key identity audience set", "project", p.Name, "key", k.ID, "audience", aud, "by", principalFrom(r.Context()).name())
		d.audit(r, p.ID, "key.identity", k.ID, keyIdentityAudit(k.IdentityAudience), keyIdentityAudit(aud))
		k.IdentityAudience = aud
	}
	d.notify(p.ID) // a community flag changes descriptions; the audience, the calls' tokens
	writeJSON(w, http.StatusOK, keyOut(k))
	return nil
}

// keyIdentityAudit is what the audit log keeps of an agent key's identity
// setting.
func keyIdentityAudit(aud string) map[string]any {
	return map[string]any{"identityAudience": aud}
}

// projectKey loads the key named in the path, if it belongs to p.
func (d *Dashboard) projectKey(r *http.Request, p store.Project) (store.Key, error) {
	id := r.PathValue("id")
	k, err := d.st.Key(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && k.ProjectID != p.ID) {
		return store.Key{}, errorf(http.StatusNotFound, "Project %q has no key %q. See the Keys and Agents pages, or GET /api/projects/%s/keys.", p.Name, id, p.Name)
	}
	return k, err
}

func (d *Dashboard) apiPatchReplica(w http.ResponseWriter, r *http.Request) error {
	p, err := d.project(r)
	if err != nil {
		return err
	}
	var in struct {
		Disabled *bool `json:"disabled"`
	}
	if err := readJSON(r, &in); err != nil {
		return err
	}
	if in.Disabled == nil {
		return fieldError("disabled", "send {\"disabled\": true} or {\"disabled\": false}")
	}
	id := r.PathValue("id")
	for _, rep := range d.reg.Replicas(p.ID) {
		if rep.ID != id {
			continue
		}
		was := rep.Disabled()
		d.reg.SetReplicaDisabled(rep, *in.Disabled)
		d.log.Info("replica disabled", "project", p.Name, "replica", id, "disabled", *in.Disabled, "by", principalFrom(r.Context()).name())
		k, _ := d.st.Key(r.Context(), rep.AgentKey)
		d.audit(r, p.ID, "replica.update", id, map[string]any{"agentKey": rep.AgentKey, "disabled": was},
			map[string]any{"agentKey": rep.AgentKey, "disabled": *in.Disabled})
		writeJSON(w, http.StatusOK, replicaOut(rep, k))
		return nil
	}
	return errorf(http.StatusNotFound, "No replica %q is connected to project %q now. It may have disconnected; reload the Agents page.", id, p.Name)
}

// keyMetaAudit is what the audit log keeps of an agent key's metadata.
func keyMetaAudit(m store.KeyMeta) map[string]any {
	return map[string]any{"displayName": m.DisplayName, "author": m.Author, "community": m.Community}
}
