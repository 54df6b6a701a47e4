// Steering: every action the page offers, as calls to the API (with confirmations).

import { api, query } from "./api.js";
import { shortId } from "./format.js";
import { refresh } from "./refresh.js";
import { state, update } from "./state.js";
import { act, ask } from "./ui.js";

export const PRIORITIES = ["urgent", "high", "normal", "low"];

const post = (path, body) => api(path, { method: "POST", body });
const task = (id, verb, body) => post(`/api/tasks/${encodeURIComponent(id)}/${verb}`, body);

async function steer(promise, done) {
  const result = await act(promise, done);
  refresh();
  return result;
}

export const startNow = (t) => steer(task(t.id, "bump"), `started ${shortId(t.id)} now`);
export const boost = (t) => steer(task(t.id, "boost"), `${shortId(t.id)} is next up`);
export const hold = (t) => steer(task(t.id, "hold"), `held ${shortId(t.id)}`);
export const release = (t) => steer(task(t.id, "release"), `released ${shortId(t.id)}`);
/** What a move did, in words: "moved 3f2a… to #2; priority raised to high" (a move takes
 * the band of its new neighbours, so it may change the priority or the boost). */
export function moved(after) {
  const words = [`moved ${shortId(after.id)} to #${after.position}`];
  const before = after.priority_before;
  if (before && before !== after.priority) {
    const way = PRIORITIES.indexOf(after.priority) < PRIORITIES.indexOf(before) ? "raised" : "lowered";
    words.push(`priority ${way} to ${after.priority}`);
  }
  if (after.boosted_before !== undefined && after.boosted_before !== after.boosted) {
    words.push(after.boosted ? "now boosted" : "no longer boosted");
  }
  return words.join("; ");
}

async function move(id, body) {
  const after = await steer(task(id, "move", body));
  if (after) update({ notice: { text: moved(after), at: Date.now() } });
}

export const moveTo = (t, to) => move(t.id, { to });
export const moveBefore = (t, other) => move(t.id, { before: other });
export const moveAfter = (t, other) => move(t.id, { after: other });

const ENDED = ["succeeded", "failed", "cancelled", "expired"];

/**
 * The actions a task offers for its status, as the line, the actions sheet and the task
 * page show them: `[{action, label, icon, key, help, kind, run}]`; `moves` adds the moves
 * in line. Each `run` asks first where the desktop asks (cancel, terminate, restart, priority).
 */
export function offered(t, { moves = false } = {}) {
  const s = t.status;
  const list = [];
  const add = (action, label, run, extra = {}) => list.push({ action, label, run: () => run(t), ...extra });
  if (s === "queued") {
    add("start-now", "Start now", startNow, { key: "s", help: "even over the limit" });
    add("boost", "Boost", boost, { key: "b", help: "start next" });
    if (moves) {
      add("up", "Move up", (x) => moveTo(x, Math.max(1, x.position - 1)), { icon: "↑", key: "Alt+↑" });
      add("down", "Move down", (x) => moveTo(x, x.position + 1), { icon: "↓", key: "Alt+↓" });
      add("top", "Move to top", (x) => moveTo(x, 1), { icon: "⤒", key: "Alt+Home" });
    }
    add("hold", "Hold", hold, { key: "h" });
  }
  if (s === "held") add("release", "Release", release, { key: "h" });
  if (["queued", "held", "waiting", "blocked"].includes(s)) add("priority", "Priority", priority, { key: "p" });
  if (s === "running") add("terminate", "Terminate", terminate, { kind: "danger" });
  if (s === "running" || s === "blocked" || ENDED.includes(s)) add("restart", "Restart", restart);
  if (!ENDED.includes(s)) add("cancel", "Cancel", cancel, { kind: "danger", key: "c" });
  return list;
}

/** An offered action's tooltip: "Start now: even over the limit (s)". */
export const hint = (a) => `${a.label}${a.help ? `: ${a.help}` : ""}${a.key ? ` (${a.key})` : ""}`;

export function cancel(t) {
  ask({
    title: `Cancel ${shortId(t.id)}?`,
    text: `“${t.title}” is ${t.status}.${t.status === "running" ? " Its process is stopped and it ends as cancelled; it does not run again." : ""}`,
    no: "Keep it",
    ok: "Cancel task",
    danger: true,
    run: () => steer(task(t.id, "cancel", {}), `cancelled ${shortId(t.id)}`),
  });
}

export function terminate(t) {
  ask({
    title: `Terminate ${shortId(t.id)}?`,
    text: `“${t.title}” is stopped (TERM, then KILL) and fails as terminated.`,
    reason: "Reason",
    reasonValue: "by request",
    ok: "Terminate",
    danger: true,
    run: (reason) => steer(task(t.id, "terminate", { reason: reason || "by request" })),
  });
}

/** Land an ended worktree run: its branch merged into the branch the person names
 * (default: the one it started from); a refusal (a conflict, a dirty checkout) is
 * shown as the server says it, and changes nothing. */
export function merge(t, branch) {
  ask({
    title: `Merge ${shortId(t.id)}?`,
    text: `The branch ${branch} of “${t.title}” is merged in a temporary worktree, then the target branch moves; a clean checkout of it moves with it, as git merge there (one with uncommitted changes is refused). Work the run left uncommitted is committed on its branch first.`,
    reason: "Into branch",
    reasonValue: (t.isolation && t.isolation.base) || "",
    ok: "Merge",
    run: (into) => steer(
      task(t.id, "merge", into ? { into } : {}),
      `merged ${shortId(t.id)} into ${into || "its base branch"}`,
    ),
  });
}

export function restart(t) {
  const running = t.status === "running";
  ask({
    title: `Restart ${shortId(t.id)}?`,
    text: running
      ? `“${t.title}” is running: it is stopped, then queued again (forced restart).`
      : `“${t.title}” gets a new attempt at the tail of its priority band.`,
    ok: running ? "Stop and restart" : "Restart",
    danger: running,
    run: () => steer(task(t.id, "restart", { force: running }), `restarted ${shortId(t.id)}`),
  });
}

export function priority(t) {
  ask({
    title: `Priority of ${shortId(t.id)}`,
    choices: PRIORITIES,
    chosen: t.priority,
    reason: "Reason (optional)",
    ok: "Set priority",
    run: (reason, level) => steer(task(t.id, "priority", { priority: level, reason: reason || null })),
  });
}

/** The bulk target: every task matching the line's filter, or the selected ids. */
function target() {
  if (state.selectAll) {
    const f = state.filter;
    return {
      filter: { status: ["queued", "held"], q: f.q || null, agent: f.agent || null, workspace: f.workspace || null },
    };
  }
  return { ids: [...state.selected] };
}

export function bulk(verb, count) {
  const run = async (reason, level) => {
    const body = { verb, ...target(), reason: reason || null };
    if (verb === "priority") body.priority = level;
    const result = await steer(post("/api/tasks/bulk", body));
    if (result) {
      update({ selected: new Set(), selectAll: false });
      const skipped = result.skipped.length ? `, ${result.skipped.length} skipped` : "";
      update({ notice: { text: `${verb}: ${result.done.length} changed${skipped}`, at: Date.now() } });
    }
  };
  ask({
    title: `${verb[0].toUpperCase()}${verb.slice(1)} ${count}?`,
    text: state.selectAll ? "Every queued or held task matching the filter." : null,
    choices: verb === "priority" ? PRIORITIES : null,
    chosen: "high",
    reason: verb === "priority" ? "Reason (optional)" : null,
    no: verb === "cancel" ? "Keep them" : "Back",
    ok: verb === "cancel" ? "Cancel tasks" : "Apply",
    danger: verb === "cancel",
    run,
  });
}

export function redrive(filter, count) {
  ask({
    title: `Redrive ${count}?`,
    text: "Each failed task matching the filter gets a new attempt.",
    ok: "Redrive",
    run: () => steer(post("/api/tasks/bulk", { verb: "restart", filter }), "redriven"),
  });
}

export const pause = () => steer(post("/api/pause"), "paused: nothing new starts");
export const resume = () => steer(post("/api/resume"), "resumed");

export function emergencyStop(running) {
  ask({
    title: "Emergency stop?",
    text: `Pause dispatch and terminate all ${running} running task(s).`,
    reason: "Reason",
    reasonValue: "emergency stop",
    ok: "Stop everything",
    danger: true,
    run: (reason) => steer(post("/api/emergency-stop", { reason: reason || "emergency stop" })),
  });
}

export async function submit(body) {
  const created = await act(post("/api/tasks", body));
  if (created) {
    update({ notice: { text: `submitted ${shortId(created.id)} (${created.status})`, at: Date.now() } });
    refresh();
  }
  return created;
}

export const listHistory = (params) => api(`/api/tasks${query(params)}`);
