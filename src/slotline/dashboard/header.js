// The capacity header: utilization, slots free, badges, per-key limits, CPU and memory.

import { emergencyStop, pause, resume } from "./actions.js";
import { percent, plural } from "./format.js";
import { Pacing } from "./pacing.js";
import { state } from "./state.js";
import { Badge, Button, html } from "./ui.js";

function Limits({ limits }) {
  if (!limits.length) return null;
  return html`<ul class="limits" aria-label="Per-key limits">
    ${limits.map((limit) => {
      const used = Object.entries(limit.used);
      const name = limit.value === null ? `${limit.key} (each)` : `${limit.key}=${limit.value}`;
      const detail = used.length
        ? used.map(([value, n]) => `${value} ${n}/${limit.max}`).join(", ")
        : `0/${limit.max}`;
      const full = used.some(([, n]) => n >= limit.max);
      return html`<li class=${full ? "full" : ""}><span class="limit-name">${name}</span> ${detail}</li>`;
    })}
  </ul>`;
}

// The state of capacity, one at a time (the status's `capacity`, as the CLI says it):
// its badge's kind, its words, and why.
const CAPACITY = {
  no_slots: ["no-slots", "NO SLOTS", "max_concurrent is 0: no task starts until it is raised"],
  over_limit: ["over", "OVER LIMIT", "a started-now task runs past the limit"],
  full: ["full", "AT CAPACITY", "every slot is taken"],
};

export function Header() {
  const line = state.line;
  const me = state.me;
  if (!line) return html`<section class="capacity" aria-label="Capacity"><p>Loading…</p></section>`;
  const ratio = line.max_concurrent ? Math.min(1, line.active / line.max_concurrent) : 1;
  const capacity = CAPACITY[line.capacity];
  // Below the first line: folded on a phone, so that the line is on its first screen.
  const more = html`<${Limits} limits=${line.limits} />
    <${Pacing} line=${line} nowSec=${(line.now ? Date.parse(line.now) : Date.now()) / 1000} />
    ${me && me.is_admin && html`<div class="global-actions">
      ${line.paused
        ? html`<${Button} label="Resume" action="resume" onClick=${resume} />`
        : html`<${Button} label="Pause" action="pause" onClick=${pause} />`}
      <${Button} label="Emergency stop" kind="danger" action="emergency-stop"
        title="Pause and terminate every run" onClick=${() => emergencyStop(line.running.length)} />
    </div>`}`;
  return html`<section class="capacity" aria-label="Capacity">
    <div class="util">
      <span id="utilization" class="util-text" title="running / max concurrent">${line.active}/${line.max_concurrent}</span>
      <div class="bar" role="progressbar" aria-label="Utilization" aria-valuemin="0"
        aria-valuemax=${line.max_concurrent} aria-valuenow=${line.active}>
        <div class=${`fill ${capacity ? capacity[0] : ""}`} style=${{ width: `${ratio * 100}%` }}></div>
      </div>
      <span id="slots-free">${plural(line.slots_available, "slot")} free</span>
      <span class="badges">
        ${capacity && html`<${Badge} kind=${capacity[0]} title=${capacity[2]}>${capacity[1]}<//>`}
        ${line.paused && html`<${Badge} kind="paused">PAUSED<//>`}
        ${line.admission_hold && html`<${Badge} kind="guard" title=${line.admission_hold}>GUARD: ${line.admission_hold}<//>`}
      </span>
      <span class="machine">CPU ${percent(line.machine.cpu_percent)} · memory ${percent(line.machine.memory_percent)}</span>
      <span class="queued-count">${line.queued_total} queued</span>
    </div>
    ${state.compact
      ? html`<details class="more-capacity"><summary>Limits and controls</summary>${more}</details>`
      : more}
  </section>`;
}
