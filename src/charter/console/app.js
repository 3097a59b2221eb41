// charter approvals console: plain JavaScript, no build step, nothing fetched from elsewhere.
// Every value from the server is put on the page as text (never as HTML).

const KEY_STORAGE = "charter.console.apiKey";
const POLL_MS = 3000;
const API = new URL("../v1/", window.location.href);

const state = {
  key: sessionStorage.getItem(KEY_STORAGE),
  me: null,
  filter: "pending",
  approvals: new Map(), // id -> approval
  seen: new Set(), // approval ids already announced
  firstLoad: true,
  tools: [],
  lastUpdate: null,
  timer: null,
  linked: null, // the approval id of a deep link (#/approvals/{id}), else null
  lastList: null, // the approvals last fetched, with the ones held behind "Show N new requests"
};

const $ = (id) => document.getElementById(id);

// -- DOM helpers ----------------------------------------------------------------------------

function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") el.className = value;
    else if (name === "text") el.textContent = value;
    else if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

function svgIcon(path) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("aria-hidden", "true");
  for (const d of path) {
    const p = document.createElementNS(ns, "path");
    p.setAttribute("d", d);
    p.setAttribute("stroke-linecap", "round");
    p.setAttribute("stroke-linejoin", "round");
    svg.append(p);
  }
  return svg;
}

// -- text the agent chose ---------------------------------------------------------------------
// Arguments, targets, reason codes, tool names and subjects can carry characters that are not
// seen but change what is read: a right-to-left override shows "\u202emoc.knabdoog@ecila" as
// "alice@goodbank.com", a zero-width space hides inside "acct\u200b_1", a line separator makes a
// fake line. Every such value is shown with those characters written out as escapes (\u202e, in
// their own style) and inside a bidi isolate, so it cannot reorder the words around it either.
const HIDDEN = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}\p{Default_Ignorable_Code_Point}]/gu;

function escapeOf(char) {
  const code = char.codePointAt(0);
  return code > 0xffff ? `\\u{${code.toString(16)}}` : `\\u${code.toString(16).padStart(4, "0")}`;
}

/** Agent text for an attribute or an announcement: its hidden characters written as escapes. */
function reveal(text) {
  return String(text).replace(HIDDEN, escapeOf);
}

/** Agent text as page content: isolated, its hidden characters shown as marked escapes. */
function agentText(text, cls) {
  const span = h("span", { class: cls ? `agent ${cls}` : "agent" });
  const value = String(text);
  let shown = 0;
  for (const match of value.matchAll(HIDDEN)) {
    const code = match[0].codePointAt(0).toString(16).toUpperCase().padStart(4, "0");
    span.append(
      value.slice(shown, match.index),
      h("span", { class: "hidden-char", title: `invisible character U+${code}`, text: escapeOf(match[0]) })
    );
    shown = match.index + match[0].length;
  }
  span.append(value.slice(shown));
  return span;
}

function jsonBlock(value, label) {
  const pre = h("pre", { class: "json", tabindex: "0", "aria-label": reveal(label) });
  renderJson(pre, value, 0);
  return pre;
}

function renderJson(into, value, depth) {
  const pad = "  ".repeat(depth);
  if (Array.isArray(value)) {
    if (value.length === 0) return into.append("[]");
    into.append("[\n");
    value.forEach((item, i) => {
      into.append(pad + "  ");
      renderJson(into, item, depth + 1);
      into.append(i < value.length - 1 ? ",\n" : "\n");
    });
    into.append(pad + "]");
  } else if (value !== null && typeof value === "object") {
    const entries = Object.entries(value);
    if (entries.length === 0) return into.append("{}");
    into.append("{\n");
    entries.forEach(([k, v], i) => {
      into.append(pad + "  ", agentText(JSON.stringify(k), "k"), ": ");
      renderJson(into, v, depth + 1);
      into.append(i < entries.length - 1 ? ",\n" : "\n");
    });
    into.append(pad + "}");
  } else if (typeof value === "string") {
    into.append(agentText(JSON.stringify(value), "s"));
  } else if (typeof value === "number") {
    into.append(h("span", { class: "n", text: String(value) }));
  } else {
    into.append(h("span", { class: "l", text: String(value) }));
  }
}

// A table in its scrolling wrapper: a caption for screen readers, one row of column headings.
function dataTable(caption, headings, rows) {
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      {},
      h("caption", { class: "sr-only", text: caption }),
      h("thead", {}, h("tr", {}, headings.map((t) => h("th", { scope: "col", text: t })))),
      h("tbody", {}, rows)
    )
  );
}

function emptyState(title, text) {
  return h(
    "div",
    { class: "empty" },
    svgIcon(["M12 21a9 9 0 1 0 0-18 9 9 0 0 0 0 18Z", "m8 12 2.8 2.8L16.5 9"]),
    h("h3", { text: title }),
    h("p", { text })
  );
}

function riskBadge(risk) {
  const level = ["low", "medium", "high", "critical"].includes(risk) ? risk : "high";
  return h("span", { class: `badge badge-risk-${level}`, text: `${level} risk` });
}

function relative(date) {
  const seconds = Math.round((Date.now() - date.getTime()) / 1000);
  if (seconds < 5) return "just now";
  if (seconds < 60) return `${seconds} s ago`;
  const minutes = Math.round(seconds / 60);
  if (minutes < 60) return `${minutes} min ago`;
  const hours = Math.round(minutes / 60);
  if (hours < 48) return `${hours} h ago`;
  return date.toLocaleDateString();
}

function timeLeft(expires) {
  const seconds = Math.round((expires.getTime() - Date.now()) / 1000);
  if (seconds <= 0) return { text: "expired", level: "urgent" };
  const minutes = Math.floor(seconds / 60);
  const level = seconds < 120 ? "urgent" : seconds < 600 ? "soon" : "";
  if (minutes < 1) return { text: `${seconds} s left`, level };
  if (minutes < 60) return { text: `${minutes} min left`, level };
  return { text: `${Math.floor(minutes / 60)} h ${minutes % 60} min left`, level };
}

function announce(text) {
  const region = $("announcer");
  region.textContent = "";
  // A new text node in a cleared region is announced even when the words repeat.
  window.setTimeout(() => { region.textContent = text; }, 50);
}

let toastTimer = null;
function toast(...parts) {
  const el = $("toast");
  el.replaceChildren(...parts.flat().filter((part) => part !== null));
  el.hidden = false;
  window.clearTimeout(toastTimer);
  toastTimer = window.setTimeout(() => { el.hidden = true; }, 4000);
}

// -- the API --------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, problem) {
    super((problem && (problem.detail || problem.title)) || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

async function api(path, options = {}) {
  const headers = { Accept: "application/json", "X-API-Key": state.key };
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(new URL(path, API), {
    method: options.method || "GET",
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
    cache: "no-store",
  });
  const text = await response.text();
  const data = text ? JSON.parse(text) : null;
  if (!response.ok) {
    if (response.status === 401) signOut("Your key was not accepted. Sign in again.");
    throw new ApiError(response.status, data);
  }
  return data;
}

// -- sign in --------------------------------------------------------------------------------

async function signIn(key) {
  state.key = key;
  const me = await api("whoami");
  sessionStorage.setItem(KEY_STORAGE, key);
  state.me = me;
  $("who").replaceChildren(
    h("strong", {}, agentText(me.displayName || me.subject)),
    " · ",
    agentText(me.tenantId)
  );
  $("signin-view").hidden = true;
  $("session").hidden = false;
  $("app-view").hidden = false;
  if (!me.approver) {
    $("approvals-summary").textContent =
      "Your key cannot approve; you see the approvals you requested.";
  }
  $("main").focus();
  if (linkedApproval() !== null) await followLink();
  else await refreshApprovals();
  await refreshUpstreams();
  schedule();
}

function signOut(message) {
  sessionStorage.removeItem(KEY_STORAGE);
  window.clearTimeout(state.timer);
  Object.assign(state, {
    key: null, me: null, approvals: new Map(), seen: new Set(), firstLoad: true, tools: [], lastList: null,
  });
  showHeldCount(0);
  $("approvals").replaceChildren();
  $("app-view").hidden = true;
  $("session").hidden = true;
  $("signin-view").hidden = false;
  $("signin-error").textContent = message || "";
  $("api-key").value = "";
  $("api-key").focus();
}

$("signin-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const key = $("api-key").value.trim();
  $("signin-error").textContent = "";
  if (!key) {
    $("signin-error").textContent = "Enter your API key.";
    $("api-key").focus();
    return;
  }
  $("signin-submit").disabled = true;
  try {
    await signIn(key);
  } catch (error) {
    state.key = null;
    if (!(error instanceof ApiError && error.status === 401)) {
      $("signin-error").replaceChildren("Could not sign in: ", agentText(error.message));
    }
  } finally {
    $("signin-submit").disabled = false;
  }
});

$("sign-out").addEventListener("click", () => signOut(""));

// -- approvals ------------------------------------------------------------------------------

// -- deep links: #/approvals/{id} opens that card alone -------------------------------------

function linkedApproval() {
  const match = /^#\/approvals\/([^/?#]+)$/.exec(window.location.hash);
  if (!match) return null;
  try {
    return decodeURIComponent(match[1]);
  } catch {
    return null;
  }
}

async function followLink() {
  state.linked = linkedApproval();
  $("linked").hidden = state.linked === null;
  $("approval-filter").disabled = state.linked !== null;
  if (!state.key) return; // signing in opens it
  selectTab($("tab-approvals"), false);
  const shown = await refreshApprovals();
  const card = state.linked && document.getElementById(cardId(state.linked));
  if (shown && card) {
    card.setAttribute("tabindex", "-1");
    card.focus();
  }
}

window.addEventListener("hashchange", followLink);

const APPROVAL_ID = /^apr_[0-9a-f]{32}$/;

async function fetchApprovals() {
  if (state.linked === null) {
    const data = await api(`approvals?status=${encodeURIComponent(state.filter)}&limit=200`);
    return data.approvals;
  }
  // Anyone can craft a link: text that is not an approval id (apr_ and 32 hex digits, as
  // charter.ledger.approval_service makes them) is never fetched nor repeated on the page.
  if (!APPROVAL_ID.test(state.linked)) throw new Error("the link does not name an approval");
  try {
    return [await api(`approvals/${encodeURIComponent(state.linked)}`)];
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) {
      throw new Error(
        `there is no approval ${state.linked} that your key may see (another tenant's, or ` +
          "someone else's request while your key is not an approver)"
      );
    }
    throw error;
  }
}

async function refreshApprovals() {
  try {
    const list = await fetchApprovals();
    $("approvals-error").textContent = "";
    renderApprovals(list);
    state.lastUpdate = new Date();
    $("live").classList.remove("stale");
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return;
    $("live").classList.add("stale");
    $("approvals-error").replaceChildren("Could not load approvals: ", agentText(error.message));
    if (state.linked !== null) renderApprovals([]);
    updateLiveText();
    return false;
  }
  updateLiveText();
  return true;
}

function renderApprovals(list, { showHeld = false } = {}) {
  const container = $("approvals");
  state.lastList = list;
  removeGone(list);
  // While cards are shown, new requests wait behind "Show N new requests": inserted above,
  // they would push the card under the approver's pointer and take the click meant for it.
  const hold =
    !showHeld && !state.firstLoad && state.linked === null && container.querySelector(".card") !== null;
  const fresh = [];
  const held = [];
  const inserted = [];
  let below = null; // the card the next one (going up the list) goes above
  for (const approval of [...list].reverse()) {
    if (!state.seen.has(approval.id) && !state.firstLoad && approval.status === "pending") {
      fresh.unshift(approval);
    }
    state.seen.add(approval.id);
    const existing = document.getElementById(cardId(approval.id));
    if (!existing && hold) {
      held.unshift(approval);
      continue;
    }
    const known = state.approvals.get(approval.id);
    if (existing && known && known.status === approval.status) {
      // Keep the card (and whatever the approver is typing in it); refresh its clock.
      updateClock(existing, approval);
      below = existing;
    } else {
      const card = approvalCard(approval);
      if (existing) existing.replaceWith(card);
      else {
        container.insertBefore(card, below);
        inserted.unshift(card);
        if (!state.firstLoad) card.classList.add("is-new");
      }
      below = card;
    }
    state.approvals.set(approval.id, approval);
  }
  container.querySelectorAll(".empty").forEach((el) => el.remove());
  if (list.length === 0 && state.linked === null && !container.querySelector(".card")) {
    container.append(
      state.filter === "pending"
        ? emptyState(
            "Nothing waiting for you",
            "New requests for approval appear here as soon as they arrive; this page checks every few seconds."
          )
        : emptyState("No approvals here", "Nothing matches this filter yet.")
    );
  }
  const pending = list.filter((a) => a.status === "pending").length;
  if (state.filter === "pending" && state.linked === null) setPendingCount(pending);
  showHeldCount(held.length);
  announceFresh(fresh, held.length);
  state.firstLoad = false;
  return inserted;
}

function removeGone(list) {
  const ids = new Set(list.map((a) => a.id));
  for (const id of [...state.approvals.keys()]) {
    if (ids.has(id)) continue;
    const card = document.getElementById(cardId(id));
    // A card that holds the keyboard focus stays until the focus moves on.
    if (card && card.contains(document.activeElement)) continue;
    if (card) card.remove();
    state.approvals.delete(id);
  }
}

function announceFresh(fresh, held) {
  const where = held > 0 ? ` ${showHeldText(held)} at the top of the list shows it.` : "";
  if (fresh.length === 1) {
    const a = fresh[0];
    announce(reveal(`New approval request: ${a.tool}${a.target ? ` on ${a.target}` : ""}, ${a.risk} risk.`) + where);
  } else if (fresh.length > 1) {
    announce(`${fresh.length} new approval requests.${where}`);
  }
}

const showHeldText = (n) => (n === 1 ? "Show 1 new request" : `Show ${n} new requests`);

function showHeldCount(n) {
  $("new-requests").hidden = n === 0;
  $("show-new").textContent = showHeldText(n);
}

$("show-new").addEventListener("click", () => {
  const inserted = renderApprovals(state.lastList || [], { showHeld: true });
  if (inserted.length === 0) return;
  inserted[0].setAttribute("tabindex", "-1");
  inserted[0].focus();
});

// -- decisions wait for a card to stand still ------------------------------------------------
// A card that just appeared or moved (a request inserted or removed above it, an error line
// shown) may have slid under a pointer aimed at another: its buttons ignore clicks for a moment.

const SETTLE_MS = 1000;
const cardTops = new WeakMap();
const settleTimers = new WeakMap();

function noteMoves() {
  for (const card of $("approvals").querySelectorAll(".card")) {
    const top = Math.round(card.getBoundingClientRect().top + window.scrollY);
    if (cardTops.get(card) === top) continue;
    cardTops.set(card, top);
    holdDecisions(card);
  }
}

function holdDecisions(card) {
  const buttons = [...card.querySelectorAll(".decide .actions .button")];
  for (const button of buttons) button.setAttribute("aria-disabled", "true");
  window.clearTimeout(settleTimers.get(card));
  settleTimers.set(
    card,
    window.setTimeout(() => buttons.forEach((button) => button.removeAttribute("aria-disabled")), SETTLE_MS)
  );
}

new MutationObserver(noteMoves).observe($("panel-approvals"), {
  childList: true,
  characterData: true,
  subtree: true,
});

function setPendingCount(n) {
  const badge = $("pending-count");
  badge.textContent = String(n);
  badge.classList.toggle("has-items", n > 0);
  badge.setAttribute("aria-label", `${n} pending`);
  document.title = n > 0 ? `(${n}) Approvals · charter console` : "Approvals · charter console";
}

const cardId = (id) => `approval-${id}`;

function approvalCard(a) {
  const titleId = `${cardId(a.id)}-title`;
  const created = new Date(a.createdAt);
  const card = h(
    "article",
    { class: `card risk-${a.risk}`, id: cardId(a.id), "aria-labelledby": titleId },
    h(
      "div",
      { class: "card-head" },
      h(
        "div",
        { class: "card-title" },
        riskBadge(a.risk),
        h("h3", { id: titleId }, agentText(a.tool)),
        a.tier ? h("span", { class: "badge badge-tier", text: a.tier }) : null,
        a.status !== "pending" ? statusBadge(a.status) : null
      ),
      h("div", { class: "clock" })
    ),
    a.description ? h("p", { class: "card-desc" }, agentText(a.description)) : h("div", { class: "card-desc" }),
    h(
      "dl",
      { class: "facts" },
      fact("Target", a.target || "—"),
      fact("Requested by", a.requesterId),
      fact("Requested", h("time", { datetime: a.createdAt, text: `${relative(created)} · ${created.toLocaleTimeString()}` })),
      fact("Request id", a.requestId, "mono"),
      a.reasonCode ? fact("Reason code", a.reasonCode) : null
    ),
    h("p", { class: "args-label", id: `${cardId(a.id)}-args`, text: "Exact arguments" }),
    jsonBlock(a.arguments, `Exact arguments of ${a.tool}`)
  );
  updateClock(card, a);
  if (a.status === "pending" && state.me && state.me.approver) card.append(decisionForm(a));
  else if (a.status !== "pending") card.append(decisionNote(a));
  return card;
}

function fact(label, value, cls) {
  // A string is the server's (so possibly the agent's) text; a node is the page's own.
  const shown = value === null || value === undefined || value instanceof Node ? value : agentText(value);
  return h("div", {}, h("dt", { text: label }), h("dd", { class: cls }, shown));
}

function statusBadge(status) {
  const map = {
    approved: ["badge-ok", "approved"],
    denied: ["badge-danger", "denied"],
    consumed: ["badge-info", "executed"],
    pending: ["badge-warn", "pending"],
  };
  const [cls, text] = map[status] || ["badge-tier", status];
  return h("span", { class: `badge ${cls}`, text });
}

function updateClock(card, a) {
  const clock = card.querySelector(".clock");
  if (!clock) return;
  if (a.status !== "pending") {
    clock.className = "clock";
    clock.replaceChildren(
      h("strong", { text: a.decidedAt ? relative(new Date(a.decidedAt)) : "" }),
      a.decidedAt ? "decided" : ""
    );
    return;
  }
  const left = timeLeft(new Date(a.expiresAt));
  clock.className = `clock ${left.level}`;
  clock.replaceChildren(
    h("strong", { text: left.text }),
    `expires ${new Date(a.expiresAt).toLocaleTimeString()}`
  );
}

function decisionForm(a) {
  const reasonId = `${cardId(a.id)}-reason`;
  const errorId = `${cardId(a.id)}-error`;
  const label = reveal(`${a.tool}${a.target ? ` on ${a.target}` : ""}`);
  const reason = h("textarea", {
    id: reasonId,
    rows: "1",
    maxlength: "2000",
    placeholder: "Why you approve or deny (kept in the audit trail)",
    "aria-describedby": errorId,
  });
  const error = h("p", { class: "card-error", id: errorId, role: "alert" });
  const approve = h("button", {
    type: "button",
    class: "button button-approve",
    "aria-label": `Approve ${label}`,
    text: "Approve",
  });
  const deny = h("button", {
    type: "button",
    class: "button button-deny",
    "aria-label": `Deny ${label}`,
    text: "Deny",
  });
  const decide = async (verb) => {
    approve.disabled = deny.disabled = true;
    error.textContent = "";
    const text = reason.value.trim();
    try {
      const updated = await api(`approvals/${encodeURIComponent(a.id)}:${verb}`, {
        method: "POST",
        body: text ? { reason: text } : {},
      });
      const verbPast = verb === "grant" ? "Approved" : "Denied";
      toast(verbPast, " ", agentText(a.tool), a.target ? [" on ", agentText(a.target)] : null, ".");
      announce(`${verbPast} ${label}.`);
      state.approvals.set(updated.id, updated);
      const card = document.getElementById(cardId(a.id));
      const next = approvalCard(updated);
      card.replaceWith(next);
      focusAfterDecision(next);
      window.setTimeout(refreshApprovals, 800);
    } catch (e) {
      approve.disabled = deny.disabled = false;
      error.replaceChildren(agentText(e instanceof ApiError && e.problem ? e.problem.detail : e.message));
    }
  };
  const settled = (button) => {
    if (button.getAttribute("aria-disabled") !== "true") return true;
    error.textContent = "This request just appeared or moved: read it, then decide.";
    return false;
  };
  approve.addEventListener("click", () => settled(approve) && decide("grant"));
  deny.addEventListener("click", () => settled(deny) && decide("deny"));
  for (const button of [approve, deny]) {
    // A held key repeats: only a fresh press decides.
    button.addEventListener("keydown", (event) => {
      if (event.repeat) event.preventDefault();
    });
  }
  return h(
    "div",
    { class: "decide" },
    h("label", { for: reasonId, text: "Reason (optional)" }),
    reason,
    h("div", { class: "actions" }, approve, deny),
    error
  );
}

function focusAfterDecision(card) {
  // Move on to the next request still waiting (below, else above), or stay on this card. The
  // focus goes to the card itself, never to its Approve: a second Enter (a double press, a
  // held key) must not decide a request the approver has not read.
  const waiting = [...$("approvals").querySelectorAll(".card")].filter((c) => c.querySelector(".decide"));
  const after = waiting.find((c) => card.compareDocumentPosition(c) & Node.DOCUMENT_POSITION_FOLLOWING);
  const target = after || waiting[waiting.length - 1] || card;
  target.setAttribute("tabindex", "-1");
  target.focus();
}

function decisionNote(a) {
  const who = a.decidedBy ? [" by ", agentText(a.decidedBy)] : [];
  const words = {
    approved: ["Approved", who, "; waiting for the requester to retry."],
    denied: ["Denied", who, "."],
    consumed: ["Approved", who, " and executed."],
  };
  const note = h(
    "p",
    { class: "decision" },
    h("strong", {}, words[a.status] || agentText(a.status)),
    a.decisionReason ? [" Reason: “", agentText(a.decisionReason), "”"] : ""
  );
  const history = a.history || [];
  if (history.length < 2) return note;
  // A grant later revoked, say: every decision, oldest first, as the audit trail has them.
  return h("div", {}, note, decisionHistory(a, history));
}

function decisionHistory(a, history) {
  const listId = `${cardId(a.id)}-history`;
  const verbs = { approved: "Approved", denied: "Denied" };
  const items = history.map((d, i) => {
    const at = new Date(d.decidedAt);
    const revoked = d.status === "denied" && history.slice(0, i).some((p) => p.status === "approved");
    return h(
      "li",
      {},
      h("strong", {}, revoked ? "Revoked" : verbs[d.status] || agentText(d.status)),
      " by ",
      agentText(d.decidedBy),
      " · ",
      h("time", { datetime: d.decidedAt, title: at.toLocaleString(), text: relative(at) }),
      d.reason ? [" · “", agentText(d.reason), "”"] : ""
    );
  });
  return h(
    "div",
    { class: "history" },
    h("p", { class: "args-label", id: listId, text: "Decisions" }),
    h("ol", { "aria-labelledby": listId }, items)
  );
}

$("approval-filter").addEventListener("change", (event) => {
  state.filter = event.target.value;
  state.approvals = new Map();
  state.firstLoad = true;
  $("approvals").replaceChildren();
  refreshApprovals();
});

// -- activity -------------------------------------------------------------------------------

async function refreshActivity() {
  try {
    // The effect outbox beside the calls: a call whose refund or email is still pending,
    // retrying or dead shows it on its row. A server without effects answers an empty list.
    const [data, outbox] = await Promise.all([
      api("audit?limit=100"),
      api("effects?limit=500").catch(() => ({ effects: [] })),
    ]);
    $("activity-error").textContent = "";
    renderActivity(data.events, outbox.effects);
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 401)) {
      $("activity-error").replaceChildren("Could not load activity: ", agentText(error.message));
    }
  }
}

function outcomeBadge(outcome) {
  const map = {
    completed: "badge-ok",
    "interaction-required": "badge-warn",
    deferred: "badge-info",
    failed: "badge-danger",
    denied: "badge-danger",
  };
  const text = outcome === "interaction-required" ? "waiting" : outcome;
  return h("span", { class: `badge ${map[outcome] || "badge-tier"}`, text });
}

function effectsByRequest(effects) {
  const byRequest = new Map();
  for (const effect of effects) {
    if (!effect.requestId) continue;
    if (!byRequest.has(effect.requestId)) byRequest.set(effect.requestId, []);
    byRequest.get(effect.requestId).push(effect);
  }
  return byRequest;
}

function effectBadges(effects) {
  if (!effects || effects.length === 0) return "—";
  const open = effects.filter((e) => e.status !== "delivered");
  if (open.length === 0) {
    return h("span", { class: "badge badge-ok", text: `${effects.length} delivered` });
  }
  return open
    .sort((a, b) => a.seq - b.seq)
    .map((e) => {
      const [style, label] =
        e.status === "dead"
          ? ["badge-danger", "dead"]
          : e.status === "discarded"
            ? ["badge-tier", "discarded"]
            : e.lastError
              ? ["badge-warn", "failed, retrying"]
              : ["badge-info", "pending"];
      const detail = `${e.attempts}/${e.maxAttempts} attempts${e.lastError ? ` · ${e.lastError}` : ""}`;
      const badge = h("span", { class: `badge ${style}`, title: reveal(detail) }, agentText(e.name), ` ${label}`);
      // Admins re-drive or give up on a dead effect here (POST /v1/effects/{key}:retry|:discard).
      if (e.status !== "dead" || !(state.me && state.me.admin && state.me.kind === "person")) return badge;
      return h("span", { class: "effect-actions" }, badge, effectButton(e, "retry"), effectButton(e, "discard"));
    });
}

function effectButton(effect, action) {
  const verb = action === "retry" ? "Retry" : "Discard";
  const button = h("button", {
    type: "button",
    class: `button button-small ${action === "retry" ? "button-quiet" : "button-deny"}`,
    "aria-label": reveal(`${verb} ${effect.name} ${effect.key}`),
    text: verb,
  });
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      await api(`effects/${encodeURIComponent(effect.key)}:${action}`, { method: "POST" });
      const done = ` ${action === "retry" ? "is pending again" : "is discarded"}.`;
      toast(agentText(effect.name), done);
      announce(reveal(effect.name) + done);
      await refreshActivity();
    } catch (e) {
      button.disabled = false;
      $("activity-error").replaceChildren(
        `Could not ${action} `,
        agentText(effect.name),
        ": ",
        agentText(e instanceof ApiError && e.problem ? e.problem.detail : e.message)
      );
    }
  });
  return button;
}

function activityEffects(e, byRequest, byKey) {
  // A call's row: the effects it staged. An effect's "dead" row: while the effect is still
  // dead, an admin's buttons (notifications and other host-enqueued effects have no call).
  if (e.action === "call") return e.requestId ? effectBadges(byRequest.get(e.requestId)) : "—";
  const effect = e.action === "effect.dead" ? byKey.get(e.note) : undefined;
  if (!effect || effect.status !== "dead" || !(state.me && state.me.admin && state.me.kind === "person")) return "—";
  return h("span", { class: "effect-actions" }, effectButton(effect, "retry"), effectButton(effect, "discard"));
}

function activityCaller(e) {
  // Attempts are the worker's; a retry or discard is a person's (or the CLI operator's).
  if (e.action === "effect.retry" || e.action === "effect.discard") return e.subject || "operator";
  if (e.action.startsWith("effect.")) return "effect worker";
  return e.subject || "anonymous";
}

function activityBadge(e) {
  // An effect attempt's event: delivered, retried or dead, rather than completed/failed.
  if (!e.action.startsWith("effect.")) return outcomeBadge(e.outcome);
  const kind = e.action.slice("effect.".length);
  const style = { delivered: "badge-ok", retried: "badge-warn", dead: "badge-danger" }[kind];
  return h("span", { class: `badge ${style || "badge-tier"}`, text: `effect ${kind}` });
}

function renderActivity(events, outbox = []) {
  const effects = effectsByRequest(outbox);
  const byKey = new Map(outbox.map((effect) => [effect.key, effect]));
  const container = $("activity");
  if (events.length === 0) {
    container.replaceChildren(
      emptyState("No activity yet", "Calls to tools in your tenant will be listed here.")
    );
    return;
  }
  const rows = events.map((e) => {
    const time = new Date(e.time);
    return h(
      "tr",
      {},
      h("td", {}, h("time", { datetime: e.time, title: time.toLocaleString(), text: relative(time) })),
      h("td", { class: "mono" }, agentText(e.tool)),
      h("td", {}, activityBadge(e), e.replayed ? h("span", { class: "badge badge-tier", text: "replay" }) : null),
      h("td", { class: "mono" }, agentText([e.code, e.reason].filter(Boolean).join(" · ") || "—")),
      h("td", {}, agentText(activityCaller(e))),
      h("td", { class: "mono", title: reveal(e.requestId || "") }, e.requestId ? [agentText(e.requestId.slice(0, 8)), "…"] : "—"),
      h("td", {}, activityEffects(e, effects, byKey)),
      h("td", { class: "num", text: `${Math.round(e.durationMs)} ms` })
    );
  });
  const headings = ["When", "Tool", "Outcome", "Code", "Caller", "Request", "Effects", "Time"];
  container.replaceChildren(dataTable("Recent tool calls", headings, rows));
}

// -- limits ---------------------------------------------------------------------------------

async function refreshLimits() {
  try {
    const data = await api("limits");
    $("limits-error").textContent = "";
    renderLimits(data.budgets);
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 401)) {
      $("limits-error").replaceChildren("Could not load limits: ", agentText(error.message));
    }
  }
}

function usageMeter(b) {
  const share = b.capacity ? Math.min(b.used / b.capacity, 1) : 0;
  const level = share >= 1 ? "badge-danger" : share >= 0.5 ? "badge-warn" : "badge-ok";
  return h(
    "span",
    { class: "usage" },
    h("meter", {
      min: "0",
      max: String(b.capacity),
      value: String(b.used),
      "aria-label": `${b.used} of ${b.capacity} used`,
    }),
    h("span", { class: `badge ${level}`, text: `${b.used}/${b.capacity}` })
  );
}

function renderLimits(budgets) {
  const container = $("limits");
  if (budgets.length === 0) {
    container.replaceChildren(
      emptyState("Every budget is full", "No rate limit or quota is being spent right now.")
    );
    return;
  }
  const rows = budgets.map((b) =>
    h(
      "tr",
      {},
      h("td", { class: "mono" }, b.tool === "*" ? "every tool" : agentText(b.tool)),
      h("td", {}, agentText(b.limit)),
      h("td", { class: "mono" }, agentText(b.holder)),
      h("td", {}, usageMeter(b)),
      h("td", { class: "num", text: `${Math.ceil(b.fullIn)} s` })
    )
  );
  const headings = ["Tool", "Limit", "Holder", "Used", "Full again in"];
  container.replaceChildren(dataTable("Rate limits and quotas in use", headings, rows));
}

// -- upstreams (charter.gateway) -------------------------------------------------------------

async function refreshUpstreams() {
  try {
    const data = await api("upstreams");
    $("upstreams-error").textContent = "";
    // The tab appears only on a server that governs upstream MCP servers.
    $("tab-upstreams").hidden = data.upstreams.length === 0;
    renderUpstreams(data.upstreams);
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 401)) {
      $("upstreams-error").replaceChildren("Could not load upstreams: ", agentText(error.message));
    }
  }
}

function renderUpstreams(upstreams) {
  const levels = { connected: "badge-ok", connecting: "badge-warn", down: "badge-danger" };
  const rows = upstreams.map((u) => {
    const since = new Date(u.since);
    return h(
      "tr",
      {},
      h("td", { class: "mono" }, agentText(u.name)),
      h("td", { class: "mono" }, agentText(u.namespace), ".*"),
      h("td", {}, h("span", { class: `badge ${levels[u.state] || "badge-warn"}`, text: u.state })),
      h("td", {}, h("time", { datetime: u.since, title: since.toLocaleString(), text: relative(since) })),
      h("td", { class: "num", text: String(u.tools) }),
      h("td", { class: "num", text: String(u.calls) }),
      h("td", { class: "num", text: String(u.reconnects) }),
      h("td", {}, agentText(u.lastError || ""))
    );
  });
  const headings = ["Upstream", "Tools as", "State", "Since", "Tools", "Calls", "Reconnects", "Last error"];
  $("upstreams").replaceChildren(dataTable("Upstream MCP servers", headings, rows));
}

// -- tools ----------------------------------------------------------------------------------

async function refreshTools() {
  try {
    const data = await api("tools");
    $("tools-error").textContent = "";
    state.tools = data.tools;
    const [resources, prompts] = await Promise.all([api("resources"), api("prompts")]);
    state.content = { resources, prompts };
    renderTools();
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 401)) {
      $("tools-error").replaceChildren("Could not load tools: ", agentText(error.message));
    }
  }
}

function renderContent(query) {
  const content = state.content || { resources: { resources: [], resourceTemplates: [] }, prompts: { prompts: [] } };
  const matches = (...texts) => !query || texts.some((t) => (t || "").toLowerCase().includes(query));
  const entries = [
    ...content.resources.resources
      .filter((r) => matches(r.uri, r.name))
      .map((r) => contentEntry(r.uri, "resource", r.description, [fact("Name", r.name), fact("Type", r.mimeType)])),
    ...content.resources.resourceTemplates
      .filter((r) => matches(r.uriTemplate, r.name))
      .map((r) => contentEntry(r.uriTemplate, "template", r.description, [fact("Name", r.name), fact("Type", r.mimeType)])),
    ...content.prompts.prompts
      .filter((p) => matches(p.name))
      .map((p) =>
        contentEntry(p.name, "prompt", p.description, [
          fact("Arguments", p.arguments.map((a) => (a.required ? a.name : `${a.name} (optional)`)).join(", ") || "none"),
        ])
      ),
  ];
  $("content").replaceChildren(
    entries.length
      ? h("div", { class: "tools" }, entries)
      : emptyState("No resources or prompts", "This key may not read any resource or get any prompt.")
  );
}

function contentEntry(title, kind, description, facts) {
  return h(
    "details",
    { class: "tool" },
    h(
      "summary",
      {},
      h("span", { class: "tool-name" }, agentText(title)),
      h("span", { class: "tool-badges" }, h("span", { class: "badge badge-tier", text: kind })),
      h("p", { class: "tool-summary" }, description ? agentText(description) : null)
    ),
    h("div", { class: "tool-body" }, h("dl", { class: "facts" }, ...facts))
  );
}

function renderTools() {
  const query = $("tool-search").value.trim().toLowerCase();
  const shown = state.tools.filter(
    (t) =>
      !query ||
      t.name.toLowerCase().includes(query) ||
      (t.aliases || []).some((a) => a.toLowerCase().includes(query)) ||
      (t.requiredScopes || []).some((s) => s.toLowerCase().includes(query))
  );
  renderContent(query);
  const container = $("tools");
  if (shown.length === 0) {
    container.replaceChildren(
      query
        ? emptyState("No tool matches", `Nothing matches “${reveal(query)}”.`)
        : emptyState("No tools", "This key may not call any tool.")
    );
    return;
  }
  container.replaceChildren(h("div", { class: "tools" }, shown.map(toolEntry)));
}

function toolEntry(t) {
  const policy = t.actionPolicy;
  const controls = (t.controls && t.controls.required) || [];
  return h(
    "details",
    { class: "tool" },
    h(
      "summary",
      {},
      h("span", { class: "tool-name" }, agentText(t.name)),
      h(
        "span",
        { class: "tool-badges" },
        h("span", { class: "badge badge-tier", text: t.tier }),
        riskBadge(t.deploymentRisk)
      ),
      h("p", { class: "tool-summary" }, t.description ? agentText(t.description) : null)
    ),
    h(
      "div",
      { class: "tool-body" },
      h(
        "dl",
        { class: "facts" },
        fact("Scopes", (t.requiredScopes || []).join(", ") || "none"),
        fact("Auth", t.auth),
        fact("Ledger", policy ? policy.ledger : "none"),
        fact("Approval", policy ? policy.approval : "never"),
        fact("Needs", controls.join(", ") || "nothing extra"),
        fact("Side effects", (t.riskPolicy.sideEffects || []).join(", ") || "none"),
        t.aliases && t.aliases.length ? fact("Aliases", t.aliases.join(", ")) : null,
        fact("Capability", `${t.capabilityId}@${t.capabilityVersion}`)
      ),
      h(
        "div",
        { class: "schemas" },
        h("div", {}, h("p", { class: "args-label", text: "Input schema" }), jsonBlock(t.inputSchema, `Input schema of ${t.name}`)),
        h("div", {}, h("p", { class: "args-label", text: "Output schema" }), jsonBlock(t.outputSchema, `Output schema of ${t.name}`))
      )
    )
  );
}

$("tool-search").addEventListener("input", renderTools);

// -- tabs (WAI-ARIA tabs pattern: arrows move, Home/End jump) --------------------------------

const tabs = [...document.querySelectorAll('[role="tab"]')];

function selectTab(tab, focus) {
  for (const t of tabs) {
    const selected = t === tab;
    t.setAttribute("aria-selected", String(selected));
    t.tabIndex = selected ? 0 : -1;
    $(t.getAttribute("aria-controls")).hidden = !selected;
  }
  if (focus) tab.focus();
  if (tab.id === "tab-activity") refreshActivity();
  if (tab.id === "tab-limits") refreshLimits();
  if (tab.id === "tab-upstreams") refreshUpstreams();
  if (tab.id === "tab-tools") refreshTools();
  if (tab.id === "tab-approvals") refreshApprovals();
}

for (const tab of tabs) {
  tab.addEventListener("click", () => selectTab(tab, false));
  tab.addEventListener("keydown", (event) => {
    const shown = tabs.filter((t) => !t.hidden);
    const i = shown.indexOf(tab);
    const moves = {
      ArrowRight: (i + 1) % shown.length,
      ArrowLeft: (i - 1 + shown.length) % shown.length,
      Home: 0,
      End: shown.length - 1,
    };
    if (event.key in moves) {
      event.preventDefault();
      selectTab(shown[moves[event.key]], true);
    }
  });
}

// -- live updates ---------------------------------------------------------------------------

function updateLiveText() {
  if (!state.lastUpdate) return;
  const seconds = Math.round((Date.now() - state.lastUpdate.getTime()) / 1000);
  $("live-text").textContent = seconds < 5 ? "Live" : `Updated ${seconds} s ago`;
}

function schedule() {
  window.clearTimeout(state.timer);
  state.timer = window.setTimeout(async () => {
    if (!state.key) return;
    if (document.visibilityState === "visible") {
      const active = tabs.find((t) => t.getAttribute("aria-selected") === "true");
      if (active.id === "tab-approvals") await refreshApprovals();
      else if (active.id === "tab-activity") await refreshActivity();
      else if (active.id === "tab-limits") await refreshLimits();
      else if (active.id === "tab-upstreams") await refreshUpstreams();
    }
    schedule();
  }, POLL_MS);
}

window.setInterval(() => {
  if (!state.key) return;
  updateLiveText();
  for (const [id, approval] of state.approvals) {
    const card = document.getElementById(cardId(id));
    if (card) updateClock(card, approval);
  }
}, 1000);

document.addEventListener("visibilitychange", () => {
  if (document.visibilityState === "visible" && state.key) refreshApprovals();
});

// -- start ----------------------------------------------------------------------------------

state.linked = linkedApproval();
$("linked").hidden = state.linked === null;
$("approval-filter").disabled = state.linked !== null;

if (state.key) {
  signIn(state.key).catch(() => signOut("Your session ended. Sign in again."));
} else {
  $("api-key").focus();
}
