// The live feed of the event log, newest first.

import { clock, shortId } from "./format.js";
import { open } from "./open.js";
import { state } from "./state.js";
import { html } from "./ui.js";

export function Events() {
  return html`<section aria-labelledby="events-title">
    <h2 id="events-title">Events</h2>
    <ol id="events" class="events" aria-live="off">
      ${state.events.map((e) => html`<li key=${e.seq} data-seq=${e.seq}>
        <span class="muted">#${e.seq} ${clock(e.at)}</span> <b>${e.kind}</b>
        ${e.task_id && html` <button type="button" class="link" onClick=${() => open(e.task_id)}>${shortId(e.task_id)}</button>`}
        ${e.data && e.data.title ? ` “${e.data.title}”` : ""}
        ${e.data && e.data.reason ? ` (${e.data.reason})` : ""}</li>`)}
    </ol>
  </section>`;
}
