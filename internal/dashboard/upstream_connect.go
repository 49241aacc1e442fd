package dashboard

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/spacefix/spacefix/internal/access"
	"github.com/spacefix/spacefix/internal/agentproto"
)

// The connect flow's pages: /connect/{agentKey} starts connecting a
// person's account at a per-person remote, /upstream/callback finishes it.

// upstreamPage is the connect flow's page: a heading, a sentence and a
// link on.
type upstreamPage struct {
	Heading, Message string
	Error            bool
	Link, LinkText   string
}

func (d *Dashboard) renderUpstream(w http.ResponseWriter, r *http.Request, status int, pg upstreamPage) {
	if pg.Link == "" {
		pg.Link, pg.LinkText = "/me", "Your accounts on the dashboard"
	}
	d.renderBare(w, r, status, "upstream", pg.Heading, pg)
}

// signInFirst sends someone who is not signed in to the sign-in page and
// back here after. It reports whether the request may go on, with who is
// signed in.
func (d *Dashboard) signInFirst(w http.ResponseWriter, r *http.Request) (principal, bool) {
	p, ok, err := d.authenticate(r)
	if err != nil {
		d.serverError(w, r, "authenticate", err)
		return principal{}, false
	}
	if !ok || p.token != nil {
		http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		return principal{}, false
	}
	return p, true
}

// connectUpstream is GET /connect/{agentKey}: it starts connecting the
// signed-in person's account at the agent's remote and sends them there.
// A GET, since MCP clients open this link; the flow's state is bound to
// the person, and the callback checks it, so a link made by someone else
// cannot connect their account to this person.
func (d *Dashboard) connectUpstream(w http.ResponseWriter, r *http.Request) {
	p, ok := d.signInFirst(w, r)
	if !ok {
		return
	}
	if d.upstream == nil {
		d.renderUpstream(w, r, http.StatusNotFound, upstreamPage{Heading: "Nothing to connect", Message: errNoUpstream.Error(), Error: true})
		return
	}
	id := r.PathValue("agentKey")
	k, proj, _, err := d.agentKeyFor(r.Context(), p, id)
	var he *httpError
	if errors.As(err, &he) {
		d.renderUpstream(w, r, he.status, upstreamPage{Heading: "No such agent", Message: he.msg, Error: true, Link: "/", LinkText: "Your projects"})
		return
	}
	if err != nil {
		d.serverError(w, r, "find agent key", err)
		return
	}
	pp, rep := d.perPerson(proj.ID, k.ID)
	name := access.AgentName(k, d.regOf(proj.ID, k.ID))
	agentPage := "/p/" + url.PathEscape(proj.Name) + "/agents/" + url.PathEscape(k.ID)
	switch {
	case pp == nil && d.regOf(proj.ID, k.ID) == nil:
		d.renderUpstream(w, r, http.StatusServiceUnavailable, upstreamPage{Heading: "The bridge is not running",
			Message: fmt.Sprintf("The bridge for %s is not running, so its account cannot be connected now. Ask its operator to start it, then try again.", name),
			Error:   true, Link: agentPage, LinkText: "The agent's page"})
		return
	case pp == nil || pp.Mode != agentproto.PerPersonConnect || pp.URL == "":
		msg := fmt.Sprintf("%s does not ask each person to connect an account, so there is nothing to connect.", name)
		if pp != nil && pp.Mode == agentproto.PerPersonExchange {
			msg = fmt.Sprintf("%s gets each person's upstream token by token exchange, so there is nothing to connect.", name)
		}
		d.renderUpstream(w, r, http.StatusNotFound, upstreamPage{Heading: "Nothing to connect", Message: msg, Error: true, Link: agentPage, LinkText: "The agent's page"})
		return
	}
	name = access.AgentName(k, rep.Reg)
	returnTo := ""
	if rt := r.URL.Query().Get("return"); rt != "" && safeNext(rt) == rt {
		returnTo = rt
	}
	to, err := d.upstream.Begin(r.Context(), proj.ID, k.ID, p.user.ID, pp.URL, returnTo)
	if err != nil {
		d.log.Warn("upstream connect: could not start", "project", proj.Name, "agentKey", k.ID, "host", remoteHost(pp.URL), "user", p.user.Email,
			"err", err, "hint", d.upstream.BeginHint(err, pp.URL))
		d.renderUpstream(w, r, http.StatusBadGateway, upstreamPage{Heading: "Could not start connecting",
			Message: fmt.Sprintf("The gateway could not start connecting your %s account for %s. Try again in a moment; if it keeps failing, the gateway's log says why.", remoteHost(pp.URL), name),
			Error:   true})
		return
	}
	d.log.Info("upstream connect: sent to the remote", "project", proj.Name, "agentKey", k.ID, "host", remoteHost(pp.URL), "user", p.user.Email)
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// upstreamCallback is GET /upstream/callback, where the remote's
// authorization server sends the person back.
func (d *Dashboard) upstreamCallback(w http.ResponseWriter, r *http.Request) {
	p, ok := d.signInFirst(w, r)
	if !ok {
		return
	}
	if d.upstream == nil {
		d.renderUpstream(w, r, http.StatusNotFound, upstreamPage{Heading: "Nothing to connect", Message: errNoUpstream.Error(), Error: true})
		return
	}
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		if e == "access_denied" {
			d.log.Info("upstream connect: cancelled at the remote", "user", p.user.Email)
			d.renderUpstream(w, r, http.StatusOK, upstreamPage{Heading: "Connecting was cancelled",
				Message: "The connection was cancelled at the remote server, so no account was connected. To try again, open the link from your MCP client again, or use Connect on your accounts page."})
			return
		}
		d.log.Warn("upstream connect: the remote refused", "user", p.user.Email, "error", e, "description", q.Get("error_description"))
		d.renderUpstream(w, r, http.StatusBadRequest, upstreamPage{Heading: "Not connected", Message: msgNotConnected, Error: true})
		return
	}
	done, err := d.upstream.Complete(r.Context(), p.user.ID, q.Get("state"), q.Get("code"), q.Get("iss"))
	if err != nil {
		d.log.Warn("upstream connect: could not finish", "user", p.user.Email, "err", err)
		d.renderUpstream(w, r, http.StatusBadRequest, upstreamPage{Heading: "Not connected", Message: msgNotConnected, Error: true})
		return
	}
	a, returnTo := done.Account, done.ReturnTo
	host := remoteHost(a.Resource)
	if !done.Again { // a reload of the callback connected nothing new
		r = r.WithContext(withPrincipal(r.Context(), p))
		d.audit(r, a.ProjectID, actionUpstreamConnect, a.AgentKeyID, nil, upstreamAudit(a.AgentKeyID, host, p.user.Email))
		d.log.Info("upstream account connected", "projectId", a.ProjectID, "agentKey", a.AgentKeyID, "host", host, "user", p.user.Email)
	}
	if returnTo != "" && safeNext(returnTo) == returnTo {
		sep := "?"
		if strings.Contains(returnTo, "?") {
			sep = "&"
		}
		http.Redirect(w, r, returnTo+sep+"connected="+url.QueryEscape(a.AgentKeyID), http.StatusSeeOther)
		return
	}
	d.renderUpstream(w, r, http.StatusOK, upstreamPage{Heading: "Account connected",
		Message: fmt.Sprintf("Your %s account is connected. Go back to your MCP client and call the tool again.", host)})
}

const msgNotConnected = "Your account could not be connected. Start again from the link in your MCP client or from your accounts page; if it fails again, the gateway's log says why."
