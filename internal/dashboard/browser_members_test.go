package dashboard_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/users"
)

// TestBrowserInviteExistingAccount: on the Members page, inviting someone
// who has an account shows the same as inviting someone who has none (an
// invite link, the same words); the person with an account is not a
// member until they open the link, sign in and accept.
func TestBrowserInviteExistingAccount(t *testing.T) {
	ctx := browser(t)
	w := startGateway(t)
	w.signUp(ctx)
	if _, err := w.st.CreateUser(t.Context(), store.User{Email: "bob@example.com"}, users.HashPassword("correct horse battery")); err != nil {
		t.Fatal(err)
	}
	shown := func(link string) string {
		t.Helper()
		text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('form[data-then=member-invited] ~ [data-reveal]').innerText`))
		if err != nil {
			t.Fatal(err)
		}
		return strings.ReplaceAll(text, link, "LINK")
	}
	bob := inviteMember(t, ctx, w, "bob@example.com", "editor")
	forBob := shown(bob)
	carol := inviteMember(t, ctx, w, "carol@example.com", "editor")
	if forCarol := shown(carol); forBob != forCarol || !strings.Contains(forBob, "they join once they accept it") {
		t.Errorf("the Members page after inviting\nsomeone with an account: %q\nsomeone without:         %q\nwant the same invite sentence", forBob, forCarol)
	}
	if ms, err := w.st.Members(t.Context(), w.project.ID); err != nil || len(ms) != 1 || ms[0].Email != "ada@example.com" {
		t.Fatalf("members before anyone accepted = %+v, %v; want only ada, who ran setup", ms, err)
	}

	run(t, ctx,
		chromedp.Click(chromedp.CSS(`form[action="/logout"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`input[name=password]`)),
		chromedp.Navigate(bob),
		chromedp.Click(chromedp.CSS(`a[data-sign-in]`)),
		chromedp.WaitVisible(chromedp.CSS(`form[action="/login"]`)),
		chromedp.SetValue(chromedp.CSS(`input[name=email]`), "bob@example.com"),
		chromedp.SetValue(chromedp.CSS(`input[name=password]`), "correct horse battery"),
		chromedp.Click(chromedp.CSS(`form[action="/login"] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`form[action$="/accept"] button`)),
	)
	until(t, ctx, "the offer to join", `document.querySelector('[data-invite-offer]').innerText === 'You are invited to project default as editor. You are signed in as bob@example.com.'`)
	run(t, ctx, chromedp.Click(chromedp.CSS(`form[action$="/accept"] button`)))
	until(t, ctx, "the project's page", `location.pathname === '/p/default'`)
	ms, err := w.st.Members(t.Context(), w.project.ID)
	if err != nil || len(ms) != 2 || ms[1].Email != "bob@example.com" || ms[1].Role != store.RoleEditor {
		t.Errorf("members after bob accepted = %+v, %v; want bob, editor", ms, err)
	}
}
