// The page: login, then the views rendered from the one state, kept live by the event
// stream (resumed from the last seq after a drop; reads are scheduled by events, with a
// slow refresh only for CPU/RSS, which change without events).

import { render } from "./vendor/preact.module.js";
import { api, connect, token } from "./api.js";
import { Events } from "./events.js";
import { Header } from "./header.js";
import { History } from "./history.js";
import { Line } from "./line.js";
import { endsRun, loadCharts, loadHistory, loadLine, loadSpend, refresh } from "./refresh.js";
import { Running } from "./running.js";
import { Sheet } from "./sheet.js";
import { Spend } from "./spend.js";
import { COMPACT, EVENTS_KEPT, state, subscribe, update } from "./state.js";
import { Submit } from "./submit.js";
import { TaskPanel } from "./task.js";
import { Modal, Notice, html, keepingFocus } from "./ui.js";

const USAGE_REFRESH = 5000;
const VIEWS = [
  ["line", "Line"],
  ["submit", "Submit"],
  ["history", "History"],
  ["events", "Events"],
  ["charts", "Charts"],
  ["spend", "Spend"],
];

let stream = null;
let Charts = null; // loaded when first shown: uPlot is the largest file of the page

function Login() {
  const send = (event) => {
    event.preventDefault();
    token.set(event.currentTarget.elements.token.value.trim());
    update({ login: null });
    start();
  };
  return html`<main class="login"><form onSubmit=${send} aria-labelledby="login-title">
    <h1 id="login-title">slotline</h1>
    <p>${state.login}</p>
    <label>API token <input name="token" type="password" autocomplete="current-password" required autofocus /></label>
    <button type="submit" class="btn primary">Sign in</button>
    <p class="muted">The token is kept in this tab only (sessionStorage).</p>
  </form></main>`;
}

function show(view) {
  update({ view });
  if (view === "history") loadHistory().catch(() => {});
  if (view === "spend") loadSpend();
  if (view === "charts") {
    import("./charts.js").then((module) => {
      Charts = module.Charts;
      update({});
    });
    loadCharts().catch(() => {});
  }
}

function theme() {
  const next = { "": "dark", dark: "light", light: "" }[state.theme];
  localStorage.setItem("slotline.theme", next);
  update({ theme: next });
}

function Nav() {
  const conn = state.conn;
  return html`<header class="top">
    <h1>slotline</h1>
    <nav aria-label="Views">${VIEWS.filter(([v]) => v !== "submit" || state.me.can_write).map(
      ([v, label]) => html`<button type="button" class="tab" aria-current=${state.view === v ? "page" : null}
        data-view=${v} onClick=${() => show(v)}>${label}</button>`,
    )}</nav>
    <span id="connection" class=${`conn conn-${conn}`} role="status">${{ live: "live", reconnecting: "reconnecting…", refused: "refused", connecting: "connecting…" }[conn]}</span>
    <span class="who">${state.me.name} (${state.me.role})</span>
    <button type="button" class="btn small" onClick=${theme} title="Theme: auto, dark or light">Theme ${state.theme || "auto"}</button>
    ${token.get() && html`<button type="button" class="btn small" onClick=${() => { token.clear(); location.reload(); }}>Sign out</button>`}
  </header>`;
}

function App() {
  document.documentElement.dataset.theme = state.theme;
  if (state.login !== null) return html`<${Login} />`;
  if (!state.me) return html`<p class="loading">Loading slotline…</p>`;
  const main = {
    // A phone shows the line first: the runs follow it.
    line: () => (state.compact ? html`<${Line} /><${Running} />` : html`<${Running} /><${Line} />`),
    submit: () => html`<${Submit} />`,
    history: () => html`<${History} />`,
    events: () => html`<${Events} />`,
    charts: () => (Charts ? html`<${Charts} />` : html`<p class="loading">Loading charts…</p>`),
    spend: () => html`<${Spend} />`,
  }[state.view]();
  const classes = `layout ${state.open ? "with-panel" : ""} ${state.compact ? "compact" : ""}`;
  return html`<div class=${classes} data-role=${state.me.role}>
    <${Nav} />
    <${Header} />
    <main>${main}</main>
    <${TaskPanel} />
    <${Sheet} />
    <${Modal} />
    <${Notice} />
  </div>`;
}

function onEvent(event) {
  update({ events: [event, ...state.events].slice(0, EVENTS_KEPT) });
  refresh({ spend: endsRun(event) });
}

function onState(conn, why) {
  update({ conn });
  if (conn === "live") refresh({ spend: true }); // caught up: read what the events changed meanwhile
  if (conn === "refused" && why) update({ notice: { text: why, error: true, at: Date.now() } });
}

async function start() {
  const line = loadLine(); // in parallel with who the caller is
  const used = token.get();
  try {
    update({ me: await api("/api/whoami") });
  } catch (error) {
    if (token.get() === used) {
      update({ login: error.status === 401 ? error.message : `Cannot reach slotline: ${error.message}` });
    }
    return;
  }
  await line;
  // Agent types (filters, submit form): not needed for the first screen.
  api("/api/config").then((config) => update({ config }), () => {});
  const last = state.line ? state.line.last_seq : 0;
  const recent = await api(`/api/events?since=${Math.max(0, last - 50)}&limit=50`).catch(() => null);
  if (recent) update({ events: recent.events.reverse() });
  if (stream) stream.close();
  stream = connect(last, onEvent, onState);
}

COMPACT.addEventListener("change", (e) => update({ compact: e.matches, sheet: null }));
subscribe(() => keepingFocus(() => render(html`<${App} />`, document.getElementById("app"))));
update({});
start();
// Runtimes tick each second; CPU and RSS are re-read now and then (they change without events).
// A notice that is not an error goes away after a few seconds.
setInterval(() => {
  const notice = state.notice;
  const stale = notice && !notice.error && Date.now() - notice.at > 6000;
  if (state.line || stale) update(stale ? { notice: null } : {});
}, 1000);
setInterval(() => state.line && state.line.running.length && loadLine(), USAGE_REFRESH);
