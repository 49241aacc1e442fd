package dashboard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spacefix/spacefix/internal/store"
)

// pageNames are the templates with the full layout; bareNames have no
// navigation (sign-in, sign-up).
var (
	pageNames = []string{"projects", "admin", "overview", "tools", "agents", "keys", "logs", "usage", "settings", "error"}
	bareNames = []string{"login", "join", "consent"}
)

type pageTemplate struct {
	t    *template.Template
	root string // the template to execute
}

var funcs = template.FuncMap{
	"when":     when,
	"ago":      ago,
	"json":     toJSON,
	"duration": fmtDuration,
	"query":    url.QueryEscape,
	"join":     strings.Join,
	"plus1":    func(i int) int { return i + 1 },
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
	Projects []store.Project // for the project switcher
	MCPURL   string
	Version  string
	Data     any
	// Lost warns that call records were lost (pages that show calls).
	Lost string
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
// sign-in page), loads the project named in the path and renders the
// result or the error.
func (d *Dashboard) page(fn pageFunc) http.Handler {
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
		if v.Projects, err = d.st.Projects(r.Context()); err != nil {
			d.serverError(w, r, "list projects", err)
			return
		}
		if name := r.PathValue("project"); name != "" {
			proj, err := d.project(r)
			if err != nil {
				d.renderError(w, r, v, err)
				return
			}
			v.Project, v.MCPURL = &proj, d.base(r)+"/mcp"
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

// project loads the project named in the request path.
func (d *Dashboard) project(r *http.Request) (store.Project, error) {
	name := r.PathValue("project")
	p, err := d.st.Project(r.Context(), name)
	if errors.Is(err, store.ErrNotFound) {
		return store.Project{}, errorf(http.StatusNotFound, "There is no project %q. Pick one from the list of projects.", name)
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
		d.serverError(w, r, "page "+r.URL.Path, err)
		return
	}
	v.Title, v.Data, v.Tab = "Not found", he.msg, ""
	d.render(w, he.status, "error", v)
}

// serverError logs an internal failure and shows a page that does not
// reveal it.
func (d *Dashboard) serverError(w http.ResponseWriter, r *http.Request, op string, err error) {
	d.log.Error("dashboard: "+op, "path", r.URL.Path, "err", err)
	d.render(w, http.StatusInternalServerError, "error", &view{
		Title: "Something went wrong", Version: d.version,
		Data: "The gateway could not do that; its log says why. Try again in a moment.",
	})
}

func when(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.Local().Format("2006-01-02 15:04:05")
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

func fmtDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

func toJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}
