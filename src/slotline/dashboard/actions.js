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
export const moveTo = (t, to) => steer(task(t.id, "move", { to }));
export const moveBefore = (t, other) => steer(task(t.id, "move", { before: other }));
export const moveAfter = (t, other) => steer(task(t.id, "move", { after: other }));

export function cancel(t) {
  ask({
    title: `Cancel ${shortId(t.id)}?`,
    text: `“${t.title}” is ${t.status}.${t.status === "running" ? " Its process is stopped." : ""}`,
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
