package dashboard

import (
	"context"
	"net/http"

	"github.com/spacefix/spacefix/internal/dashboard/apitypes"
	"github.com/spacefix/spacefix/internal/interceptors"
	"github.com/spacefix/spacefix/internal/policy"
)

// apiPolicyInterceptors answers what this gateway found at the
// interceptor servers of the project's saved policy (GET
// …/policy/interceptors, for anyone who may read the policy).
func (d *Dashboard) apiPolicyInterceptors(w http.ResponseWriter, r *http.Request) error {
	proj, sp, doc, err := d.savedPolicy(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d.interceptorsFound(r.Context(), proj.ID, sp.Version, doc.Interceptors))
	return nil
}

// interceptorsFound pairs the saved policy's interceptor servers (version
// saved, entries) with what this gateway found at them. Asking may list a
// server never listed yet ([interceptors.Chain.Status]). While the gateway
// runs another version (for a moment after a save), or has no chain (the
// policy does not compile here), each server is not listed yet.
func (d *Dashboard) interceptorsFound(ctx context.Context, projectID, saved int64, entries []policy.Interceptor) apitypes.PolicyInterceptors {
	out := apitypes.PolicyInterceptors{Version: saved, Servers: make([]apitypes.InterceptorServer, len(entries))}
	var found []interceptors.ServerStatus
	if d.interceptors != nil && len(entries) > 0 {
		if v, st := d.interceptors(ctx, projectID); v == saved && len(st) == len(entries) {
			found = st
		}
	}
	for i, e := range entries {
		s := apitypes.InterceptorServer{Name: interceptors.Label(e), URL: e.URL, Agent: e.Agent, State: apitypes.InterceptorsNotListed,
			Interceptors: []apitypes.InterceptorInfo{}}
		if e.Agent != "" {
			s.URL = ""
		}
		if found != nil {
			serverFound(&s, found[i])
		}
		out.Servers[i] = s
	}
	return out
}

// serverFound fills s with what the chain knows of it.
func serverFound(s *apitypes.InterceptorServer, f interceptors.ServerStatus) {
	if !f.CheckedAt.IsZero() {
		at := f.CheckedAt.UTC()
		s.CheckedAt = &at
	}
	switch {
	case f.Listed:
		s.State = apitypes.InterceptorsListed
	case f.Error != "":
		s.State, s.Error = apitypes.InterceptorsUnreachable, f.Error
	}
	for _, in := range f.Interceptors {
		info := apitypes.InterceptorInfo{Name: in.Name, Type: in.Type, Hooks: []apitypes.InterceptorHook{}, Mode: "enforce", FailOpen: in.FailOpen}
		if in.Mode == policy.Audit {
			info.Mode = policy.Audit
		}
		for _, ev := range in.Hook.Events {
			info.Hooks = append(info.Hooks, apitypes.InterceptorHook{Event: ev, Phase: in.Hook.Phase})
		}
		if p := in.PriorityHint; p.Request != 0 || p.Response != 0 {
			info.PriorityHint = &apitypes.InterceptorPriority{Request: p.Request, Response: p.Response}
		}
		s.Interceptors = append(s.Interceptors, info)
	}
}
