// Reading what the views show: the line page, the open task, the history, the charts.
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
  } catch (error) {
    update({ notice: { text: error.message, error: true, at: Date.now() } });
  }
}

export async function loadHistory() {
  const h = state.history;
  const statuses = h.status ? [h.status] : ["succeeded", "failed", "cancelled", "expired"];
  const found = await api(
    `/api/tasks${query({ status: statuses, q: h.q, agent: h.agent, newest: true, limit: 200 })}`,
  );
  update({ history: { ...state.history, tasks: found.tasks, total: found.total } });
}

export async function loadCharts() {
  const data = await api(`/api/charts${query({ window: state.charts.window })}`);
  update({ charts: { ...state.charts, data } });
}

/**
 * Read again what is on screen, soon: calls within 150 ms make one read, and under a
 * steady flow of events on a long line (a read of a second) the page waits twice what the
 * last read took, so one page never keeps the server busy more than a third of the time.
 */
export function refresh() {
  if (pending) return;
  pending = setTimeout(() => {
    pending = null;
    loadLine();
    if (state.open) loadTask();
    if (state.view === "history") loadHistory().catch(() => {});
  }, Math.max(150, 2 * lastRead));
}
