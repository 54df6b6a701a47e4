// The running list: each run with its ticking runtime, CPU and RSS, and its actions.

import { hint, offered } from "./actions.js";
import { bytes, clock, duration, percent, roughly, shortId, since } from "./format.js";
import { open } from "./open.js";
import { serverNow, state } from "./state.js";
import { Badge, Button, html } from "./ui.js";

function Spark({ values }) {
  if (!values || values.length < 2) return null;
  const top = Math.max(100, ...values);
  const points = values
    .map((v, i) => `${(i / (values.length - 1)) * 60},${20 - (v / top) * 20}`)
    .join(" ");
  return html`<svg class="spark" viewBox="0 0 60 20" width="60" height="20" aria-hidden="true">
    <polyline points=${points} fill="none" stroke="currentColor" stroke-width="1.5" />
  </svg>`;
}

/** When the run should end: roughly, the exact time on hover; a run past its estimate
 * (`eta_overdue`, or its estimated end a minute gone) says so rather than a time gone by. */
function Ends({ task, now }) {
  const past = task.eta_finish && Date.parse(task.eta_finish) < now - 60_000;
  if (task.eta_overdue || past) {
    const was = task.eta_finish ? `estimated to end ${clock(task.eta_finish)}` : "past its estimated end";
    return html`<span class="ends overdue" title=${was}>past its estimate</span>`;
  }
  if (!task.eta_finish) return null;
  const basis = task.eta_basis ? ` · estimate based on ${task.eta_basis}` : "";
  const when = roughly(task.eta_finish, now);
  return html`<span class="ends" title=${`ends about ${clock(task.eta_finish)}${basis}`}>${when === "now" ? "ends about now" : `ends ${when}`}</span>`;
}

function Run({ task, now, canWrite }) {
  const attempt = task.attempts[task.attempts.length - 1] || {};
  return html`<li class="row run" data-task-id=${task.id} tabindex="0"
    onKeyDown=${(e) => e.key === "Enter" && open(task.id)}>
    <span class="title" title=${task.title}>${task.title}</span>
    <span class="meta">
      ${task.agent && html`<${Badge} kind="agent">${task.agent}<//>`}
      ${task.interactive && html`<${Badge} kind="interactive" title="It runs in a terminal: view it to watch or type">INTERACTIVE<//>`}
      <span title="node">${attempt.node_id || "–"}</span>
      <span title="process id">pid ${attempt.pid ?? "–"}</span>
      <span class="runtime" title="running for">${duration(since(task.started_at, now))}</span>
      <${Ends} task=${task} now=${now} />
      <span title="CPU">${percent(attempt.cpu_percent)}</span>
      <${Spark} values=${state.usage.get(task.id)} />
      <span title="memory (RSS)">${bytes(attempt.rss_bytes)}</span>
      ${attempt.over_limit && html`<${Badge} kind="over">OVER LIMIT<//>`}
      ${task.needs_input_at && html`<${Badge} kind="needs" title=${`waiting on its terminal since ${clock(task.needs_input_at)}${task.slot_released ? "; its slot given back meanwhile" : ""}`}>NEEDS INPUT<//>`}
      ${task.stalled_at && html`<${Badge} kind="stalled" title=${`quiet or waiting for input since ${clock(task.stalled_at)}`}>STALLED<//>`}
      ${task.stop_requested && html`<${Badge} kind="paused">STOPPING<//>`}
    </span>
    <span class="actions">
      <${Button} label="View" action="view" title=${`View ${shortId(task.id)}`} onClick=${() => open(task.id)} />
      ${canWrite && offered(task).filter((a) => a.action !== "cancel").map(
        (a) => html`<${Button} label=${a.label} action=${a.action} kind=${a.kind} title=${hint(a)} onClick=${a.run} />`,
      )}
    </span>
  </li>`;
}

export function Running() {
  const line = state.line;
  const running = line ? line.running : [];
  const now = serverNow();
  const canWrite = state.me && state.me.can_write;
  return html`<section aria-labelledby="running-title">
    <h2 id="running-title">Running <span class="count">${running.length}</span></h2>
    <ul id="running" class="rows">
      ${running.length === 0 && html`<li class="empty">Nothing is running.</li>`}
      ${running.map((t) => html`<${Run} key=${t.id} task=${t} now=${now} canWrite=${canWrite} />`)}
    </ul>
  </section>`;
}
