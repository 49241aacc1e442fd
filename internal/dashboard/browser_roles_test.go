package dashboard_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/spacefix/spacefix/internal/store"
)

// inviteMember adds a member on the Members page as the signed-in owner
// and returns the invite link the page shows.
func inviteMember(t *testing.T, ctx context.Context, w *gw, email, role string) string {
	t.Helper()
	run(t, ctx,
		chromedp.Navigate(w.url("/p/default/members")),
		chromedp.WaitVisible(chromedp.CSS(`form[data-then=member-invited]`)),
		chromedp.SetValue(chromedp.CSS(`form[data-then=member-invited] input[name=email]`), email),
		chromedp.SetValue(chromedp.CSS(`form[data-then=member-invited] select[name=role]`), role),
		chromedp.Click(chromedp.CSS(`form[data-then=member-invited] button[type=submit]`)),
	)
	until(t, ctx, "the invite link", `(document.querySelector('form[data-then=member-invited] ~ [data-reveal] [data-secret]').textContent || '').includes('/join/')`)
	link, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('form[data-then=member-invited] ~ [data-reveal] [data-secret]').textContent`))
	if err != nil {
		t.Fatal(err)
	}
	return link
}

// joinAs signs out whoever is signed in and signs up with an invite link.
func joinAs(t *testing.T, ctx context.Context, link, email string) {
	t.Helper()
	run(t, ctx,
		chromedp.Click(chromedp.CSS(`form[action="/logout"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`input[name=password]`)), // the sign-in page
		chromedp.Navigate(link),
		chromedp.SetValue(chromedp.CSS(`input[name=email]`), email),
		chromedp.SetValue(chromedp.CSS(`input[name=password]`), "correct horse battery"),
		chromedp.SetValue(chromedp.CSS(`input[name=confirm]`), "correct horse battery"),
		chromedp.Click(chromedp.CSS(`button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`.cards .card.project`)),
	)
}

// TestBrowserRoles: an owner invites an editor and a viewer on the Members
// page; the editor changes settings but cannot manage members; the viewer
// sees the pages read-only, and a change forged from the viewer's page is
// refused by the server with the sentence naming the role; the Audit page
// shows who did what.
func TestBrowserRoles(t *testing.T) {
	ctx := browser(t)
	w := startGateway(t)
	w.agent("", orderTools(getOrderV1))
	w.signUp(ctx)
	eve := inviteMember(t, ctx, w, "eve@example.com", "editor")
	vic := inviteMember(t, ctx, w, "vic@example.com", "viewer")
	run(t, ctx, chromedp.Navigate(w.url("/p/default/members")), chromedp.WaitVisible(chromedp.CSS(`tr[data-invite]`)))
	until(t, ctx, "both open invites listed", `document.querySelectorAll('tr[data-invite]').length === 2`)
	screenshotView(t, ctx, "roles-members")

	// The editor: settings yes, members no.
	joinAs(t, ctx, eve, "eve@example.com")
	run(t, ctx, chromedp.Navigate(w.url("/p/default/members")), chromedp.WaitVisible(chromedp.CSS(`[data-readonly]`)))
	until(t, ctx, "the editor's Members page without the add form",
		`document.querySelector('form[data-then=member-invited]') === null && document.querySelector('[data-role]').textContent === 'editor' && document.querySelector('[data-readonly]').textContent.includes('Only owners of default can change who is a member.')`)
	run(t, ctx,
		chromedp.Navigate(w.url("/p/default/settings")),
		chromedp.WaitVisible(chromedp.CSS(`input[name=rateLimitPerMinute]`)),
		chromedp.SetValue(chromedp.CSS(`input[name=rateLimitPerMinute]`), "60"),
		chromedp.Click(chromedp.CSS(`form.settings button[type=submit]`)),
	)
	until(t, ctx, "the saved toast", `(document.getElementById('toast').textContent || '').startsWith('Saved')`)

	// The viewer: read-only pages, and the server refuses what the page
	// does not offer.
	joinAs(t, ctx, vic, "vic@example.com")
	run(t, ctx, chromedp.Navigate(w.url("/p/default/settings")), chromedp.WaitVisible(chromedp.CSS(`[data-readonly]`)))
	until(t, ctx, "the viewer's read-only settings",
		`document.querySelector('form.settings fieldset').disabled && document.querySelector('form.settings button[type=submit]') === null && document.querySelector('[data-readonly]').textContent.includes('You are a viewer in default, so this page is read-only for you. Editors and owners can change it')`)
	screenshotView(t, ctx, "roles-viewer-settings")
	run(t, ctx, chromedp.Navigate(w.url("/p/default/tools")), chromedp.WaitVisible(chromedp.CSS(`tr[data-tool=get_order]`)))
	until(t, ctx, "no Edit buttons for the viewer", `document.querySelectorAll('button[data-edit]').length === 0`)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__forged = null;
		fetch('/api/projects/default/settings', {method: 'PATCH', headers: {'Content-Type': 'application/json'}, body: '{"rateLimitPerMinute": 1}'})
			.then(async r => { window.__forged = r.status + ' ' + (await r.json()).error; }); true`)); err != nil {
		t.Fatal(err)
	}
	until(t, ctx, "the forged change refused", `window.__forged === '403 This change needs the editor or owner role in project "default"; you are a viewer. Ask an owner of the project (its Members page lists them).'`)
	p, err := w.st.Project(t.Context(), "default")
	if err != nil || p.Settings.RateLimitPerMinute != 60 {
		t.Errorf("rate limit after the viewer's forged change = %d, %v; want the editor's 60", p.Settings.RateLimitPerMinute, err)
	}

	// The Audit page, as the viewer: the editor's change with its values.
	run(t, ctx, chromedp.Navigate(w.url("/p/default/audit?action=settings.update")), chromedp.WaitVisible(chromedp.CSS(`table.audit`)))
	row, err := chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll('tr[data-audit]')].map(r => r.innerText).join('\n')`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(row, "settings.update") != 1 || !strings.Contains(row, "eve@example.com") || !strings.Contains(row, "rateLimitPerMinute: 0 → 60") {
		t.Errorf("the Audit page's settings.update rows:\n%s\nwant one, by eve, to 60", row)
	}
	screenshotView(t, ctx, "roles-audit")
	ms, err := w.st.Members(t.Context(), w.project.ID)
	if err != nil || len(ms) != 3 || ms[0].Role != store.RoleOwner || ms[1].Role != store.RoleEditor || ms[2].Role != store.RoleViewer {
		t.Errorf("members = %+v, %v; want ada (owner, ran setup), eve (editor) and vic (viewer)", ms, err)
	}
}
