// One task: its fields, attempts, dependencies and subtasks, events, and its log (live).

import * as actions from "./actions.js";
import { bytes, clock, dollars, plural, refusals, shortId, tokens } from "./format.js";
import { close, open } from "./open.js";
import { refreshDiff } from "./refresh.js";
import { state } from "./state.js";
import { Badge, Button, html } from "./ui.js";

const FIELDS = [
  "id", "status", "status_reason", "priority", "position", "agent", "workspace", "user",
  "created_at", "queued_at", "started_at", "finished_at", "exit_code", "failure_reason",
  "max_attempts", "timeout", "queue_ttl", "parent_id", "eta_start", "eta_finish", "eta_basis",
  "stalled_at",
];

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
  return html`<table class="attempts"><thead><tr>
      <th>#</th><th>node</th><th>pid</th><th>started</th><th>outcome</th><th>exit</th><th>spent</th><th>peak CPU</th><th>peak RSS</th></tr></thead>
    <tbody>${attempts.map((a) => html`<tr key=${a.id}>
      <td>${a.number}</td><td>${a.node_id || "–"}</td><td>${a.pid ?? "–"}</td><td>${clock(a.started_at)}</td>
      <td>${a.outcome || (a.finished_at ? "ended" : "running")}${a.reason ? `: ${a.reason}` : ""}${a.over_limit ? " (over limit)" : ""}${resumed(a, taskId)}${a.denied_tools.length > 0 && html` <${Badge} kind="refused" title=${a.denied_tools.join(", ")}>REFUSED ${plural(a.denied_tools.length, "tool use")}<//>`}</td>
      <td>${a.exit_code ?? "–"}</td><td class="spent" title=${a.session_id ? `session ${a.session_id}` : ""}>${spent(a.usage)}</td>
      <td>${a.peak_cpu_percent === null ? "–" : `${Math.round(a.peak_cpu_percent)}%`}</td><td>${bytes(a.peak_rss_bytes)}</td>
    </tr>`)}</tbody></table>`;
}

function Actions({ task }) {
  if (!state.me || !state.me.can_write) return null;
  const s = task.status;
  return html`<div class="task-actions">
    ${s === "queued" && html`<${Button} label="Start now" action="start-now" onClick=${() => actions.startNow(task)} />
      <${Button} label="Boost" action="boost" onClick=${() => actions.boost(task)} />`}
    ${s === "queued" && html`<${Button} label="Hold" action="hold" onClick=${() => actions.hold(task)} />`}
    ${s === "held" && html`<${Button} label="Release" action="release" onClick=${() => actions.release(task)} />`}
    ${["queued", "held", "waiting", "blocked"].includes(s) && html`<${Button} label="Priority" action="priority" onClick=${() => actions.priority(task)} />`}
    ${s === "running" && html`<${Button} label="Terminate" kind="danger" action="terminate" onClick=${() => actions.terminate(task)} />`}
    ${["running", "succeeded", "failed", "cancelled", "expired", "blocked"].includes(s) && html`<${Button} label="Restart" action="restart" onClick=${() => actions.restart(task)} />`}
    ${!["succeeded", "failed", "cancelled", "expired"].includes(s) && html`<${Button} label="Cancel" kind="danger" action="cancel" onClick=${() => actions.cancel(task)} />`}
  </div>`;
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

export function TaskPanel() {
  if (!state.open) return null;
  const view = state.task || {};
  const task = view.task;
  return html`<aside class="panel" aria-labelledby="task-title" id="task-panel"
    onKeyDown=${(e) => e.key === "Escape" && close()}>
    <header>
      <h2 id="task-title">${task ? task.title : shortId(state.open)}
        ${task && task.stalled_at && task.status === "running" && html` <${Badge} kind="stalled">STALLED<//>`}
        ${task && refusals(task) > 0 && html` <${Badge} kind="refused" title=${task.status_reason || ""}>REFUSED TOOLS<//>`}</h2>
      <${Button} label="Close" action="close" title="Close the task view" onClick=${close} />
    </header>
    ${task && html`
      <${Actions} task=${task} />
      <dl class="fields">${FIELDS.filter((f) => task[f] !== null && task[f] !== undefined).map(
        (f) => html`<div key=${f}><dt>${f}</dt><dd>${String(task[f])}</dd></div>`,
      )}
        <div><dt>command</dt><dd><code>${JSON.stringify(task.command)}</code></dd></div>
        ${Object.keys(task.labels).length > 0 && html`<div><dt>labels</dt><dd>${JSON.stringify(task.labels)}</dd></div>`}
      </dl>
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
    <ol class="task-events">${(view.events || []).map((e) => html`<li key=${e.seq}>
      <span class="muted">${clock(e.at)}</span> <b>${e.kind}</b> ${Object.keys(e.data).length ? JSON.stringify(e.data) : ""}</li>`)}</ol>
  </aside>`;
}
