// Spend: what the runs the caller sees cost (their agent types' `usage` rules), from
// `GET /api/stats`: the total, and the sums per agent type, user, workspace and day (UTC).

import { dollars, tokens } from "./format.js";
import { state } from "./state.js";
import { html } from "./ui.js";

// Each grouping of `spend`: its key, its caption, the heading of its key column.
const GROUPS = [
  ["agent", "Per agent type", "agent type"],
  ["user", "Per user", "user"],
  ["workspace", "Per workspace", "workspace"],
  ["day", "Per day (UTC), newest first", "day"],
];

function Group({ by, caption, name, rows }) {
  const shown = by === "day" ? [...rows].reverse() : rows; // the server sends days oldest first
  return html`<table class="spend" id=${`spend-${by}`}>
    <caption>${caption}</caption>
    <thead><tr><th scope="col">${name}</th><th scope="col">runs</th><th scope="col">cost</th>
      <th scope="col">tokens in</th><th scope="col">tokens out</th></tr></thead>
    <tbody>${shown.map((row) => html`<tr key=${row.key} data-key=${row.key}>
      <th scope="row">${row.key}</th><td>${row.runs}</td><td>${dollars(row.cost_usd)}</td>
      <td>${tokens(row.input_tokens)}</td><td>${tokens(row.output_tokens)}</td></tr>`)}</tbody>
  </table>`;
}

export function Spend() {
  const { data, error } = state.spend;
  const whose = state.me.role === "user" ? "your runs" : "every run";
  const total = data && data.total;
  return html`<section aria-labelledby="spend-title" id="spend">
    <h2 id="spend-title">Spend</h2>
    <p class="muted">Cost and tokens of ${whose} that reported them; "-" is a value no run reported.</p>
    ${error && html`<p class="muted" role="alert">${error}</p>`}
    ${!data && !error && html`<p class="loading">Loading…</p>`}
    ${total && html`<dl class="fields" id="spend-total" aria-label="Total">
      <div><dt>runs</dt><dd data-field="runs">${total.runs}</dd></div>
      <div><dt>cost</dt><dd data-field="cost">${dollars(total.cost_usd)}</dd></div>
      <div><dt>tokens in</dt><dd data-field="input_tokens">${tokens(total.input_tokens)}</dd></div>
      <div><dt>tokens out</dt><dd data-field="output_tokens">${tokens(total.output_tokens)}</dd></div>
    </dl>`}
    ${total && total.runs === 0 && html`<p class="empty">No run has reported what it spent yet
      (an agent type's <code>usage</code> rules read it from the run's output).</p>`}
    ${total && total.runs > 0 && GROUPS.map(([by, caption, name]) => html`<${Group} key=${by} by=${by} caption=${caption} name=${name} rows=${data[by]} />`)}
  </section>`;
}
