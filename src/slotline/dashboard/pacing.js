// What holds starts beside the slots: budgets reached, rate limits at their cap, provider
// back-offs; each with when starts may go on (the same facts `slotline status` prints).

import { dollars, tokens } from "./format.js";
import { Badge, html } from "./ui.js";

/** An epoch time as a local clock time. */
const at = (epoch) => new Date(epoch * 1000).toLocaleTimeString();

const named = (entry) => (entry.value === null || entry.value === undefined ? entry.key : `${entry.key}[${entry.value}]`);

const spent = (b) => (b.unit === "usd" ? dollars(b.spent) : `${tokens(b.spent)} tokens`);

function holds(line, nowSec) {
  const items = [];
  for (const b of line.budgets || []) {
    if (b.until === null || b.until === undefined) continue;
    items.push({ kind: "budget", label: `BUDGET ${named(b)}`, detail: `${b.budget}: ${spent(b)} spent; starts again at ${at(b.until)}` });
  }
  for (const r of line.rates || []) {
    if (r.next_start_at === null || r.next_start_at === undefined || r.next_start_at <= nowSec) continue;
    items.push({ kind: "rate", label: `RATE ${named(r)}`, detail: `${r.rate}: ${r.used} started; next start at ${at(r.next_start_at)}` });
  }
  for (const b of line.backoff || []) {
    if (!b.holding && !(b.not_before > nowSec)) continue;
    const until = b.reset_at ? `limit resets at ${at(b.reset_at)}` : `next start at ${at(b.not_before)}`;
    items.push({ kind: "backoff", label: `BACK-OFF ${b.agent}`, detail: `cap ${b.cap}; ${until}` });
  }
  return items;
}

/** The holds in force, as badges with their detail; nothing when none holds. */
export function Pacing({ line, nowSec }) {
  const items = holds(line, nowSec);
  if (!items.length) return null;
  return html`<ul class="pacing" aria-label="Holds on starts">
    ${items.map((item) => html`<li data-hold=${item.kind}>
      <${Badge} kind="held">${item.label}<//> <span class="hold-detail">${item.detail}</span>
    </li>`)}
  </ul>`;
}
