// Formatting helpers: every value becomes plain text (rendered as text nodes, never HTML).

export const shortId = (id) => (id ? id.slice(0, 8) : "");

export function duration(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return "–";
  const s = Math.max(0, Math.floor(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, "0")}s`;
  const h = Math.floor(s / 3600);
  return `${h}h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}

export function bytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KB", "MB", "GB", "TB"];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(value < 10 && unit ? 1 : 0)} ${units[unit]}`;
}

export const percent = (n) => (n === null || n === undefined ? "–" : `${Math.round(n)}%`);

/** Seconds since an ISO time, on the server's clock `nowMs`. */
export function since(iso, nowMs) {
  return iso ? (nowMs - Date.parse(iso)) / 1000 : null;
}

// One format for every time the page shows, in the viewer's local time zone, never cut:
// "Nov 27, 17:28:46" (the year only when it is not this one).
const CLOCK = { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit" };

export function clock(iso) {
  if (!iso) return "–";
  const at = new Date(iso);
  const year = at.getFullYear() === new Date().getFullYear() ? {} : { year: "numeric" };
  return at.toLocaleString(undefined, { ...CLOCK, ...year });
}

/** A rough distance from now on the server's clock `nowMs`: "in ~5 min", "in ~1 h", "now",
 * "~3 min ago" (an estimate is never shown to the second). */
export function roughly(iso, nowMs) {
  const seconds = (Date.parse(iso) - nowMs) / 1000;
  const ahead = Math.abs(seconds);
  if (ahead < 45) return "now";
  const minutes = Math.round(ahead / 60);
  const span = minutes < 60 ? `~${minutes} min` : `~${Math.round(minutes / 60)} h`;
  return seconds > 0 ? `in ${span}` : `${span} ago`;
}

// What runs spent: an unknown value (no run reported it) is "-", never 0, as in `stats`.
const UNKNOWN = "-";

/** US dollars: `$1,234.56`, or four places under a cent (`$0.0012`). */
export function dollars(cost) {
  if (cost === null || cost === undefined) return UNKNOWN;
  const places = cost > 0 && cost < 0.01 ? 4 : 2;
  return `$${cost.toLocaleString("en-US", { minimumFractionDigits: places, maximumFractionDigits: places })}`;
}

/** A count of tokens: `12,345`. */
export const tokens = (n) => (n === null || n === undefined ? UNKNOWN : n.toLocaleString("en-US"));

export function plural(n, word) {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

/** How many tool uses the agent of a task's latest run was refused (0: none). */
export function refusals(task) {
  const last = task.attempts && task.attempts.length ? task.attempts[task.attempts.length - 1] : null;
  return last && last.denied_tools ? last.denied_tools.length : 0;
}

/** Why a queued task is not starting now: its `waiting_reason` ("agent=claude: 2/2 running",
 * "frees in ~3 min"), or its status reason; null when nothing holds it. */
export function waitingWhy(task, now) {
  const why = task.waiting_reason;
  if (!why) return task.status_reason ? { text: task.status_reason, title: task.status_reason } : null;
  if (!why.until) return { text: why.text, title: why.text };
  const frees = Date.parse(why.until) <= now ? "frees now" : `frees ${roughly(why.until, now)}`;
  return { text: `${why.text} · ${frees}`, title: `${why.text}; frees at ${clock(why.until)}` };
}
