// Spacefix dashboard: a little hand-written JS over the admin API.
// Pages are rendered on the server; scripts only send writes to /api and
// reload, fill dialogs, copy text and tail the log.
"use strict";

// api sends a JSON request to the admin API and returns the parsed answer,
// or throws an Error with the API's message.
async function api(method, path, body) {
  const opts = { method, headers: { "Accept": "application/json" }, credentials: "same-origin" };
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const res = await fetch(path, opts);
  const data = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(data.error || `The gateway answered ${res.status}.`);
  return data;
}

function toast(msg, bad) {
  const t = document.getElementById("toast");
  if (!t) return;
  t.textContent = msg;
  t.className = bad ? "bad" : "";
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.hidden = true; }, bad ? 8000 : 3000);
}

// formBody turns a form into the JSON the API takes: checkboxes are
// booleans, data-type="int" numbers, data-type="list" comma-separated lists.
function formBody(form) {
  const body = {};
  for (const el of form.elements) {
    if (!el.name || el.disabled) continue;
    if (el.type === "radio") { if (el.checked) body[el.name] = el.value; continue; }
    if (el.type === "checkbox") { body[el.name] = el.checked; continue; }
    const v = el.value.trim();
    // A description left as the agent registered it is no override.
    if (el.dataset.registered !== undefined && v === el.dataset.registered.trim()) { body[el.name] = ""; continue; }
    switch (el.dataset.type) {
      case "int": body[el.name] = v === "" ? 0 : parseInt(v, 10); break;
      case "list": body[el.name] = v === "" ? [] : v.split(",").map(s => s.trim()).filter(Boolean); break;
      default: body[el.name] = el.value;
    }
  }
  return body;
}

// After a form's write succeeds: data-then says what to do.
const then = {
  reload: () => location.reload(),
  saved: () => toast("Saved. It applies to the next request."),
  "saved-name": () => toast("Saved. Agents see your new name within a minute."),
  "goto-project": (data) => { location.href = "/p/" + encodeURIComponent(data.name); },
  "show-secret": (data, form) => { reveal(form, data.secret); refreshParts(); },
  "show-url": (data, form) => reveal(form, data.url),
  // Everyone gets an invite link to pass on, with an account or without:
  // the page must not tell which.
  "member-invited": (data, form) => reveal(form, data.invite),
};

// reveal shows a secret once, in the box after its form.
function reveal(form, text) {
  const box = form.parentElement.querySelector("[data-reveal]");
  box.querySelector("[data-secret]").textContent = text;
  box.hidden = false;
  form.reset();
}

// refreshParts replaces the page's [data-refresh] parts (the table of keys
// or tokens) with the same parts of the page as the server renders it now:
// what a form just made is listed at once, and the secret shown once stays
// on screen, which a reload would lose.
async function refreshParts() {
  const parts = document.querySelectorAll("[data-refresh]");
  if (parts.length === 0) return;
  try {
    const res = await fetch(location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } });
    if (!res.ok) return;
    const page = new DOMParser().parseFromString(await res.text(), "text/html");
    for (const el of parts) {
      const now = page.querySelector(`[data-refresh="${el.dataset.refresh}"]`);
      if (now) el.replaceWith(document.importNode(now, true));
    }
  } catch (e) {
    toast("Made; reload the page to see it in the table.", true);
  }
}

function splitAction(s) {
  const i = s.indexOf(" ");
  return [s.slice(0, i), s.slice(i + 1)];
}

async function submitForm(ev) {
  const form = ev.target.closest("form[data-api]");
  if (!form) return;
  ev.preventDefault();
  const [method, path] = splitAction(form.dataset.api);
  const err = form.querySelector("[data-error]");
  if (err) err.hidden = true;
  const button = form.querySelector("[type=submit]");
  if (button) button.disabled = true;
  try {
    const data = await api(method, path + (form.dataset.target || ""), formBody(form));
    (then[form.dataset.then] || then.reload)(data, form);
  } catch (e) {
    if (err) { err.textContent = e.message; err.hidden = false; } else toast(e.message, true);
  } finally {
    if (button) button.disabled = false;
  }
}

async function clickAction(el) {
  if (el.dataset.confirm && !confirm(el.dataset.confirm)) return;
  const [method, path] = splitAction(el.dataset.api);
  el.disabled = true;
  try {
    await api(method, path, el.dataset.body ? JSON.parse(el.dataset.body) : {});
    location.reload();
  } catch (e) {
    toast(e.message, true);
    el.disabled = false;
  }
}

// openEditTool fills the Tools page's Edit dialog from a row's data.
function openEditTool(tool) {
  const dlg = document.getElementById("edit-tool");
  const form = dlg.querySelector("form");
  form.dataset.target = encodeURIComponent(tool.name);
  dlg.querySelector("[data-field=name]").textContent = tool.name;
  dlg.querySelector("[data-field=unregistered]").hidden = tool.registered;
  // Start from the text models see now, so changing one word is one
  // word's work; the registered text left as it is keeps following the
  // agent (see formBody).
  const desc = form.elements.description;
  desc.value = tool.settings.description || tool.registeredDescription;
  desc.dataset.registered = tool.registeredDescription;
  desc.placeholder = tool.registeredDescription ? "Empty uses the agent's description." : "The agent registered no description.";
  form.elements.cacheSeconds.value = tool.settings.cacheSeconds;
  form.elements.access.value = tool.settings.access;
  form.elements.disabled.checked = tool.settings.disabled;
  dlg.querySelector("[data-field=declared]").textContent = tool.declared;
  dlg.querySelector("[data-error]").hidden = true;
  dlg.showModal();
  desc.focus();
}

function openEditKey(key) {
  const dlg = document.getElementById("edit-key");
  const form = dlg.querySelector("form");
  form.dataset.target = encodeURIComponent(key.id);
  dlg.querySelector("[data-field=id]").textContent = key.id;
  form.elements.displayName.value = key.displayName;
  form.elements.author.value = key.author;
  form.elements.community.checked = key.community;
  form.elements.identityAudience.value = key.identityAudience || "";
  dlg.showModal();
}

async function copy(text, button) {
  try {
    await navigator.clipboard.writeText(text);
    const old = button.textContent;
    button.textContent = "Copied";
    setTimeout(() => { button.textContent = old; }, 1200);
  } catch (e) {
    toast("Copying needs a secure page (https or localhost). Select the text instead.", true);
  }
}

// fillKey makes a client key and puts it into the set-up snippets.
async function fillKey(button) {
  button.disabled = true;
  try {
    const data = await api("POST", `/api/projects/${encodeURIComponent(button.dataset.fillKey)}/keys`,
      { kind: "client", name: "made on the overview page" });
    for (const tok of document.querySelectorAll("[data-snippet] .tok")) {
      if (tok.textContent.includes("YOUR_CLIENT_KEY")) tok.textContent = tok.textContent.replaceAll("YOUR_CLIENT_KEY", data.secret);
    }
    button.textContent = "Key filled in: save it now, it is shown once";
    const hint = document.querySelector("[data-key-hint]");
    if (hint) hint.textContent = `The snippets below carry a new client key, ${data.id || "made just now"}. Copy what you need now: the key is not shown again (the Keys page lists it, without its secret).`;
  } catch (e) {
    toast(e.message, true);
    button.disabled = false;
  }
}

document.addEventListener("submit", submitForm);

document.addEventListener("click", (ev) => {
  const el = ev.target.closest("button");
  if (!el) return;
  const d = el.dataset;
  if (d.api && !el.closest("form[data-api]")) clickAction(el);
  else if (d.edit) openEditTool(JSON.parse(d.edit));
  else if (d.editKey) openEditKey(JSON.parse(d.editKey));
  else if (d.close !== undefined) el.closest("dialog").close();
  else if (d.copy) copy(d.copy, el);
  else if (d.copyNext !== undefined) copy(el.closest(".snippet").querySelector("pre").textContent, el);
  else if (d.copyPrev !== undefined) copy(el.previousElementSibling.textContent, el);
  else if (d.fillKey) fillKey(el);
  else if (d.showMore !== undefined) { toolLimit += Number(document.querySelector("table.tools").dataset.pageSize) || 100; filterTools(); }
});

document.addEventListener("input", (ev) => {
  if (ev.target.matches("[data-tool-filter]")) { toolLimit = 0; filterTools(); }
});

document.addEventListener("change", (ev) => {
  if (ev.target.matches("select[data-nav]")) location.href = ev.target.value;
  if (ev.target.matches("select[data-autosubmit]")) ev.target.form.submit();
  if (ev.target.matches("[data-live]")) ev.target.checked ? startTail(ev.target) : stopTail();
});

// The live tail: server-sent events from the call log.
let source = null;

function cell(text, cls) {
  const td = document.createElement("td");
  if (cls) td.className = cls;
  td.textContent = text;
  return td;
}

// callDuration writes a call's duration as the server-rendered rows do
// (render.go's callDuration): ms under a second, else seconds.
function callDuration(ms) {
  return ms < 1000 ? `${ms.toFixed(1)} ms` : `${(ms / 1000).toFixed(1)} s`;
}

function codeCell(text) {
  const td = document.createElement("td");
  const c = document.createElement("code");
  c.textContent = text;
  td.append(c);
  return td;
}

function logRow(c) {
  const tr = document.createElement("tr");
  tr.className = "new";
  const outcome = document.createElement("td");
  const pill = document.createElement("span");
  pill.className = "pill outcome-" + c.outcome;
  pill.textContent = c.outcome;
  outcome.append(pill);
  const detail = cell("", "desc");
  if (c.error) {
    const e = document.createElement("span");
    e.className = "errtext";
    e.textContent = c.error;
    detail.append(e);
  }
  if (c.progress.length) {
    const det = document.createElement("details");
    const sum = document.createElement("summary");
    sum.textContent = `${c.progress.length} progress line${c.progress.length === 1 ? "" : "s"}`;
    const ol = document.createElement("ol");
    for (const line of c.progress) { const li = document.createElement("li"); li.textContent = line; ol.append(li); }
    det.append(sum, ol);
    detail.append(det);
  }
  const when = new Date(c.time);
  let key = codeCell(c.key);
  if (c.keyName) {
    key = cell("");
    const name = document.createElement("span");
    name.title = c.key;
    name.textContent = c.keyName;
    key.append(name);
  }
  const name = codeCell(c.name);
  if (c.taskId) {
    const task = document.createElement("small");
    task.className = "muted";
    task.title = "The call ran as this MCP task";
    task.append("task ", Object.assign(document.createElement("code"), { textContent: c.taskId }));
    name.append(document.createElement("br"), task);
  }
  if (c.retryOf) {
    const of = document.createElement("small");
    of.className = "muted";
    of.title = c.replay
      ? "A repeat of a request id, answered with this earlier call's result: no agent reached, not billed"
      : "Delivered again: this earlier call with the same request id timed out or lost its agent";
    of.append(c.replay ? "replay of " : "retry of ", Object.assign(document.createElement("code"), { textContent: c.retryOf }));
    name.append(document.createElement("br"), of);
  }
  tr.append(timeCell(when), cell(c.kind), name, key,
    codeCell(c.replica), cell(callDuration(c.durationMs), "num"), outcome, detail);
  return tr;
}

function startTail(box) {
  stopTail();
  const body = document.querySelector("[data-log-rows]");
  source = new EventSource(box.dataset.live);
  source.addEventListener("call", (ev) => {
    const empty = body.querySelector(".empty-row");
    if (empty) empty.remove();
    body.prepend(logRow(JSON.parse(ev.data)));
    while (body.rows.length > 500) body.lastElementChild.remove();
  });
}

function stopTail() {
  if (source) source.close();
  source = null;
}

// The Tools page's filter: it matches name, description, agent and key
// (the rows' text), shows the first page of matches, and hides the
// agent headings left without rows.
let toolLimit = 0;

function filterTools() {
  const table = document.querySelector("table.tools");
  const box = document.querySelector("[data-tool-filter]");
  if (!table || !box) return;
  const size = Number(table.dataset.pageSize) || 100;
  if (!toolLimit) toolLimit = size;
  const q = box.value.trim().toLowerCase();
  const shownGroups = new Set();
  const heads = [];
  let matched = 0, shown = 0, total = 0;
  for (const tr of table.tBodies[0].rows) {
    if (tr.dataset.groupHead !== undefined) { heads.push(tr); continue; }
    if (tr.dataset.tool === undefined) continue;
    total++;
    if (tr.search === undefined) tr.search = tr.textContent.toLowerCase(); // name, description, agent, key, pills
    const match = q === "" || tr.search.includes(q);
    if (match) matched++;
    const show = match && matched <= toolLimit;
    tr.hidden = !show;
    if (show) { shown++; shownGroups.add(tr.dataset.group); }
  }
  for (const h of heads) h.hidden = !shownGroups.has(h.dataset.groupHead);
  table.querySelector("[data-no-match]").hidden = matched > 0;
  const noun = (n) => `${n.toLocaleString("en")} tool${n === 1 ? "" : "s"}`;
  document.querySelector("[data-tool-count]").textContent = q === ""
    ? (shown < total ? `Showing ${shown.toLocaleString("en")} of ${noun(total)}.` : `${noun(total)}.`)
    : `${noun(matched)} of ${total.toLocaleString("en")} match${shown < matched ? `; showing ${shown.toLocaleString("en")}` : ""}.`;
  document.querySelector("[data-tool-more]").hidden = shown >= matched;
}

// Times: the server writes UTC; people read their own local time, with
// its zone, and UTC on hover.
function pad(n) { return String(n).padStart(2, "0"); }

function localStamp(d) {
  const zone = new Intl.DateTimeFormat(undefined, { timeZoneName: "short" }).formatToParts(d)
    .find(p => p.type === "timeZoneName");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())} ${zone ? zone.value.replaceAll(" ", "") : "local"}`;
}

function utcStamp(d) { return d.toISOString().slice(0, 19).replace("T", " ") + " UTC"; }

// timeElement is a <time> for a moment, in local time.
function timeElement(d) {
  const t = document.createElement("time");
  t.dateTime = d.toISOString();
  t.textContent = localStamp(d);
  t.title = `Your local time. ${utcStamp(d)}`;
  return t;
}

function timeCell(d) {
  const td = cell("", "nowrap");
  td.append(timeElement(d));
  return td;
}

function localTimes(root) {
  for (const t of root.querySelectorAll("time[datetime]")) {
    const d = new Date(t.dateTime);
    if (isNaN(d)) continue;
    t.textContent = localStamp(d);
    t.title = `Your local time. ${utcStamp(d)}`;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  localTimes(document);
  const live = document.querySelector("[data-live]");
  if (live && live.checked) startTail(live);
});
