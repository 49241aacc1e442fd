package dashboard

import (
	"cmp"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/spacefix/spacefix/internal/dashboard/apitypes"
	"github.com/spacefix/spacefix/internal/policy"
	"github.com/spacefix/spacefix/internal/store"
)

// policyData is what the Policy page shows: the saved rules, who saved
// them when, the document for the editor, and the choices of the "Try it"
// panel.
type policyData struct {
	Version   int64
	UpdatedAt time.Time
	UpdatedBy string
	Rules     []policy.Rule
	// Interceptors are the saved interceptor servers, header values
	// masked ([maskedValue]).
	Interceptors []policy.Interceptor
	// Servers are the same, each beside what this gateway found at it.
	Servers []interceptorRow
	// Document is the saved document as the editor starts from it,
	// indented, header values masked.
	Document string
	// Broken says why the saved document does not compile here (a newer
	// build saved it), so that every call is refused until an owner saves
	// one that does.
	Broken string
	Keys   []keyChoice // the project's client keys, for Try it's caller
	People []string    // the members' e-mails, for Try it's caller
	Tools  []string    // the tools registered now, for Try it's tool
}

// interceptorRow is one interceptor server on the Policy page: as saved
// (header values masked), and as this gateway found it.
type interceptorRow struct {
	Entry policy.Interceptor
	Found apitypes.InterceptorServer
}

func (d *Dashboard) policyPage(r *http.Request, v *view) (string, error) {
	saved, err := d.st.Policy(r.Context(), v.Project.ID)
	if err != nil {
		return "", err
	}
	data := policyData{Version: saved.Version, UpdatedAt: saved.UpdatedAt, UpdatedBy: saved.UpdatedBy, Rules: []policy.Rule{}}
	doc, err := savedDocument(saved)
	if err != nil {
		data.Broken = err.Error()
	} else if _, err := policy.Compile(doc, policy.Options{}); err != nil && saved.Version > 0 {
		data.Broken = err.Error()
	}
	if doc.Rules != nil {
		data.Rules = doc.Rules
	}
	data.Interceptors = masked(doc.Interceptors)
	found := d.interceptorsFound(r.Context(), v.Project.ID, saved.Version, doc.Interceptors)
	for i, e := range data.Interceptors {
		data.Servers = append(data.Servers, interceptorRow{Entry: e, Found: found.Servers[i]})
	}
	data.Document = editorText(policy.Document{Rules: data.Rules, Interceptors: data.Interceptors})
	if v.Can(string(store.RoleEditor)) { // Try it is for editors and owners
		if err := d.tryChoices(r, v.Project.ID, &data); err != nil {
			return "", err
		}
	}
	v.Title, v.Tab, v.Data = "Policy · "+v.Project.Name, "policy", data
	return "policy", nil
}

// tryChoices fills the callers and tools the "Try it" panel offers.
func (d *Dashboard) tryChoices(r *http.Request, projectID int64, data *policyData) error {
	ks, err := d.st.Keys(r.Context(), projectID)
	if err != nil {
		return err
	}
	for _, k := range ks {
		if k.Kind == store.KindClient && !k.Revoked() {
			data.Keys = append(data.Keys, keyChoice{ID: k.ID, Label: cmp.Or(k.Name, k.ID)})
		}
	}
	ms, err := d.st.Members(r.Context(), projectID)
	if err != nil {
		return err
	}
	for _, m := range ms {
		data.People = append(data.People, m.Email)
	}
	slices.Sort(data.People)
	for _, t := range d.reg.Snapshot(projectID).ToolList {
		data.Tools = append(data.Tools, t.Name)
	}
	slices.Sort(data.Tools)
	data.Tools = slices.Compact(data.Tools)
	return nil
}

// editorText is a document as the editor shows it: indented JSON, with
// "rules" always present so that a new policy starts from its shape.
func editorText(doc policy.Document) string {
	if doc.Rules == nil {
		doc.Rules = []policy.Rule{}
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // the template escapes; "args.total > 500" stays readable
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil { // a Document always encodes
		return `{"rules": []}`
	}
	return strings.TrimSuffix(b.String(), "\n")
}
