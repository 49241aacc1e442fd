package dashboard_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/spacefix/spacefix/internal/store"
)

// capRule is a policy whose one rule refuses orders over 500, and
// badCapRule the same with a condition that does not compile (a syntax
// error at line 1, column 13 of "when").
const (
	capRule = `{
  "rules": [
    {
      "name": "cap-total",
      "on": "call",
      "tools": ["create_order"],
      "when": "args.total > 500",
      "effect": "deny",
      "message": "Orders over 500 need a person: {{args.total}} is too much."
    }
  ]
}`
	capMessage = "Orders over 500 need a person: 900 is too much."
)

var badCapRule = strings.Replace(capRule, "args.total > 500", "args.total >> 500", 1)

// piiRule is capRule with a second rule, on result, that redacts e-mail
// addresses from create_order's results.
var piiRule = strings.Replace(capRule, `
  ]
}`, `,
    {
      "name": "redact-emails",
      "on": "result",
      "tools": ["create_order"],
      "effect": "redact",
      "redact": ["[\\w.]+@[\\w.]+\\w"]
    }
  ]
}`, 1)

// setDraft replaces the editor's text as typing would: the input event
// starts the check.
func setDraft(t *testing.T, ctx context.Context, text string) {
	t.Helper()
	run(t, ctx, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const d = document.getElementById('policy-doc');
		d.value = %q; d.dispatchEvent(new Event('input', {bubbles: true})); })()`, text)))
}

// tryCall fills Try it, with no result, and waits for its answer; it
// returns the Calling and Message lines. No line about a result shows.
func tryCall(t *testing.T, ctx context.Context, caller, tool, args string) (call, message string) {
	t.Helper()
	got := tryIt(t, ctx, caller, tool, args, "")
	if got.shown {
		t.Errorf("Try it %s %s without a result shows one: %q, %q", tool, args, got.result, got.shaped)
	}
	return got.call, got.message
}

// tryAnswer is what Try it shows: the Calling and Message lines and, when
// it shows them, the Result and Result message lines, the audit-mode
// rules on result and the result as the caller would get it.
type tryAnswer struct {
	call, message                      string
	shown                              bool
	result, resultMessage, resultAudit string
	shaped                             string
}

// tryIt fills Try it, the Result field with result, and waits for its
// answer.
func tryIt(t *testing.T, ctx context.Context, caller, tool, args, result string) tryAnswer {
	t.Helper()
	run(t, ctx,
		chromedp.Evaluate[chromedp.Void](`document.querySelector('[data-try-result]').hidden = true`),
		chromedp.SetValue(chromedp.CSS(`form[data-try] select[name=caller]`), caller),
		chromedp.SetValue(chromedp.CSS(`form[data-try] input[name=tool]`), tool),
		chromedp.SetValue(chromedp.CSS(`form[data-try] textarea[name=args]`), args),
		// SetValue refuses an empty value.
		chromedp.Evaluate[chromedp.Void](`document.querySelector('form[data-try] textarea[name=result]').value = `+jsString(result)),
		chromedp.Click(chromedp.CSS(`form[data-try] button[type=submit]`)),
	)
	until(t, ctx, "the decision of Try it", `!document.querySelector('[data-try-result]').hidden || !document.querySelector('[data-try-error]').hidden ||
		!document.querySelector('[data-try-result-error]').hidden`)
	got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(() => {
		const text = (sel) => document.querySelector(sel).textContent;
		const err = [...document.querySelectorAll('[data-try-error], [data-try-result-error]')].filter(e => !e.hidden).map(e => e.textContent).join(' ');
		const shown = [...document.querySelectorAll('[data-try-on-result]')].filter(e => !e.hidden).length;
		return [err, text('[data-try-call]'), text('[data-try-message]'), String(shown),
			text('[data-try-res]'), text('[data-try-res-message]'), text('[data-try-res-audit]'), text('[data-try-shaped]')];
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != "" {
		t.Fatalf("Try it %s %s: the page says %q", tool, args, got[0])
	}
	return tryAnswer{call: got[1], message: got[2], shown: got[3] != "0",
		result: got[4], resultMessage: got[5], resultAudit: got[6], shaped: got[7]}
}

// tryBadResult submits Try it with a Result that is not JSON though it
// starts with "{", and returns what the field's inline error says; it
// fails the test if anything was sent or an answer shows.
func tryBadResult(t *testing.T, ctx context.Context, result string) string {
	t.Helper()
	run(t, ctx,
		chromedp.Evaluate[chromedp.Void](`document.querySelector('[data-try-result]').hidden = true;
			window.tryPosts = 0; if (!window.realFetch) { window.realFetch = window.fetch; window.fetch = (...a) => { if (String(a[0]).endsWith('/policy/test')) window.tryPosts++; return window.realFetch(...a); }; }`),
		chromedp.SetValue(chromedp.CSS(`form[data-try] textarea[name=result]`), result),
		chromedp.Click(chromedp.CSS(`form[data-try] button[type=submit]`)),
	)
	until(t, ctx, "the Result field's error", `!document.querySelector('[data-try-result-error]').hidden`)
	got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[document.querySelector('[data-try-result-error]').textContent, String(window.tryPosts),
		String(document.querySelector('[data-try-result]').hidden), document.getElementById('try-result').getAttribute('aria-invalid') || '',
		document.getElementById('try-result').getAttribute('aria-describedby')]`))
	if err != nil {
		t.Fatal(err)
	}
	if got[1] != "0" || got[2] != "true" {
		t.Errorf("Try it with the result %q sent %s requests (answer hidden: %s); want none sent and no answer", result, got[1], got[2])
	}
	if got[3] != "true" || got[4] != "try-result-help try-result-error" {
		t.Errorf("the Result field with an error has aria-invalid %q, aria-describedby %q; want true and its help and error", got[3], got[4])
	}
	return got[0]
}

// noSideScroll fails the test when the page scrolls sideways, naming the
// elements that stick out (as TestBrowserPagesFit does).
func noSideScroll(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	wide, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => {
		const d = document.documentElement;
		if (d.scrollWidth <= window.innerWidth) return "";
		const out = [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
			.slice(-3).map(e => e.tagName.toLowerCase() + (e.className ? '.' + e.className : '') + ' ' + Math.round(e.getBoundingClientRect().right));
		return d.scrollWidth + " > " + window.innerWidth + ": " + out.join(", ");
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if wide != "" {
		t.Errorf("%s scrolls sideways: %s", what, wide)
	}
}

// TestBrowserPolicy: an owner opens Policy, types a rule that does not
// compile and sees it refused with its position while Save is disabled,
// fixes it and saves version 1 (which the store then holds), and asks Try
// it about orders over and under the limit and about a sample result with
// an e-mail address under a draft that redacts them (and is told of a
// result that is not JSON before anything is sent), at 1280 and 390 px
// without the page scrolling sideways. A save over a newer version is refused
// with an offer to reload. A viewer sees the rules but no editor and no
// Save.
func TestBrowserPolicy(t *testing.T) {
	ctx := browser(t)
	w := startGateway(t)
	w.agent("", orderTools(getOrderV1))
	w.signUp(ctx)
	clientKey := w.clientKeyID()

	run(t, ctx, chromedp.EmulateViewport(1280, 860),
		chromedp.Navigate(w.url("/p/default")),
		chromedp.Click(chromedp.CSS(`nav.tabs a[href="/p/default/policy"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#policy-doc`)),
	)
	until(t, ctx, "the Policy tab on, no rules yet, Save disabled", `document.querySelector('nav.tabs a.on').textContent === 'Policy' &&
		document.querySelector('table.rules td.empty') !== null && document.querySelector('[data-policy-save]').disabled`)

	// A rule that does not compile, typed: refused with its position.
	run(t, ctx,
		chromedp.Evaluate[chromedp.Void](`document.getElementById('policy-doc').value = ''`),
		chromedp.SendKeys(chromedp.CSS(`#policy-doc`), badCapRule),
	)
	until(t, ctx, "the refusal of the bad rule", `(document.querySelector('[data-check-errors]').textContent || '').includes('line 1, column 13')`)
	refusal, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('[data-check-errors] li[data-rule="cap-total"] span').textContent`))
	if err != nil {
		t.Fatal(err)
	}
	if want := `Rule 1 "cap-total" (editor line 7) · when, line 1, column 13: `; !strings.HasPrefix(refusal, want) || !strings.Contains(refusal, "Syntax error") {
		t.Errorf("the refusal reads %q; want it to start %q and name the syntax error", refusal, want)
	}
	until(t, ctx, "Save disabled while the draft does not check, no decision shown yet", `document.querySelector('[data-policy-save]').disabled &&
		getComputedStyle(document.querySelector('[data-try-result]')).display === 'none' &&
		document.querySelector('[data-check-status]').textContent.startsWith('The draft does not check (1 problem)')`)
	noSideScroll(t, ctx, "the Policy page with a refusal at 1280 px")
	run(t, ctx, chromedp.Click(chromedp.CSS(`[data-check-errors] li[data-rule="cap-total"] button`)))
	until(t, ctx, "the rule's line selected", `(() => { const d = document.getElementById('policy-doc');
		return document.activeElement === d && d.value.slice(d.selectionStart, d.selectionEnd).trim() === '"when": "args.total >> 500",'; })()`)
	screenshot(t, ctx, "policy-refusal")

	// Fixed, checked, saved.
	setDraft(t, ctx, capRule)
	until(t, ctx, "the fixed draft checked", `document.querySelector('[data-check-status]').textContent === 'The draft checks.' &&
		document.querySelector('[data-check-errors]').hidden && !document.querySelector('[data-policy-save]').disabled`)
	run(t, ctx, chromedp.Click(chromedp.CSS(`[data-policy-save]`)))
	until(t, ctx, "Saved as version 1", `document.querySelector('[data-check-status]').textContent.startsWith('Saved as version 1.')`)
	until(t, ctx, "the saved rule listed", `document.querySelector('tr[data-rule="cap-total"]') !== null &&
		document.querySelector('[data-refresh=policy-rules] [data-version]').textContent.startsWith('Version 1, saved by ada@example.com')`)
	saved, err := w.st.Policy(t.Context(), w.project.ID)
	if err != nil {
		t.Fatal(err)
	}
	if saved.Version != 1 || !strings.Contains(string(saved.Document), `"args.total \u003e 500"`) && !strings.Contains(string(saved.Document), `"args.total > 500"`) {
		t.Errorf("the store holds version %d: %s; want version 1 with the rule cap-total", saved.Version, saved.Document)
	}

	// The Audit page offers the action and shows the save.
	run(t, ctx, chromedp.Navigate(w.url("/p/default/audit?action=policy.update")), chromedp.WaitVisible(chromedp.CSS(`table.audit`)))
	until(t, ctx, "the policy.update row", `document.querySelector('select[name=action] option[value="policy.update"]') !== null &&
		[...document.querySelectorAll('tr[data-audit]')].filter(r => r.textContent.includes('policy.update') && r.textContent.includes('ada@example.com')).length === 1`)

	// Try it, at both widths.
	for _, size := range widths {
		run(t, ctx, chromedp.EmulateViewport(size.width, size.height),
			chromedp.Navigate(w.url("/p/default/policy")), chromedp.WaitVisible(chromedp.CSS(`form[data-try]`)))
		call, msg := tryCall(t, ctx, "key:"+clientKey, "create_order", `{"requestId": "r1", "customer": "ada", "total": 900}`)
		if want := `deny by rule "cap-total"`; call != want || msg != capMessage {
			t.Errorf("at %s px, Try it with a total of 900 says %q, %q; want %q, %q", size.name, call, msg, want, capMessage)
		}
		sizeShot(t, ctx, "policy-"+size.name)
		if size.name == "1280" {
			screenshot(t, ctx, "policy")
		}
		noSideScroll(t, ctx, "the Policy page with a decision at "+size.name+" px")
		call, msg = tryCall(t, ctx, "key:"+clientKey, "create_order", `{"requestId": "r2", "customer": "ada", "total": 20}`)
		if !strings.HasPrefix(call, "none") && !strings.HasPrefix(call, "allow") || msg != "—" {
			t.Errorf("at %s px, Try it with a total of 20 says %q, %q; want none (or allow) and no message", size.name, call, msg)
		}
		// A draft is tried before it is saved.
		setDraft(t, ctx, strings.Replace(capRule, "> 500", "> 10", 1))
		call, _ = tryCall(t, ctx, "person:ada@example.com", "create_order", `{"requestId": "r3", "customer": "ada", "total": 20}`)
		if want := `deny by rule "cap-total"`; call != want {
			t.Errorf("at %s px, Try it of a draft capping at 10 says %q for 20; want %q", size.name, call, want)
		}
		until(t, ctx, "the draft named as tried", `document.querySelector('[data-try-source]').textContent.startsWith('Tried the draft')`)
		// A rule that cannot be evaluated for the call refuses it, and the
		// page says why.
		setDraft(t, ctx, strings.Replace(capRule, "args.total > 500", "args.discount > 5", 1))
		call, msg = tryCall(t, ctx, "key:"+clientKey, "create_order", `{"requestId": "r4", "customer": "ada", "total": 20}`)
		if want, wantMsg := `deny by rule "cap-total" (it could not be evaluated)`, `This call was refused by rule "cap-total" of the project's policy, which could not be evaluated.`; call != want || msg != wantMsg {
			t.Errorf("at %s px, Try it of a rule reading an absent argument says %q, %q; want %q, %q", size.name, call, msg, want, wantMsg)
		}

		// A rule on result, tried on a sample result: as plain text, then
		// as a tool result in JSON; a result that is not JSON is refused
		// on the page.
		setDraft(t, ctx, piiRule)
		got := tryIt(t, ctx, "key:"+clientKey, "create_order", `{"requestId": "r5", "customer": "ann", "total": 20}`, "Order r5 is paid; the receipt went to ann@example.com.")
		want := tryAnswer{call: "none (no rule decides)", message: "—", shown: true,
			result: `redact by rule "redact-emails"`, resultMessage: "—", resultAudit: "—", shaped: "Order r5 is paid; the receipt went to [redacted]."}
		if got != want {
			t.Errorf("at %s px, Try it with a result carrying an e-mail address shows\n%+v\nwant\n%+v", size.name, got, want)
		}
		sizeShot(t, ctx, "policy-result-"+size.name)
		if size.name == "1280" {
			screenshot(t, ctx, "policy-result")
		}
		noSideScroll(t, ctx, "the Policy page with a result at "+size.name+" px")
		got = tryIt(t, ctx, "key:"+clientKey, "create_order", `{"requestId": "r6", "customer": "ann", "total": 20}`,
			`{"content": [{"type": "text", "text": "mail ann@example.com"}], "structuredContent": {"email": "ann@example.com", "total": 20}}`)
		if got.result != `redact by rule "redact-emails"` || !strings.Contains(got.shaped, `"text": "mail [redacted]"`) ||
			!strings.Contains(got.shaped, `"email": "[redacted]"`) || strings.Contains(got.shaped, "ann@example.com") {
			t.Errorf("at %s px, Try it with a JSON result carrying an e-mail address shows %q and\n%s\nwant it redacted by rule \"redact-emails\"", size.name, got.result, got.shaped)
		}
		msg = tryBadResult(t, ctx, `{"content": [{"type": "text", "text": "mail ann@example.com"}]`)
		if wantPre, wantSuf := "The result starts with { but is not JSON: ", ". Fix the JSON, or write plain text that does not start with {."; !strings.HasPrefix(msg, wantPre) || !strings.HasSuffix(msg, wantSuf) {
			t.Errorf("at %s px, a result that is not JSON says %q; want %q, what is wrong, and %q", size.name, msg, wantPre, wantSuf)
		}
		noSideScroll(t, ctx, "the Policy page with a result that is not JSON at "+size.name+" px")
		// JSON, but not a tool result: the gateway's refusal shows at the field.
		run(t, ctx, chromedp.Evaluate[chromedp.Void](`document.getElementById('try-result').value = '{"content": "mail ann@example.com"}'`),
			chromedp.Click(chromedp.CSS(`form[data-try] button[type=submit]`)))
		until(t, ctx, "the gateway's refusal of the result", `document.querySelector('[data-try-result-error]').textContent.startsWith('The gateway')`)
		if msg, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('[data-try-result-error]').textContent`)); err != nil {
			t.Fatal(err)
		} else if want := `The gateway does not take this result: want a tool result as MCP has it, such as {"content": [{"type": "text", "text": "mail ann@example.com"}]}.`; msg != want {
			t.Errorf("at %s px, a result whose content is a string says %q; want %q", size.name, msg, want)
		}
		run(t, ctx, chromedp.Navigate(w.url("/p/default/audit?action=policy.update")), chromedp.WaitVisible(chromedp.CSS(`tr[data-audit]`)))
		noSideScroll(t, ctx, "the Audit page with a policy.update at "+size.name+" px")
		run(t, ctx, chromedp.Navigate(w.url("/p/default/policy")), chromedp.WaitVisible(chromedp.CSS(`#policy-doc`)))
		setDraft(t, ctx, badCapRule)
		until(t, ctx, "the refusal at "+size.name, `(document.querySelector('[data-check-errors]').textContent || '').includes('line 1, column 13')`)
		noSideScroll(t, ctx, "the Policy page with a refusal at "+size.name+" px")
	}
	run(t, ctx, chromedp.EmulateViewport(1280, 860))

	// Someone saves in between: this page's save is refused and offers
	// to reload.
	run(t, ctx, chromedp.Navigate(w.url("/p/default/policy")), chromedp.WaitVisible(chromedp.CSS(`#policy-doc`)))
	if _, err := w.st.SavePolicy(t.Context(), w.project.ID, 1, []byte(capRule), "eve@example.com"); err != nil {
		t.Fatal(err)
	}
	setDraft(t, ctx, strings.Replace(capRule, "> 500", "> 700", 1))
	until(t, ctx, "the draft checked", `!document.querySelector('[data-policy-save]').disabled`)
	run(t, ctx, chromedp.Click(chromedp.CSS(`[data-policy-save]`)))
	until(t, ctx, "the conflict", `!document.querySelector('[data-save-error]').hidden && document.querySelector('[data-save-error] button') !== null &&
		document.querySelector('[data-save-error]').textContent.includes('you edited version 1, and version 2 was saved by eve@example.com')`)
	run(t, ctx, chromedp.Click(chromedp.CSS(`[data-save-error] button`)))
	until(t, ctx, "version 2 loaded", `(document.querySelector('[data-refresh=policy-rules] [data-version]') || {}).textContent?.startsWith('Version 2, saved by eve@example.com')`)
	if p, _ := w.st.Policy(t.Context(), w.project.ID); p.Version != 2 {
		t.Errorf("after the refused save the store holds version %d; want 2", p.Version)
	}

	// An editor: drafts and Try it, no Save. A viewer: the rules, no
	// editor, no Save.
	eve := inviteMember(t, ctx, w, "eve@example.com", "editor")
	vic := inviteMember(t, ctx, w, "vic@example.com", "viewer")
	joinAs(t, ctx, eve, "eve@example.com")
	run(t, ctx, chromedp.Navigate(w.url("/p/default/policy")), chromedp.WaitVisible(chromedp.CSS(`#policy-doc`)))
	until(t, ctx, "the editor's Policy page", `document.querySelector('[data-policy-save]') === null && document.querySelector('form[data-try]') !== null &&
		document.querySelector('[data-readonly]').textContent.includes('owners of the project edit it')`)
	setDraft(t, ctx, strings.Replace(capRule, "> 500", "> 10", 1))
	call, _ := tryCall(t, ctx, "person:eve@example.com", "create_order", `{"requestId": "r4", "customer": "ada", "total": 20}`)
	if want := `deny by rule "cap-total"`; call != want {
		t.Errorf("an editor's Try it of a draft capping at 10 says %q for 20; want %q", call, want)
	}
	joinAs(t, ctx, vic, "vic@example.com")
	run(t, ctx, chromedp.Navigate(w.url("/p/default/policy")), chromedp.WaitVisible(chromedp.CSS(`tr[data-rule="cap-total"]`)))
	until(t, ctx, "the viewer's read-only Policy page", `document.querySelector('[data-policy-save]') === null && document.getElementById('policy-doc') === null &&
		document.querySelector('form[data-try]') === null && document.querySelector('[data-readonly]').textContent.includes('owners of the project edit it')`)
	noSideScroll(t, ctx, "the viewer's Policy page")
}

// clientKeyID is the ID of the project's first client key.
func (w *gw) clientKeyID() string {
	w.t.Helper()
	ks, err := w.st.Keys(context.Background(), w.project.ID)
	if err != nil {
		w.t.Fatal(err)
	}
	for _, k := range ks {
		if k.Kind == store.KindClient {
			return k.ID
		}
	}
	w.t.Fatal("no client key")
	return ""
}
