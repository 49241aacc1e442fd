// Spacefix dashboard: the Policy page's editor and "Try it" panel
// (templates/policy.html). The editor checks the draft as it is typed
// (POST …/policy/check), lists each rule's problem with its position, and
// saves with the version it was loaded at (PUT …/policy), so that two
// owners cannot overwrite each other unknowingly. Try it asks
// POST …/policy/test about the draft when it differs from the saved policy,
// and, given a sample result, what the rules on result make of it.
"use strict";

(() => {
  const editor = document.querySelector(".policy-editor");
  if (!editor) return; // a viewer: the rules only
  const base = `/api/projects/${encodeURIComponent(editor.dataset.policy)}/policy`;
  const doc = document.getElementById("policy-doc");
  const status = editor.querySelector("[data-check-status]");
  const errList = editor.querySelector("[data-check-errors]");
  const saveBtn = editor.querySelector("[data-policy-save]");
  const saveErr = editor.querySelector("[data-save-error]");
  let version = Number(editor.dataset.version) || 0;
  let saved = doc.value;
  let good = saved; // the newest text the gateway found sound
  let seq = 0, timer = 0;

  // send is a JSON request that returns the status with the answer, for
  // callers that tell a refusal (400, 409) from a failure.
  async function send(method, path, body) {
    const res = await fetch(path, {
      method, credentials: "same-origin",
      headers: { "Accept": "application/json", "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    return { status: res.status, data: await res.json().catch(() => ({})) };
  }

  // parse reads the draft, or says why it is no policy document.
  function parse(text) {
    let d;
    try { d = JSON.parse(text); } catch (e) { return { error: `The draft is not JSON: ${e.message}` }; }
    if (d === null || typeof d !== "object" || Array.isArray(d)) return { error: 'The draft must be one JSON object, like {"rules": []}.' };
    return { doc: d };
  }

  function same(a, b) {
    const pa = parse(a), pb = parse(b);
    return pa.doc && pb.doc ? JSON.stringify(pa.doc) === JSON.stringify(pb.doc) : a === b;
  }

  // editorLine is the draft's line (from 1) of the rule named name: of
  // its field when the field is written before the next rule, else of its
  // name; 0 when the draft does not name it. A problem is then found in a
  // long draft.
  function editorLine(name, field) {
    if (!name) return 0;
    const esc = (v) => JSON.stringify(v).replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    const lines = doc.value.split("\n");
    const start = lines.findIndex(l => new RegExp(`"name"\\s*:\\s*${esc(name)}`).test(l));
    if (start < 0) return 0;
    if (field && field !== "name") {
      const key = new RegExp(`${esc(field)}\\s*:`);
      for (let i = start; i < lines.length && (i === start || !/"name"\s*:/.test(lines[i])); i++) {
        if (key.test(lines[i])) return i + 1;
      }
    }
    return start + 1;
  }

  // problem writes one error of the gateway: which rule (or interceptor),
  // where in the editor, which field, where in the expression, and what
  // is wrong (its message without the rule and place it repeats).
  function problem(e) {
    const parts = [];
    let msg = e.error || "";
    if (e.index >= 0) {
      let who = `Rule ${e.index + 1}`;
      if (e.rule) who += ` "${e.rule}"`;
      const at = editorLine(e.rule, e.field);
      if (at) who += ` (editor line ${at})`;
      parts.push(who);
      msg = msg.replace(/^rule (\d+|"(?:[^"\\]|\\.)*"): /, "");
    } else if (e.interceptor >= 0) {
      parts.push(`Interceptor ${e.interceptor + 1}`);
      msg = msg.replace(/^interceptor \d+: /, "");
    }
    let where = parts.length ? e.field || "" : "";
    if (where) msg = msg.replace(new RegExp(`^${where}( at line \\d+, column \\d+)?: `), "");
    if (e.line) where += `${where ? ", " : ""}line ${e.line}, column ${e.column}`;
    if (where) parts.push(where);
    const head = parts.join(" · ");
    return head ? `${head}: ${msg}` : msg;
  }

  function showProblems(errors) {
    errList.replaceChildren(...errors.map(e => {
      const li = document.createElement("li");
      const text = document.createElement("span");
      text.textContent = problem(e);
      li.append(text);
      if (e.rule) li.dataset.rule = e.rule;
      const at = e.index >= 0 ? editorLine(e.rule, e.field) : 0;
      if (at) {
        const go = document.createElement("button");
        go.type = "button";
        go.className = "small";
        go.textContent = `Go to line ${at}`;
        go.addEventListener("click", () => goToLine(at));
        li.append(" ", go);
      }
      return li;
    }));
    errList.hidden = errors.length === 0;
  }

  // goToLine selects a line of the draft and brings it into view.
  function goToLine(n) {
    const lines = doc.value.split("\n");
    const start = lines.slice(0, n - 1).reduce((sum, l) => sum + l.length + 1, 0);
    doc.focus();
    doc.setSelectionRange(start, start + lines[n - 1].length);
    const lineHeight = parseFloat(getComputedStyle(doc).lineHeight) || 18;
    doc.scrollTop = Math.max(0, (n - 3) * lineHeight);
  }

  function setStatus(text, cls) {
    status.textContent = text;
    status.className = "small " + (cls || "");
  }

  // refresh enables Save only for a checked draft that changes something.
  function refresh() {
    if (!saveBtn) return;
    const changed = !same(doc.value, saved);
    saveBtn.disabled = !changed || doc.value !== good;
    saveBtn.title = !changed ? "Nothing to save: the draft is the saved policy." : saveBtn.disabled ? "Save waits until the draft checks." : "";
  }

  async function check() {
    clearTimeout(timer);
    const text = doc.value, n = ++seq;
    refresh();
    const p = parse(text);
    if (p.error) {
      showProblems([{ error: p.error }]);
      setStatus("The draft does not check; Save waits until it does.", "bad");
      return;
    }
    setStatus("Checking…");
    let ans;
    try {
      ans = await send("POST", base + "/check", p.doc);
    } catch (e) {
      if (n === seq) setStatus("The gateway could not be reached to check the draft; keep typing to try again.", "bad");
      return;
    }
    if (n !== seq) return; // a newer draft is being checked
    const { status: code, data } = ans;
    let errors = [];
    if (code === 200 && data.ok) {
      good = text;
    } else if (code === 200 || code === 400) {
      errors = data.errors || [data];
    } else {
      errors = [{ error: data.error || `The gateway answered ${code}.` }];
    }
    showProblems(errors);
    if (errors.length) setStatus(`The draft does not check (${errors.length} problem${errors.length === 1 ? "" : "s"}); Save waits until it does.`, "bad");
    else setStatus(same(text, saved) ? "The draft is the saved policy." : "The draft checks.", "ok");
    refresh();
  }

  doc.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(check, 300);
    refresh();
  });

  async function save() {
    const p = parse(doc.value);
    if (p.error) return;
    saveBtn.disabled = true;
    saveErr.hidden = true;
    const text = doc.value;
    let ans;
    try {
      ans = await send("PUT", base, Object.assign({}, p.doc, { version }));
    } catch (e) {
      saveFailed("The gateway could not be reached; nothing was saved. Try again.");
      return;
    }
    const { status: code, data } = ans;
    if (code === 200) {
      version = data.version;
      editor.dataset.version = String(version);
      saved = good = text;
      showProblems([]);
      setStatus(`Saved as version ${version}. It applies to the next call on every gateway.`, "ok");
      if (typeof refreshParts === "function") refreshParts(); // the Rules card, from app.js
      refresh();
      return;
    }
    if (code === 409) {
      saveFailed(data.error || "Someone else saved the policy since you opened this page; nothing was saved.", true);
      return;
    }
    if (code === 400 && (data.index >= 0 || data.interceptor >= 0)) showProblems([data]);
    saveFailed(code === 400 ? `Nothing was saved: ${problem(data)}` : (data.error || `The gateway answered ${code}; nothing was saved.`));
  }

  // saveFailed shows why a save did not happen; a conflict offers to
  // load the newer policy.
  function saveFailed(msg, conflict) {
    saveErr.replaceChildren(msg);
    if (conflict) {
      const b = document.createElement("button");
      b.type = "button";
      b.className = "small";
      b.textContent = "Reload the saved policy";
      b.addEventListener("click", () => location.reload());
      saveErr.append(" Copy your draft if you want to keep it, then ", b);
    }
    saveErr.hidden = false;
    refresh();
  }

  if (saveBtn) saveBtn.addEventListener("click", save);
  editor.querySelector("[data-policy-reset]").addEventListener("click", () => { doc.value = saved; check(); });
  refresh();

  // Try it.
  const form = document.querySelector("form[data-try]");
  const card = form.closest(".try-it");
  const tryErr = card.querySelector("[data-try-error]");
  const out = card.querySelector("[data-try-result]");
  const source = card.querySelector("[data-try-source]");
  const resultBox = form.elements.result;
  const resultErr = card.querySelector("[data-try-result-error]");

  function decision(d) {
    if (!d || !d.effect || d.effect === "none") return "none (no rule decides)";
    const said = d.rule ? `${d.effect} by rule "${d.rule}"` : d.effect;
    return d.failed ? `${said} (it could not be evaluated)` : said;
  }

  function field(name, text) {
    out.querySelector(`[data-try-${name}]`).textContent = text;
  }

  function hits(audit) {
    return audit && audit.length ? audit.map(h => `rule "${h.rule}" would ${h.failed ? "fail (and refuse)" : h.effect}`).join("; ") : "—";
  }

  // sampleResult reads the Result field: no result when it is empty; a
  // tool result as MCP has it when it starts with "{" (then it must be
  // one, in JSON); else plain text, the result's one text item.
  function sampleResult(text) {
    const t = text.trim();
    if (!t) return {};
    if (!t.startsWith("{")) return { result: { content: [{ type: "text", text }] }, plain: true };
    let r;
    try { r = JSON.parse(t); } catch (e) {
      return { error: `The result starts with { but is not JSON: ${e.message}. Fix the JSON, or write plain text that does not start with {.` };
    }
    if (!["content", "structuredContent", "isError"].some(k => k in r)) {
      return { error: 'The result in JSON is a tool result as MCP has it: give it "content", "structuredContent" or "isError", such as {"content": [{"type": "text", "text": "mail ann@example.com"}]}.' };
    }
    return { result: r };
  }

  function resultProblem(msg) {
    resultErr.textContent = msg || "";
    resultErr.hidden = !msg;
    if (msg) resultBox.setAttribute("aria-invalid", "true"); else resultBox.removeAttribute("aria-invalid");
  }

  // shapedText is the result as the caller would get it: the text alone
  // when the sample was plain text and still is one text item, else the
  // tool result in JSON.
  function shapedText(shaped, plain) {
    const c = shaped && shaped.content;
    if (plain && Array.isArray(c) && c.length === 1 && c[0].type === "text" && !shaped.isError && shaped.structuredContent === undefined) return c[0].text;
    return JSON.stringify(shaped, null, 2);
  }

  function showResult(res, plain) {
    for (const el of out.querySelectorAll("[data-try-on-result]")) el.hidden = !res;
    if (!res) return;
    field("res", decision(res));
    field("res-message", res.message || "—");
    field("res-audit", hits(res.audit));
    field("shaped", shapedText(res.shaped, plain));
  }

  resultBox.addEventListener("input", () => resultProblem(""));

  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    tryErr.hidden = true;
    let args;
    try { args = JSON.parse(form.elements.args.value || "{}"); } catch (e) {
      tryErr.textContent = `The arguments are not JSON: ${e.message}`;
      tryErr.hidden = false;
      return;
    }
    const sample = sampleResult(resultBox.value);
    resultProblem(sample.error);
    if (sample.error) return;
    const [kind, who] = form.elements.caller.value.split(/:(.*)/s);
    const body = { tool: form.elements.tool.value.trim(), args };
    if (sample.result) body.result = sample.result;
    if (kind === "key") body.asKey = who; else body.asPerson = who;
    const draft = !same(doc.value, saved);
    if (draft) {
      const p = parse(doc.value);
      if (p.error) {
        tryErr.textContent = `${p.error} Fix the draft, or undo your changes to try the saved policy.`;
        tryErr.hidden = false;
        return;
      }
      body.document = p.doc;
    }
    const button = form.querySelector("[type=submit]");
    button.disabled = true;
    try {
      const { status: code, data } = await send("POST", base + "/test", body);
      if (code === 400 && /^result: /.test(data.error || "")) {
        resultProblem(`The gateway does not take this result: ${data.error.replace(/^result: /, "")}.`);
        out.hidden = true;
        return;
      }
      if (code !== 200) {
        tryErr.textContent = code === 400 && (data.rule || data.field) ? problem(data) : (data.error || `The gateway answered ${code}.`);
        tryErr.hidden = false;
        out.hidden = true;
        return;
      }
      field("list", decision(data.list));
      field("call", decision(data.call));
      field("message", (data.call && data.call.message) || "—");
      field("audit", hits(data.call && data.call.audit));
      showResult(data.result, sample.plain);
      source.textContent = draft ? "Tried the draft in the editor, which is not saved."
        : version ? `Tried the saved policy, version ${version}.` : "Tried with no policy saved.";
      out.hidden = false;
    } catch (e) {
      tryErr.textContent = "The gateway could not be reached; try again.";
      tryErr.hidden = false;
    } finally {
      button.disabled = false;
    }
  });
})();
