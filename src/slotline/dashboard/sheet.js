// A task's actions as a sheet over the bottom of a compact screen (a phone): every action
// of the row within reach of a thumb, each the same call as on a wide screen, confirmed
// alike. It opens only from the row's explicit actions button (see line.js).

import * as actions from "./actions.js";
import { shortId } from "./format.js";
import { open } from "./open.js";
import { state, update } from "./state.js";
import { Button, html } from "./ui.js";

/** The task the sheet is for, from what the page holds (the line, parked or running). */
function find(id) {
  const line = state.line;
  if (!line) return null;
  return [...line.queued, ...line.parked, ...line.running].find((t) => t.id === id) || null;
}

function focusFirst(element) {
  if (element && !element.contains(document.activeElement)) {
    const first = element.querySelector("button");
    if (first) first.focus({ preventScroll: true });
  }
}

export function Sheet() {
  const task = state.sheet ? find(state.sheet) : null;
  if (!task) return null;
  const close = () => update({ sheet: null });
  // The sheet closes first: what the action opens (a dialog, the task) is then on top.
  const then = (run) => () => {
    close();
    run();
  };
  const canWrite = state.me && state.me.can_write;
  const offered = canWrite ? actions.offered(task, { moves: task.status === "queued" }) : [];
  return html`<div class="backdrop sheet-backdrop" onClick=${(e) => e.target === e.currentTarget && close()}
    onKeyDown=${(e) => e.key === "Escape" && close()}>
    <div class="sheet" role="dialog" aria-modal="true" aria-labelledby="sheet-title" id="task-sheet"
      data-task-id=${task.id} ref=${focusFirst}>
      <h2 id="sheet-title">${task.title}</h2>
      <p class="muted">${shortId(task.id)} · ${task.status}${task.position ? ` · #${task.position}` : ""} · ${task.priority}</p>
      <div class="sheet-actions">
        <${Button} label="View" action="view" title=${`View ${shortId(task.id)}`} onClick=${then(() => open(task.id))} />
        ${offered.map((a) => html`<${Button} label=${a.icon ? `${a.icon} ${a.label}` : a.label} action=${a.action}
          kind=${a.kind} title=${actions.hint(a)} onClick=${then(a.run)} />`)}
      </div>
      <${Button} label="Close" action="close-sheet" title="Close" onClick=${close} />
    </div>
  </div>`;
}
