// The one store of the page's state: views read it, `update` changes it and re-renders.

const listeners = new Set();

/** A phone, or any screen without hover: rows get an explicit actions button and sheet
 * instead of actions shown on hover (a tap would hover, then press what appeared). */
export const COMPACT = matchMedia("(max-width: 700px), (hover: none)");

export const state = {
  me: null, // {name, role, can_write, is_admin}; null until known
  login: null, // why a token is asked for, when it is
  config: { agents: {}, raw_commands: "admins" },
  conn: "connecting", // live | reconnecting | refused
  line: null, // the last /api/line answer
  skew: 0, // server clock minus ours, in ms
  window: { offset: 0, limit: 100 }, // the page of the line fetched
  scroll: 0, // the line's scrollTop: which rows of the page are drawn
  filter: { q: "", agent: "", workspace: "" },
  selected: new Set(), // task ids
  selectAll: false, // "every task matching the filter"
  anchor: null, // the last row clicked, for shift-click
  usage: new Map(), // task id -> recent CPU% samples (sparklines)
  view: "line", // line | history | events | charts | spend | submit
  open: null, // the id of the task shown in the task panel
  task: null, // {task, events, children, log, following}
  history: { status: "", q: "", agent: "", tasks: [], total: 0 },
  events: [], // newest first, at most EVENTS_KEPT
  charts: { window: "hour", data: null },
  spend: { data: null, error: null }, // the `spend` of /api/stats, read while shown
  compact: COMPACT.matches, // see COMPACT
  sheet: null, // the task whose actions sheet is open (compact screens)
  modal: null, // {title, text, reason, choices, ok, run}
  notice: null, // {text, error}
  theme: localStorage.getItem("slotline.theme") || "",
};

export const EVENTS_KEPT = 300;

export function update(patch) {
  Object.assign(state, typeof patch === "function" ? patch(state) : patch);
  for (const listener of listeners) listener(state);
}

export function subscribe(listener) {
  listeners.add(listener);
}

/** Now on the server's clock, in ms. */
export function serverNow() {
  return Date.now() + state.skew;
}
