// History and dead letters: ended tasks, the last to end first (as the server reads them),
// filtered, with redrive.

import { redrive } from "./actions.js";
import { clock, duration, plural, refusals, shortId } from "./format.js";
import { open } from "./open.js";
import { loadHistory } from "./refresh.js";
import { state, update } from "./state.js";
import { Badge, Button, html } from "./ui.js";

let typing = null;

function set(name) {
  return (e) => {
    // The value at once (another field may change before the read), the read once typing stops.
    update({ history: { ...state.history, [name]: e.currentTarget.value } });
    clearTimeout(typing);
    typing = setTimeout(() => loadHistory(), 200);
  };
}

export function History() {
  const h = state.history;
  const agents = Object.keys(state.config.agents || {});
  const dead = h.status === "failed";
  const filter = { status: ["failed"], q: h.q || null, agent: h.agent || null };
  return html`<section aria-labelledby="history-title">
    <h2 id="history-title">History <span class="count">${h.total}</span></h2>
    <div class="filters" role="search">
      <label>Status <select name="status" onChange=${set("status")}>
        ${[["", "all ended"], ["succeeded", "succeeded"], ["failed", "failed (dead letters)"], ["cancelled", "cancelled"], ["expired", "expired"]].map(
          ([v, label]) => html`<option value=${v} selected=${v === h.status}>${label}</option>`)}
      </select></label>
      <label>Search <input type="search" name="q" value=${h.q} onInput=${set("q")} /></label>
      <label>Agent <select name="agent" onChange=${set("agent")}><option value="">any</option>
        ${agents.map((a) => html`<option value=${a} selected=${a === h.agent}>${a}</option>`)}</select></label>
      ${dead && state.me.can_write && h.total > 0 &&
        html`<${Button} label="Redrive all matching" action="redrive" onClick=${() => redrive(filter, plural(h.total, "failed task"))} />`}
    </div>
    <div class="wide"><table class="history"><thead><tr><th>Id</th><th>Title</th><th>Status</th><th>Agent</th>
      <th aria-sort="descending">Ended ↓</th><th>Ran</th><th>Reason</th></tr></thead>
      <tbody>${h.tasks.map((t) => html`<tr key=${t.id} data-task-id=${t.id}>
        <td><button type="button" class="link" onClick=${() => open(t.id)}>${shortId(t.id)}</button></td>
        <td>${t.title}</td><td><${Badge} kind=${`st-${t.status}`}>${t.status}<//>${refusals(t) > 0 && html` <${Badge} kind="refused" title=${t.status_reason || ""}>REFUSED TOOLS<//>`}</td><td>${t.agent || "–"}</td>
        <td class="time">${clock(t.finished_at)}</td>
        <td>${t.started_at && t.finished_at ? duration((Date.parse(t.finished_at) - Date.parse(t.started_at)) / 1000) : "–"}</td>
        <td>${t.failure_reason || t.status_reason || ""}</td></tr>`)}</tbody></table></div>
  </section>`;
}
