package dashboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spacefix/spacefix/internal/dashboard/apitypes"
	"github.com/spacefix/spacefix/internal/policy"
	"github.com/spacefix/spacefix/internal/store"
)

// maxPolicyBody bounds a policy document sent to the API; policy.MaxRules
// and the per-rule limits bound what is in it.
const maxPolicyBody = 1 << 20

// maskedValue stands for an interceptor header's value in every answer and
// audit entry: header values are write-only, like secrets. Sent back in a
// PUT, it keeps the saved value.
const maskedValue = "••••••"

// policyJSON is a project's policy as GET …/policy shows it.
type policyJSON struct {
	Version      int64                `json:"version"`
	UpdatedAt    *time.Time           `json:"updatedAt"`
	UpdatedBy    string               `json:"updatedBy"`
	Rules        []policy.Rule        `json:"rules"`
	Interceptors []policy.Interceptor `json:"interceptors"`
}

// policyAudit is a policy version as the audit log keeps it: the document
// with its header values masked.
type policyAudit struct {
	Version      int64                `json:"version"`
	Rules        []policy.Rule        `json:"rules"`
	Interceptors []policy.Interceptor `json:"interceptors"`
}

// savedDocument reads a saved policy's document. It does not refuse
// unknown fields: a document a newer build saved is still shown.
func savedDocument(sp store.Policy) (policy.Document, error) {
	var doc policy.Document
	if sp.Version == 0 || len(sp.Document) == 0 {
		return doc, nil
	}
	if err := json.Unmarshal(sp.Document, &doc); err != nil {
		return doc, fmt.Errorf("policy version %d: %w", sp.Version, err)
	}
	return doc, nil
}

// masked returns the interceptors with every header value replaced by
// [maskedValue], never sharing a map with list.
func masked(list []policy.Interceptor) []policy.Interceptor {
	out := make([]policy.Interceptor, len(list))
	for i, ic := range list {
		out[i] = ic
		if len(ic.Headers) > 0 {
			out[i].Headers = make(map[string]string, len(ic.Headers))
			for k := range ic.Headers {
				out[i].Headers[k] = maskedValue
			}
		}
	}
	return out
}

func policyOut(sp store.Policy, doc policy.Document) policyJSON {
	out := policyJSON{Version: sp.Version, UpdatedBy: sp.UpdatedBy, Rules: doc.Rules, Interceptors: masked(doc.Interceptors)}
	if sp.Version > 0 && !sp.UpdatedAt.IsZero() {
		at := sp.UpdatedAt.UTC()
		out.UpdatedAt = &at
	}
	if out.Rules == nil {
		out.Rules = []policy.Rule{}
	}
	return out
}

func auditOut(version int64, doc policy.Document) policyAudit {
	a := policyAudit{Version: version, Rules: doc.Rules, Interceptors: masked(doc.Interceptors)}
	if a.Rules == nil {
		a.Rules = []policy.Rule{}
	}
	return a
}

func (d *Dashboard) apiPolicy(w http.ResponseWriter, r *http.Request) error {
	_, sp, doc, err := d.savedPolicy(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, policyOut(sp, doc))
	return nil
}

// savedPolicy reads the request's project and its saved policy, decoded.
func (d *Dashboard) savedPolicy(r *http.Request) (store.Project, store.Policy, policy.Document, error) {
	proj, err := d.project(r)
	if err != nil {
		return proj, store.Policy{}, policy.Document{}, err
	}
	sp, err := d.st.Policy(r.Context(), proj.ID)
	if err != nil {
		return proj, sp, policy.Document{}, err
	}
	doc, err := savedDocument(sp)
	return proj, sp, doc, err
}

// policyBody reads a request body of at most maxPolicyBody bytes.
func policyBody(r *http.Request) ([]byte, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return nil, errorf(http.StatusUnsupportedMediaType, "Send JSON with Content-Type: application/json.")
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, maxPolicyBody+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxPolicyBody {
		return nil, errorf(http.StatusRequestEntityTooLarge, "The policy is larger than %d bytes; a policy keeps at most %d rules.", maxPolicyBody, policy.MaxRules)
	}
	return b, nil
}

// splitVersion takes the optional "version" out of a PUT body and parses
// the rest as a policy document, refusing unknown fields.
func splitVersion(b []byte) (version *int64, doc policy.Document, err error) {
	var fields map[string]json.RawMessage
	err = json.Unmarshal(b, &fields)
	if err == nil && fields == nil {
		err = errors.New("it is null")
	}
	if err != nil {
		return nil, doc, &policyRefusal{apitypes.PolicyError{Index: -1,
			Error: fmt.Sprintf("The policy is not a JSON object: %v. Send {\"rules\": [...]}; see docs/policy.md.", err)}}
	}
	if raw, ok := fields["version"]; ok {
		var v int64
		if err := json.Unmarshal(raw, &v); err != nil || v < 0 {
			return nil, doc, &policyRefusal{apitypes.PolicyError{Index: -1, Field: "version",
				Error: "version: want the version number GET …/policy answered, such as 3"}}
		}
		version = &v
		delete(fields, "version")
		if b, err = json.Marshal(fields); err != nil {
			return nil, doc, err
		}
	}
	doc, err = policy.Parse(b)
	if err != nil {
		return nil, doc, &policyRefusal{apitypes.PolicyError{Index: -1, Error: capitalize(err.Error()) + ". See docs/policy.md."}}
	}
	return version, doc, nil
}

// policyRefusal is a 400 with the position of what is wrong.
type policyRefusal struct{ e apitypes.PolicyError }

func (p *policyRefusal) Error() string { return p.e.Error }

// refusalOf describes a Parse or Compile error for the API.
func refusalOf(err error) apitypes.PolicyError {
	var re *policy.RuleError
	var ie *policy.InterceptorError
	var pr *policyRefusal
	switch {
	case errors.As(err, &re):
		return apitypes.PolicyError{Error: re.Error(), Rule: re.Name, Index: re.Index, Field: re.Field, Line: re.Line, Column: re.Column}
	case errors.As(err, &ie):
		i := ie.Index
		return apitypes.PolicyError{Error: ie.Error(), Index: -1, Field: ie.Field, Interceptor: &i}
	case errors.As(err, &pr):
		return pr.e
	}
	return apitypes.PolicyError{Error: capitalize(err.Error()), Index: -1}
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// keepHeaders replaces each header value sent as [maskedValue] with the
// saved value of the same header of the same interceptor (matched by name,
// else by url or agent). A value is kept only for the address it was
// saved for: a masked header on an interceptor whose url or agent changed
// is refused, so a saved secret cannot be sent somewhere new unseen.
func keepHeaders(next, saved []policy.Interceptor) error {
	for i, ic := range next {
		for k, v := range ic.Headers {
			if v != maskedValue {
				continue
			}
			n := i
			refuse := func(format string, args ...any) error {
				return &policyRefusal{apitypes.PolicyError{Index: -1, Interceptor: &n, Field: "headers",
					Error: fmt.Sprintf("interceptor %d: headers: ", i+1) + fmt.Sprintf(format, args...)}}
			}
			old, found := savedInterceptor(saved, ic)
			switch {
			case found && (old.URL != ic.URL || old.Agent != ic.Agent):
				return refuse("%q is sent as %q, which keeps the saved value, but the interceptor's address changed; send the value again for the new address", k, maskedValue)
			case !found || old.Headers[k] == "":
				return refuse("%q is sent as %q, which keeps a saved value, but this interceptor has no saved %q header; send its value", k, maskedValue, k)
			}
			ic.Headers[k] = old.Headers[k]
		}
	}
	return nil
}

// savedInterceptor finds the saved entry ic stands for: the same name, or
// for an entry without one the same url and agent.
func savedInterceptor(saved []policy.Interceptor, ic policy.Interceptor) (policy.Interceptor, bool) {
	for _, s := range saved {
		if ic.Name != "" && s.Name == ic.Name || ic.Name == "" && s.Name == "" && s.URL == ic.URL && s.Agent == ic.Agent {
			return s, true
		}
	}
	return policy.Interceptor{}, false
}

func (d *Dashboard) apiPutPolicy(w http.ResponseWriter, r *http.Request) error {
	proj, err := d.project(r)
	if err != nil {
		return err
	}
	b, err := policyBody(r)
	if err != nil {
		return err
	}
	version, doc, err := splitVersion(b)
	if err != nil {
		return refuse(w, err)
	}
	prev, err := d.st.Policy(r.Context(), proj.ID)
	if err != nil {
		return err
	}
	if version != nil && *version != prev.Version {
		return staleVersion(proj.Name, *version, prev)
	}
	before, err := savedDocument(prev)
	if err != nil {
		return err
	}
	if err := keepHeaders(doc.Interceptors, before.Interceptors); err != nil {
		return refuse(w, err)
	}
	if _, err := policy.Compile(doc, policy.Options{}); err != nil {
		return refuse(w, err)
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	by := principalFrom(r.Context()).name()
	saved, err := d.st.SavePolicy(r.Context(), proj.ID, prev.Version, raw, by)
	if errors.Is(err, store.ErrConflict) {
		latest, lerr := d.st.Policy(r.Context(), proj.ID)
		if lerr != nil {
			return lerr
		}
		return staleVersion(proj.Name, prev.Version, latest)
	}
	if err != nil {
		return err
	}
	d.notify(proj.ID)
	d.log.Info("project policy saved", "project", proj.Name, "version", saved.Version, "rules", len(doc.Rules),
		"interceptors", len(doc.Interceptors), "by", by)
	d.audit(r, proj.ID, "policy.update", proj.Name, auditOut(prev.Version, before), auditOut(saved.Version, doc))
	writeJSON(w, http.StatusOK, policyOut(saved, doc))
	return nil
}

// refuse answers a refused document with a 400 naming where it is wrong.
func refuse(w http.ResponseWriter, err error) error {
	var he *httpError
	if errors.As(err, &he) {
		return err
	}
	writeJSON(w, http.StatusBadRequest, refusalOf(err))
	return nil
}

func staleVersion(project string, sent int64, latest store.Policy) error {
	by := ""
	if latest.UpdatedBy != "" {
		by = " by " + latest.UpdatedBy
	}
	return errorf(http.StatusConflict, "The policy of project %q changed since you read it: you edited version %d, and version %d was saved%s. "+
		"Reload it, apply your change again and save.", project, sent, latest.Version, by)
}

// checkDocument reports every error of a document: each rule compiled on
// its own (so one mistake does not hide the next), then the document as a
// whole (names used twice, interceptors, the number of rules).
func checkDocument(doc policy.Document) []apitypes.PolicyError {
	var errs []apitypes.PolicyError
	bad := map[int]bool{}
	for i, rule := range doc.Rules {
		_, err := policy.Compile(policy.Document{Rules: []policy.Rule{rule}}, policy.Options{})
		var re *policy.RuleError
		if errors.As(err, &re) {
			re.Index = i
			errs = append(errs, refusalOf(re))
			bad[i] = true
		}
	}
	if _, err := policy.Compile(doc, policy.Options{}); err != nil {
		var re *policy.RuleError
		if !errors.As(err, &re) || !bad[re.Index] {
			errs = append(errs, refusalOf(err))
		}
	}
	return errs
}

func (d *Dashboard) apiCheckPolicy(w http.ResponseWriter, r *http.Request) error {
	b, err := policyBody(r)
	if err != nil {
		return err
	}
	_, doc, err := splitVersion(b)
	if err != nil {
		var pr *policyRefusal
		if !errors.As(err, &pr) {
			return err
		}
		writeJSON(w, http.StatusOK, apitypes.PolicyCheck{Errors: []apitypes.PolicyError{pr.e}})
		return nil
	}
	errs := checkDocument(doc)
	writeJSON(w, http.StatusOK, apitypes.PolicyCheck{OK: len(errs) == 0, Errors: errs})
	return nil
}
