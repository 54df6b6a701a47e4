// Reading what the views show: the line page, the open task, the history, the charts, the
// spend.
// Events only schedule these reads (coalesced), so a burst of events costs one request.

import { api, query, token } from "./api.js";
import { state, update } from "./state.js";

const SPARK = 30;
let pending = null;
let inFlight = false;
let again = false;
let lastRead = 0; // ms the last line read took

export async function loadLine() {
  if (inFlight) {
    again = true;
    return;
  }
  inFlight = true;
  const used = token.get();
  const started = performance.now();
  try {
    const { offset, limit } = state.window;
    const f = state.filter;
    const line = await api(
      `/api/line${query({ offset, limit, q: f.q, agent: f.agent, workspace: f.workspace })}`,
    );
    const usage = new Map();
    for (const t of line.running) {
      const attempt = t.attempts[t.attempts.length - 1];
      const series = (state.usage.get(t.id) || []).concat([attempt ? attempt.cpu_percent || 0 : 0]);
      usage.set(t.id, series.slice(-SPARK));
    }
    update({ line, usage, skew: Date.parse(line.now) - Date.now() });
  } catch (error) {
    // A refusal of a token since replaced (signed in meanwhile) is no reason to ask again.
    if (error.status === 401 && token.get() === used) update({ login: error.message });
  } finally {
    inFlight = false;
    lastRead = performance.now() - started;
    if (again) {
      again = false;
      refresh(); // asked for while reading: once more, at the same pace
    }
  }
}

export async function loadTask() {
  const id = state.open;
  if (!id) return;
  try {
    const path = `/api/tasks/${encodeURIComponent(id)}`;
    const [task, events, children, dependents] = await Promise.all([
      api(path),
      api(`${path}/events?limit=200`),
      api(`/api/tasks${query({ parent: id, limit: 100 })}`),
      api(`${path}/dependents`),
    ]);
    if (state.open !== id) return;
    const found = { task, events: events.events, children: children.tasks, dependents };
    update({ task: { ...(state.task || {}), ...found } });
    await loadDiff(id, task);
  } catch (error) {
    update({ notice: { text: error.message, error: true, at: Date.now() } });
  }
}

// The patch shown on a task's page is capped: a page stays small whatever a run wrote.
const DIFF_PAGE_BYTES = 200_000;
// A running worktree run's diff is read again at most this often while its page is open
// (git runs on the server for each read).
export const DIFF_EVERY = 5000;
let diffReads = 0;
let diffReading = null; // the worktree whose diff a read in flight is for
let diffTimer = null;

/** The attempt of `task` whose worktree the page shows: its latest with one. */
function lastTree(task) {
  const trees = task.attempts.filter((a) => a.worktree);
  return trees.length ? trees[trees.length - 1] : null;
}

// A worktree run's diff, read again when its latest worktree changed, or when `force`d
// (the Refresh button, the pace of a running run: `force` skips only the "unchanged"
// check). One read at a time: none starts while another is in flight, so a slow diff
// never piles reads up; a read answered for a page no longer open is dropped.
async function loadDiff(id, task, { force = false } = {}) {
  const last = lastTree(task);
  if (!last) return;
  const key = JSON.stringify([last.id, last.finished_at, last.worktree]);
  if (diffReading !== null) return;
  if (!force && state.task && state.task.diffKey === key) return;
  const read = ++diffReads;
  diffReading = key;
  update({ task: { ...state.task, diffAt: Date.now() } });
  let diff = null;
  let diffError = null;
  try {
    diff = await api(`/api/tasks/${encodeURIComponent(id)}/diff${query({ max_bytes: DIFF_PAGE_BYTES })}`);
  } catch (error) {
    diffError = error.message;
  } finally {
    diffReading = null;
  }
  if (read !== diffReads) return;
  if (state.open !== id) return;
  update({ task: { ...state.task, diff, diffError, diffKey: key, diffAt: Date.now() } });
}

/** Read the open task's diff again now (its Refresh button). */
export function refreshDiff() {
  const id = state.open;
  const task = state.task && state.task.task;
  if (id && task) loadDiff(id, task, { force: true });
}

/**
 * While the open task runs in a worktree, read its diff again every DIFF_EVERY ms (not
 * while the page is hidden), so the page shows what the run has changed so far.
 */
export function paceDiff() {
  stopDiff();
  diffTimer = setInterval(() => {
    const task = state.task && state.task.task;
    if (!task || task.status !== "running" || document.hidden) return;
    const last = lastTree(task);
    if (!last || last.finished_at) return;
    if (Date.now() - (state.task.diffAt || 0) >= DIFF_EVERY) refreshDiff();
  }, 1000);
}

export function stopDiff() {
  clearInterval(diffTimer);
  diffTimer = null;
}

export async function loadHistory() {
  const h = state.history;
  const statuses = h.status ? [h.status] : ["succeeded", "failed", "cancelled", "expired"];
  const found = await api(
    `/api/tasks${query({ status: statuses, q: h.q, agent: h.agent, ended: true, limit: 200 })}`,
  );
  update({ history: { ...state.history, tasks: found.tasks, total: found.total } });
}

let spendReads = 0;

/** What the runs the caller sees spent; a read answered after a later one is dropped. */
export async function loadSpend() {
  const read = ++spendReads;
  try {
    const stats = await api("/api/stats");
    if (read === spendReads) update({ spend: { data: stats.spend, error: null } });
  } catch (error) {
    if (read === spendReads) update({ spend: { ...state.spend, error: error.message } });
  }
}

export async function loadCharts() {
  const data = await api(`/api/charts${query({ window: state.charts.window })}`);
  update({ charts: { ...state.charts, data } });
}

// The events that end a run: only these change what runs spent.
const RUN_ENDS = new Set(["succeeded", "failed", "cancelled", "terminated", "retry", "requeued", "restarted"]);
let spendChanged = false;

/** Whether `event` ended a run (and so may change the spend shown). */
export const endsRun = (event) => RUN_ENDS.has(event.kind);

/**
 * Read again what is on screen, soon: calls within 150 ms make one read, and under a
 * steady flow of events on a long line (a read of a second) the page waits twice what the
 * last read took, so one page never keeps the server busy more than a third of the time.
 * The spend (a sum over every run) is read again only when `spend` says a run ended.
 */
export function refresh({ spend = false } = {}) {
  spendChanged = spendChanged || spend;
  if (pending) return;
  pending = setTimeout(() => {
    pending = null;
    loadLine();
    if (state.open) loadTask();
    if (state.view === "history") loadHistory().catch(() => {});
    if (state.view === "spend" && spendChanged) loadSpend();
    spendChanged = false;
  }, Math.max(150, 2 * lastRead));
}
