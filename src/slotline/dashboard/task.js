// One task: its fields, attempts, dependencies and subtasks, events, and its log (live).

import * as actions from "./actions.js";
import { sentence } from "./events.js";
import {
  bytes,
  clock,
  dollars,
  duration,
  plural,
  refusals,
  shortId,
  tokens,
  waitingWhy,
} from "./format.js";
import { close, open } from "./open.js";
import { refreshDiff } from "./refresh.js";
import { serverNow, state } from "./state.js";
import { Terminal } from "./terminal.js";
import { Badge, Button, html } from "./ui.js";

// The fields a person reads, labelled in words, each shown as its kind says ("time": one
// local format; "duration": "5m 00s"); the id on a line of its own, never broken.
const FIELDS = [
  ["id", "Id", "id"], ["status", "Status"], ["status_reason", "Why"], ["priority", "Priority"],
  ["position", "Position in line"], ["agent", "Agent"], ["workspace", "Workspace"], ["user", "User"],
  ["created_at", "Created", "time"], ["queued_at", "Queued", "time"], ["started_at", "Started", "time"],
  ["finished_at", "Finished", "time"], ["exit_code", "Exit code"], ["failure_reason", "Failure"],
  ["max_attempts", "Attempts allowed"], ["timeout", "Time limit", "duration"],
  ["queue_ttl", "Expires if not started within", "duration"], ["parent_id", "Parent task"],
  ["eta_start", "Estimated start", "time"], ["eta_finish", "Estimated end", "time"],
  ["eta_basis", "Estimate based on"], ["eta_unavailable", "No estimate because"],
  ["stalled_at", "Stalled since", "time"],
  ["needs_input_at", "Needs input since", "time"], ["slot_released", "Slot given back at", "time"],
];

function shown(value, kind) {
  if (kind === "time") return clock(value);
  if (kind === "duration") return duration(value);
  return String(value);
}

// A start estimate is for a task that has not started.
const BEFORE_START = new Set(["eta_start", "eta_unavailable"]);

function Fields({ task, now }) {
  const why = task.status === "queued" ? waitingWhy(task, now) : null;
  const started = task.started_at !== null && task.status !== "queued";
  const known = ([f]) => task[f] !== null && task[f] !== undefined && !(started && BEFORE_START.has(f));
  return html`<dl class="fields">
    ${FIELDS.filter(known).map(([f, label, kind]) => html`<div
      key=${f} class=${kind === "id" ? "whole" : ""} data-field=${f}><dt>${label}</dt>
      <dd class=${kind === "id" ? "id" : ""}>${shown(task[f], kind)}</dd></div>`)}
    ${task.eta_overdue && html`<div data-field="eta_overdue"><dt>Estimate</dt><dd>past its estimate</dd></div>`}
    ${why && html`<div class="whole" data-field="waiting_reason"><dt>Waiting because</dt><dd title=${why.title}>${why.text}</dd></div>`}
    <div class="whole"><dt>Command</dt><dd><code>${JSON.stringify(task.command)}</code></dd></div>
    ${Object.keys(task.labels).length > 0 && html`<div><dt>Labels</dt><dd>${JSON.stringify(task.labels)}</dd></div>`}
  </dl>`;
}

const Link = ({ id }) => html`<button type="button" class="link" onClick=${() => open(id)}>${shortId(id)}</button>`;

// What a run spent (its agent type's `usage` rules): "$0.12 · 1,234 in · 56 out".
function spent(usage) {
  if (!usage) return "–";
  const parts = [];
  if (usage.cost_usd !== null) parts.push(dollars(usage.cost_usd));
  if (usage.input_tokens !== null) parts.push(`${tokens(usage.input_tokens)} in`);
  if (usage.output_tokens !== null) parts.push(`${tokens(usage.output_tokens)} out`);
  return parts.join(" · ") || "–";
}

function resumed(a, taskId) {
  const from = a.resumed_from;
  if (!from) return "";
  return from.task_id === taskId ? ` (resumed #${from.attempt}'s session)` : ` (resumed the session of ${shortId(from.task_id)} #${from.attempt})`;
}

function Attempts({ attempts, taskId }) {
  if (!attempts.length) return html`<p class="muted">No attempt yet.</p>`;
  return html`<div class="wide"><table class="attempts"><thead><tr>
      <th>#</th><th>Node</th><th>pid</th><th>Started</th><th>Outcome</th><th>Exit code</th><th>Spent</th><th>Peak CPU</th><th>Peak memory</th></tr></thead>
    <tbody>${attempts.map((a) => html`<tr key=${a.id}>
      <td>${a.number}</td><td>${a.node_id || "–"}</td><td>${a.pid ?? "–"}</td><td class="time">${clock(a.started_at)}</td>
      <td>${a.outcome || (a.finished_at ? "ended" : "running")}${a.reason ? `: ${a.reason}` : ""}${a.over_limit ? " (over limit)" : ""}${resumed(a, taskId)}${a.denied_tools.length > 0 && html` <${Badge} kind="refused" title=${a.denied_tools.join(", ")}>REFUSED ${plural(a.denied_tools.length, "tool use")}<//>`}</td>
      <td>${a.exit_code ?? "–"}</td><td class="spent" title=${a.session_id ? `session ${a.session_id}` : ""}>${spent(a.usage)}</td>
      <td>${a.peak_cpu_percent === null ? "–" : `${Math.round(a.peak_cpu_percent)}%`}</td><td>${bytes(a.peak_rss_bytes)}</td>
    </tr>`)}</tbody></table></div>`;
}

// Three ways to stop a run, said where their buttons are.
const STOPS = "Terminate stops the run and ends it as failed (terminated). Restart stops it and queues it again for a new attempt. Cancel stops it and ends it as cancelled; it does not run again.";

function Actions({ task }) {
  if (!state.me || !state.me.can_write) return null;
  return html`<div class="task-actions">
    ${actions.offered(task).map((a) => html`<${Button} label=${a.label} action=${a.action} kind=${a.kind} title=${actions.hint(a)} onClick=${a.run} />`)}
  </div>
  ${task.status === "running" && html`<p class="help" id="stop-help">${STOPS}</p>`}`;
}

function TaskEvents({ events, task }) {
  return html`<ol class="task-events">${events.map((e) => html`<li key=${e.seq}>
    <span class="muted">${clock(e.at)}</span> <span class="said">${sentence(e, task)}</span>
    <details class="raw"><summary>JSON</summary><code>${JSON.stringify({ kind: e.kind, ...e.data })}</code></details></li>`)}</ol>`;
}

// A worktree run's changes, as text (never markup), with its stat and a note when cut; read
// again with its Refresh button, and every few seconds while the run goes on.
function Changes({ view }) {
  const diff = view.diff;
  const task = view.task;
  const tree = task && task.attempts.length ? task.attempts[task.attempts.length - 1].worktree : null;
  const landable = diff && tree && !tree.merged && task.status !== "running" && task.finished_at
    && state.me && state.me.can_write;
  const heading = html`<h3>Changes <${Button} label="Refresh" action="refresh-diff"
    title="Read the diff again" onClick=${refreshDiff} />
    ${landable && html` <${Button} label="Merge" action="merge" title="Merge this run's branch"
      onClick=${() => actions.merge(task, diff.branch)} />`}
    ${tree && tree.merged && html` <${Badge} kind="merged">MERGED into ${tree.merged.into}<//>`}</h3>`;
  if (!diff) return view.diffError ? html`${heading}<p class="muted">${view.diffError}</p>` : null;
  const { files, insertions, deletions } = diff.stat;
  return html`${heading}
    <p id="diff-stat">${diff.branch} (${diff.source}): ${files} file${files === 1 ? "" : "s"} changed, +${insertions} -${deletions}</p>
    <pre class="log diff" id="task-diff" tabindex="0" aria-label="Diff">${diff.text}</pre>
    ${diff.truncated && html`<p class="muted" id="diff-truncated">Truncated: the diff is longer than shown; see <code>slotline diff ${shortId(diff.task_id)}</code>.</p>`}`;
}

// A new attempt is a new run with a terminal of its own.
const lastAttempt = (task) => (task.attempts.length ? task.attempts[task.attempts.length - 1].id : task.id);

export function TaskPanel() {
  if (!state.open) return null;
  const view = state.task || {};
  const task = view.task;
  return html`<aside class="panel" aria-labelledby="task-title" id="task-panel"
    onKeyDown=${(e) => e.key === "Escape" && close()}>
    <header>
      <h2 id="task-title">${task ? task.title : shortId(state.open)}
        ${task && task.interactive && html` <${Badge} kind="interactive">INTERACTIVE<//>`}
        ${task && task.needs_input_at && task.status === "running" && html` <${Badge} kind="needs">NEEDS INPUT<//>`}
        ${task && task.stalled_at && task.status === "running" && html` <${Badge} kind="stalled">STALLED<//>`}
        ${task && refusals(task) > 0 && html` <${Badge} kind="refused" title=${task.status_reason || ""}>REFUSED TOOLS<//>`}</h2>
      <${Button} label="Close" action="close" title="Close the task view" onClick=${close} />
    </header>
    ${task && html`
      <${Actions} task=${task} />
      ${task.interactive && html`<${Terminal} key=${lastAttempt(task)} task=${task}
        running=${task.status === "running"} />`}
      <${Fields} task=${task} now=${serverNow()} />
      <h3>Depends on</h3>
      <p>${task.depends_on.length ? task.depends_on.map((id) => html`<${Link} id=${id} /> `) : html`<span class="muted">nothing</span>`}</p>
      <h3>Dependents</h3>
      <p id="dependents">${view.dependents && view.dependents.length
        ? view.dependents.map((d) => html`<${Link} id=${d.id} /> `)
        : html`<span class="muted">none</span>`}</p>
      ${view.children && view.children.length > 0 && html`<h3>Subtasks</h3>
        <p>${view.children.map((c) => html`<${Link} id=${c.id} /> `)}</p>`}
      <h3>Attempts</h3>
      <${Attempts} attempts=${task.attempts} taskId=${task.id} />
      <${Changes} view=${view} />`}
    <h3>Log ${view.following && html`<span class="badge badge-live">following</span>`}</h3>
    <pre class="log" id="task-log" tabindex="0" aria-label="Log">${view.log || ""}</pre>
    ${view.logError && html`<p class="muted">${view.logError}</p>`}
    <h3>Events</h3>
    <${TaskEvents} events=${view.events || []} task=${task} />
  </aside>`;
}
