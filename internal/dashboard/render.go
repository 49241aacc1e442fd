package dashboard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spacefix/spacefix/internal/dashboard/apitypes"
	"github.com/spacefix/spacefix/internal/store"
)

// pageNames are the templates with the full layout; bareNames have no
// navigation (sign-in, sign-up).
var (
	pageNames = []string{"projects", "admin", "overview", "tools", "agents", "keys", "logs", "tasks", "usage", "settings", "members", "audit", "policy", "error", "agent", "me"}
	bareNames = []string{"login", "join", "consent", "upstream"}
)

type pageTemplate struct {
	t    *template.Template
	root string // the template to execute
}

var funcs = template.FuncMap{
	"when":     when,
	"ago":      ago,
	"agoPtr":   func(t *time.Time) string { return ago(deref(t)) },
	"priority": priority,
	"json":     toJSON,
	"duration": fmtDuration,
	"callTime": callDuration,
	"query":    url.QueryEscape,
	"join":     strings.Join,
	"plus1":    func(i int) int { return i + 1 },
	"count":    count,
	"tokens":   tokens,
}

func parsePages() map[string]*pageTemplate {
	out := make(map[string]*pageTemplate)
	for _, n := range pageNames {
		t := template.Must(template.New("").Funcs(funcs).ParseFS(assets, "templates/layout.html", "templates/"+n+".html"))
		out[n] = &pageTemplate{t: t, root: "layout"}
	}
	for _, n := range bareNames {
		t := template.Must(template.New("").Funcs(funcs).ParseFS(assets, "templates/bare.html", "templates/"+n+".html"))
		out[n] = &pageTemplate{t: t, root: "bare"}
	}
	return out
}

// view is what every page template gets.
type view struct {
	Title    string
	Tab      string // the project tab shown, if any
	User     store.User
	Admin    bool
	Project  *store.Project
	Role     store.Role      // the visitor's role in Project
	Projects []store.Project // the projects the visitor may see
	MCPURL   string
	Version  string
	Data     any
	// Lost warns that call records were lost (pages that show calls).
	Lost string
}

// Can reports whether the visitor has at least role ("viewer", "editor",
// "owner") in the page's project; templates show controls only then (the
// API checks again).
func (v *view) Can(role string) bool { return v.Role.AtLeast(store.Role(role)) }

// WhoCan is the line a page shows above what the visitor may see but not
// change, or "" when they may change it.
func (v *view) WhoCan(role string) string {
	if v.Project == nil || v.Can(role) {
		return ""
	}
	who := "Owners"
	if role == string(store.RoleEditor) {
		who = "Editors and owners"
	}
	return fmt.Sprintf("You are a %s in %s, so this page is read-only for you. %s can change it; ask an owner of the project (see Members).", v.Role, v.Project.Name, who)
}

// httpError is a failure with a status and a message for people.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func errorf(status int, format string, args ...any) error {
	return &httpError{status: status, msg: fmt.Sprintf(format, args...)}
}

// pageFunc fills v.Data (and v.Title) and returns the template to render.
type pageFunc func(r *http.Request, v *view) (string, error)

// page adapts a pageFunc: it signs the visitor in (or sends them to the
// sign-in page), checks what the page needs (a project page: a member's
// role), loads the project named in the path and renders the result or the
// error.
func (d *Dashboard) page(fn pageFunc, n need) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok, err := d.authenticate(r)
		if err != nil {
			d.serverError(w, r, "authenticate", err)
			return
		}
		if !ok || p.token != nil {
			http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		v := &view{User: p.user, Admin: p.admin(), Version: d.version}
		if v.Projects, err = d.visibleProjects(r.Context(), p); err != nil {
			d.serverError(w, r, "list projects", err)
			return
		}
		r = r.WithContext(withPrincipal(r.Context(), p))
		if r, err = d.check(r, p, n); err != nil {
			d.renderError(w, r, v, err)
			return
		}
		if a, ok := accessFrom(r.Context()); ok {
			v.Project, v.Role, v.MCPURL = &a.project, a.role, d.base(r)+"/mcp"
		}
		name, err := fn(r, v)
		if err != nil {
			d.renderError(w, r, v, err)
			return
		}
		v.Lost = d.lostWarning(v.Tab)
		d.render(w, http.StatusOK, name, v)
	})
}

// project is the project named in the request path, as the wrapper that
// checked the caller's role in it loaded it.
func (d *Dashboard) project(r *http.Request) (store.Project, error) {
	if a, ok := accessFrom(r.Context()); ok {
		return a.project, nil
	}
	return d.loadProject(r)
}

// loadProject loads the project named in the request path.
func (d *Dashboard) loadProject(r *http.Request) (store.Project, error) {
	name := r.PathValue("project")
	p, err := d.st.Project(r.Context(), name)
	if errors.Is(err, store.ErrNotFound) {
		return store.Project{}, noProject(name)
	}
	return p, err
}

func (d *Dashboard) render(w http.ResponseWriter, status int, name string, data any) {
	pt := d.pages[name]
	var buf bytes.Buffer
	if err := pt.t.ExecuteTemplate(&buf, pt.root, data); err != nil {
		d.log.Error("render page", "page", name, "err", err)
		http.Error(w, "The page could not be drawn; the gateway's log says why.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// renderBare renders a page without navigation.
func (d *Dashboard) renderBare(w http.ResponseWriter, _ *http.Request, status int, name, title string, data any) {
	d.render(w, status, name, &view{Title: title, Version: d.version, Data: data})
}

func (d *Dashboard) renderError(w http.ResponseWriter, r *http.Request, v *view, err error) {
	var he *httpError
	if !errors.As(err, &he) {
		d.serverError(w, r, "page", err)
		return
	}
	v.Title, v.Data, v.Tab, v.Project = "Not found", he.msg, "", nil
	if he.status == http.StatusForbidden {
		v.Title = "Not allowed"
	}
	d.render(w, he.status, "error", v)
}

// serverError logs an internal failure and shows a page that does not
// reveal it.
func (d *Dashboard) serverError(w http.ResponseWriter, r *http.Request, op string, err error) {
	d.log.Error("dashboard: "+op, "path", logPath(r), "err", err)
	d.render(w, http.StatusInternalServerError, "error", &view{
		Title: "Something went wrong", Version: d.version,
		Data: "The gateway could not do that; its log says why. Try again in a moment.",
	})
}

// logPath is r's path as the log may show it: the secret of a setup or
// invite link (a {secret} path value) is left out, since whoever reads the
// log could use it.
func logPath(r *http.Request) string {
	if s := r.PathValue("secret"); s != "" {
		return strings.Replace(r.URL.Path, s, "…", 1)
	}
	return r.URL.Path
}

// when is a moment as pages show it: in UTC and labelled so, inside a
// <time> that app.js turns into the viewer's local time with its zone
// (the gateway's own zone means nothing to someone in another one).
func when(t time.Time) template.HTML {
	if t.IsZero() {
		return "—"
	}
	t = t.UTC()
	return template.HTML(fmt.Sprintf(`<time datetime="%s" title="%s UTC">%s UTC</time>`,
		t.Format(time.RFC3339), t.Format(time.DateTime), t.Format(time.DateTime)))
}

// tokens writes code for a <pre> that wraps long lines only between
// words: each run of non-space characters is a span the stylesheet keeps
// whole, so "--header" or "Bearer" never break inside.
func tokens(code string) template.HTML {
	var b strings.Builder
	word := -1
	for i, c := range code {
		space := c == ' ' || c == '\n' || c == '\t'
		switch {
		case !space && word < 0:
			word = i
		case space && word >= 0:
			b.WriteString(`<span class="tok">` + template.HTMLEscapeString(code[word:i]) + `</span>`)
			word = -1
		}
		if space {
			b.WriteRune(c)
		}
	}
	if word >= 0 {
		b.WriteString(`<span class="tok">` + template.HTMLEscapeString(code[word:]) + `</span>`)
	}
	return template.HTML(b.String())
}

// count writes n with thousands separators: 1,000 tools.
func count(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func ago(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

// deref is *t, or the zero time for nil.
func deref(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

// priority is an interceptor's priority hint as the Policy page shows
// it ([apitypes.InterceptorPriority.String]), "—" for none.
func priority(p *apitypes.InterceptorPriority) string {
	if p == nil {
		return "—"
	}
	return p.String()
}

func fmtDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// callDuration is how the Logs page shows a call's duration in ms: ms
// under a second, else seconds, so a 45-second report reads 45.0 s, not
// 45017.6 ms. app.js's callDuration writes the live rows the same way.
func callDuration(ms float64) string {
	if ms < 1000 {
		return fmt.Sprintf("%.1f ms", ms)
	}
	return fmt.Sprintf("%.1f s", ms/1000)
}

func toJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}
