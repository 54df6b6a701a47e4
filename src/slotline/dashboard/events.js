// The live feed of the event log, newest first; and what an event of a task says, as a
// sentence (the task page shows them, with the raw JSON behind a toggle).

import { clock, plural, shortId } from "./format.js";
import { open } from "./open.js";
import { state } from "./state.js";
import { html } from "./ui.js";

const because = (d) => (d.reason ? `: ${d.reason}` : "");

/** How a run ended: "exit code 1", its reason beside it when the reason says more. */
function ending(d) {
  const code = d.exit_code === null || d.exit_code === undefined ? null : `exit code ${d.exit_code}`;
  if (!code) return d.reason || "no exit code";
  return d.reason && d.reason !== code ? `${code} (${d.reason})` : code;
}

// What each kind of event says; `run` is the attempt it names (its node), when known.
const SAID = {
  submitted: (d) => `Submitted${d.to && d.to !== "queued" ? ` (${d.to})` : ""}${d.priority ? ` at priority ${d.priority}` : ""}`,
  started: (d, run) => `Started${run && run.node_id ? ` on node ${run.node_id}` : ""}${d.pid ? ` (pid ${d.pid})` : ""}${d.resumed_from ? ", resuming a session" : ""}`,
  succeeded: () => "Succeeded",
  claimed: (d, run) => `Took a slot${run && run.node_id ? ` on node ${run.node_id}` : ""}`,
  failed: (d) => `Failed: ${ending(d)}`,
  retry: (d) => `Failed (${ending(d)}); tried again`,
  cancelled: (d) => `Cancelled${because(d)}`,
  expired: () => "Expired: not started within its time in line",
  blocked: (d) => `Blocked${d.dependency ? ` by ${shortId(d.dependency)}` : ""}${because(d)}`,
  unblocked: () => "Unblocked: waits on its dependencies again",
  ready: () => "Its dependencies succeeded: in line",
  requeued: (d) => `Queued again${because(d)}`,
  restarted: () => "Restarted: in line for a new attempt",
  bumped: () => "Started now, even over the limit",
  boosted: () => "Boosted: it starts next",
  held: () => "Held: kept out of the line",
  released: () => "Released: back in line",
  moved: (d) => `Moved to #${d.position}${d.priority ? ` (priority ${d.priority}${d.boosted ? ", boosted" : ""})` : ""}`,
  priority: (d) => `Priority set to ${d.priority}${because(d)}`,
  cancel_requested: () => "Cancel asked: its process is being stopped",
  terminate_requested: (d) => `Terminate asked${because(d)}: its process is being stopped`,
  restart_requested: () => "Restart asked: its process is being stopped",
  stalled: (d) => `Stalled${because(d)}`,
  unstalled: () => "Printing again",
  needs_input: (d) => `Needs input${because(d)}${d.released ? "; gave its slot back" : ""}`,
  output_resumed: () => "Its terminal printed again",
  slot_retaken: (d) => (d.forced ? "Took its slot back, over the limit: it printed again" : "Took a slot again for someone's input"),
  denied: (d) => `Refused ${plural(d.count || 0, "tool use")}`,
  dependency_added: (d) => `Now waits on ${shortId(d.dependency)}`,
  followup: (d) => `Follows ${shortId(d.follows)}`,
  deduplicated: (d) => `Submitted again with key ${d.key}: this task is the answer`,
};

/** An event of `task` as a sentence: "Started on node box1 (pid 4242)", "Failed: exit code 1". */
export function sentence(event, task) {
  const d = event.data || {};
  const say = SAID[event.kind];
  if (say) {
    const run = task && d.attempt ? task.attempts.find((a) => a.id === d.attempt) : null;
    return say(d, run);
  }
  const words = event.kind.replaceAll("_", " ");
  return `${words[0].toUpperCase()}${words.slice(1)}${because(d)}`;
}

export function Events() {
  return html`<section aria-labelledby="events-title">
    <h2 id="events-title">Events</h2>
    <ol id="events" class="events" aria-live="off">
      ${state.events.map((e) => html`<li key=${e.seq} data-seq=${e.seq}>
        <span class="muted">#${e.seq} ${clock(e.at)}</span>
        ${e.task_id && html` <button type="button" class="link" onClick=${() => open(e.task_id)}>${shortId(e.task_id)}</button>`}
        ${e.data && e.data.title ? ` “${e.data.title}”` : ""} <span class="said" title=${e.kind}>${sentence(e, null)}</span></li>`)}
    </ol>
  </section>`;
}
