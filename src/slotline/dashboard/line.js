// The line: queued tasks in queue order, windowed (only the rows near the scroll position
// are fetched and drawn), with hover and keyboard actions, drag and drop, and selection.

import * as actions from "./actions.js";
import { clock, duration, plural, roughly, shortId, since, waitingWhy } from "./format.js";
import { open } from "./open.js";
import { loadLine } from "./refresh.js";
import { serverNow, state, update } from "./state.js";
import { Badge, Button, html } from "./ui.js";

// px; rows have a fixed height so the window is arithmetic (taller on a compact screen,
// where a row is its title, why it waits, and its facts on up to two lines)
const rowHeight = () => (state.compact ? 88 : 44);
const PAGE = 100; // rows fetched at a time
const DRAWN = 40; // rows drawn at a time (the viewport and some above and below)
const MARGIN = 10; // rows drawn above the first visible one

let scrollTimer = null;
let typing = null;
let frame = null;

function onScroll(event) {
  const top = event.currentTarget.scrollTop;
  if (!frame) {
    frame = requestAnimationFrame(() => {
      frame = null;
      update({ scroll: top });
    });
  }
  clearTimeout(scrollTimer);
  scrollTimer = setTimeout(() => {
    const first = Math.floor(top / rowHeight());
    const { offset } = state.window;
    const fetched = state.line ? state.line.queued.length : 0;
    const end = state.line ? state.line.queued_total : 0;
    if (first - MARGIN < offset || (first + DRAWN > offset + fetched && offset + fetched < end)) {
      update({ window: { offset: Math.max(0, first - 2 * MARGIN), limit: PAGE } });
      loadLine();
    }
  }, 60);
}

function select(task, event, ids) {
  const selected = new Set(state.selected);
  if (event.shiftKey && state.anchor && ids.includes(state.anchor)) {
    const [a, b] = [ids.indexOf(state.anchor), ids.indexOf(task.id)].sort((x, y) => x - y);
    for (const id of ids.slice(a, b + 1)) selected.add(id);
  } else if (selected.has(task.id)) {
    selected.delete(task.id);
  } else {
    selected.add(task.id);
  }
  update({ selected, anchor: task.id, selectAll: false });
}

function keys(task, event, queued) {
  if (event.target !== event.currentTarget) return;
  const alt = event.altKey;
  const key = event.key;
  const act = {
    Enter: () => open(task.id),
    s: () => actions.startNow(task),
    b: () => actions.boost(task),
    h: () => (task.status === "held" ? actions.release(task) : actions.hold(task)),
    c: () => actions.cancel(task),
    Delete: () => actions.cancel(task),
    p: () => actions.priority(task),
  }[key];
  if (alt && queued && key === "ArrowUp") return move(event, () => actions.moveTo(task, Math.max(1, task.position - 1)));
  if (alt && queued && key === "ArrowDown") return move(event, () => actions.moveTo(task, task.position + 1));
  if (alt && queued && key === "Home") return move(event, () => actions.moveTo(task, 1));
  if (!alt && key === "ArrowDown") return focusSibling(event, 1);
  if (!alt && key === "ArrowUp") return focusSibling(event, -1);
  if (act && !alt && !event.ctrlKey && !event.metaKey && (key === "Enter" || state.me.can_write)) {
    event.preventDefault();
    act();
  }
}

// The row keeps focus when the redraw moves it (see keepingFocus), so keys can repeat.
function move(event, run) {
  event.preventDefault();
  run();
}

function focusSibling(event, step) {
  event.preventDefault();
  const row = step > 0 ? event.currentTarget.nextElementSibling : event.currentTarget.previousElementSibling;
  if (row && row.tabIndex >= 0) row.focus();
}

// Drag and drop (HTML5): the dragged id travels in the dataTransfer; dropping on the upper
// half of a row puts the task before it, on the lower half after it.
function drag(task) {
  return {
    draggable: true,
    onDragStart: (e) => {
      e.dataTransfer.setData("text/plain", task.id);
      e.dataTransfer.effectAllowed = "move";
    },
  };
}

function drop(task) {
  const half = (e) => {
    const box = e.currentTarget.getBoundingClientRect();
    return e.clientY < box.top + box.height / 2 ? "before" : "after";
  };
  return {
    onDragOver: (e) => {
      e.preventDefault();
      e.currentTarget.dataset.drop = half(e);
    },
    onDragLeave: (e) => {
      delete e.currentTarget.dataset.drop;
    },
    onDrop: (e) => {
      e.preventDefault();
      delete e.currentTarget.dataset.drop;
      const moved = e.dataTransfer.getData("text/plain");
      if (!moved || moved === task.id) return;
      const where = half(e);
      const body = { id: moved };
      (where === "before" ? actions.moveBefore : actions.moveAfter)(body, task.id);
    },
  };
}

/** The estimated start, roughly ("in ~5 min"), the exact time and its basis on hover;
 * "unknown" (the reason on hover) when the server could not estimate it. */
function Eta({ task, now }) {
  if (task.eta_start) {
    const basis = task.eta_basis ? ` · estimate based on ${task.eta_basis}` : "";
    // An estimated start that has come (or gone) while the task still waits: "soon".
    const when = Date.parse(task.eta_start) - now < 45_000 ? "soon" : roughly(task.eta_start, now);
    return html`<span class="eta" title=${`starts about ${clock(task.eta_start)}${basis}`}><span class="eta-label">Starts</span> ${when}</span>`;
  }
  if (task.eta_unavailable) {
    return html`<span class="eta unknown" title=${task.eta_unavailable}><span class="eta-label">Starts</span> unknown</span>`;
  }
  return html`<span class="eta"><span class="eta-label">Starts</span> –</span>`;
}

// On a compact screen the row's actions are behind an explicit button (the sheet), never
// shown on hover: a tap hovers first, and would press whatever appeared under the finger.
function RowActions({ task, canWrite, queued }) {
  if (state.compact) {
    return html`<button type="button" class="btn more" data-action="more" aria-label=${`Actions for ${task.title}`}
      aria-haspopup="dialog" onClick=${() => update({ sheet: task.id })}>⋯</button>`;
  }
  return html`<span class="actions">
    <${Button} label="View" action="view" title=${`View ${shortId(task.id)}`} onClick=${() => open(task.id)} />
    ${canWrite && actions.offered(task, { moves: queued }).map(
      (a) => html`<${Button} label=${a.icon || a.label} action=${a.action} kind=${a.kind} title=${actions.hint(a)} onClick=${a.run} />`,
    )}
  </span>`;
}

function Row({ task, now, ids, next }) {
  const me = state.me;
  const canWrite = me && me.can_write;
  const queued = task.status === "queued";
  const held = task.status === "held";
  const waiting = task.status === "waiting";
  const checked = state.selectAll || state.selected.has(task.id);
  const why = queued ? waitingWhy(task, now) : null;
  const draggable = canWrite && queued && !state.compact;
  return html`<li class=${`row ${next ? "next" : ""} ${queued ? "" : "parked"}`} data-task-id=${task.id}
    data-status=${task.status} tabindex="0" aria-label=${`${task.position ? `position ${task.position}, ` : ""}${task.title}`}
    onKeyDown=${(e) => keys(task, e, queued)} ...${draggable ? { ...drag(task), ...drop(task) } : {}}>
    ${canWrite && html`<input type="checkbox" class="pick" aria-label=${`Select ${task.title}`}
      checked=${checked} onClick=${(e) => select(task, e, ids)} />`}
    <span class="pos">${task.position ? `#${task.position}` : "–"}</span>
    ${next && !state.compact && html`<${Badge} kind="next">NEXT UP<//>`}
    <span class="title-cell"><span class="title" title=${task.title}>${task.title}</span>${why && html`<span class="why" title=${why.title}>${why.text}</span>`}</span>
    <span class="meta">
      ${next && state.compact && html`<${Badge} kind="next">NEXT UP<//>`}
      <${Badge} kind=${`pri-${task.priority}`}>${task.priority}<//>
      ${task.boosted && html`<${Badge} kind="boost">BOOSTED<//>`}
      ${held && html`<${Badge} kind="held">HELD<//>`}
      ${waiting && html`<${Badge} kind="wait" title=${task.status_reason || ""}>WAITING on ${task.depends_on.map(shortId).join(", ")}<//>`}
      ${task.agent && html`<${Badge} kind="agent">${task.agent}<//>`}
      <span class="waited" title="waiting for">${duration(since(task.queued_at || task.created_at, now))}</span>
      ${state.line.showEta && queued && html`<${Eta} task=${task} now=${now} />`}
    </span>
    <${RowActions} task=${task} canWrite=${canWrite} queued=${queued} />
  </li>`;
}

function Filters() {
  const f = state.filter;
  const agents = Object.keys(state.config.agents || {});
  const set = (name) => (e) => {
    // The value at once (another field may change before the read), the read once typing stops.
    update({ filter: { ...state.filter, [name]: e.currentTarget.value }, window: { offset: 0, limit: PAGE }, scroll: 0, selectAll: false });
    clearTimeout(typing);
    typing = setTimeout(() => loadLine(), 200);
  };
  const fields = html`<div class="filters" role="search">
    <label>Search <input type="search" name="q" value=${f.q} placeholder="title or id" onInput=${set("q")} /></label>
    <label>Agent <select name="agent" onChange=${set("agent")}>
      <option value="">any</option>
      ${agents.map((a) => html`<option value=${a} selected=${a === f.agent}>${a}</option>`)}
    </select></label>
    <label>Workspace <input name="workspace" value=${f.workspace} onInput=${set("workspace")} /></label>
  </div>`;
  if (!state.compact) return fields;
  const filtering = Boolean(f.q || f.agent || f.workspace);
  return html`<details class="filter-toggle" open=${filtering}><summary>Filter${filtering ? " (on)" : ""}</summary>${fields}</details>`;
}

function BulkBar({ total }) {
  if (!state.me || !state.me.can_write) return null;
  const count = state.selectAll ? total : state.selected.size;
  const filtered = state.filter.q || state.filter.agent || state.filter.workspace;
  const what = state.selectAll ? `all ${plural(total, "matching task")}` : plural(count, "task");
  return html`<div class="bulk" role="toolbar" aria-label="Bulk actions">
    <${Button} label=${filtered ? "Select all matching" : "Select all"} action="select-all"
      onClick=${() => update({ selectAll: true, selected: new Set() })} />
    ${count > 0 && html`
      <span class="selected-count">${what} selected</span>
      <${Button} label="Cancel" kind="danger" action="bulk-cancel" onClick=${() => actions.bulk("cancel", what)} />
      <${Button} label="Priority" action="bulk-priority" onClick=${() => actions.bulk("priority", what)} />
      <${Button} label="Hold" action="bulk-hold" onClick=${() => actions.bulk("hold", what)} />
      <${Button} label="Release" action="bulk-release" onClick=${() => actions.bulk("release", what)} />
      <${Button} label="Clear selection" action="select-none" onClick=${() => update({ selected: new Set(), selectAll: false })} />`}
  </div>`;
}

export function Line() {
  const line = state.line;
  if (!line) return null;
  const now = serverNow();
  const total = line.queued_total;
  const first = Math.floor((state.scroll || 0) / rowHeight());
  const from = Math.min(Math.max(line.offset, first - MARGIN), line.offset + line.queued.length);
  const to = Math.min(line.offset + line.queued.length, from + DRAWN);
  const rows = line.queued.slice(from - line.offset, to - line.offset);
  const shown = to >= total ? rows.concat(line.parked) : rows;
  const ids = shown.map((t) => t.id);
  line.showEta = line.queued.some((t) => t.eta_start || t.eta_unavailable);
  return html`<section aria-labelledby="line-title" class="line">
    <h2 id="line-title">The line <span class="count">${total}</span>
      ${line.parked_total > 0 && html`<span class="count muted">+ ${line.parked_total} held or waiting</span>`}</h2>
    <${Filters} />
    <${BulkBar} total=${total + line.parked_total} />
    <div class="line-scroll" onScroll=${onScroll}>
      <ol id="queue" class="rows" style=${{ paddingTop: `${from * rowHeight()}px`, paddingBottom: `${Math.max(0, total - to) * rowHeight()}px` }}>
        ${shown.length === 0 && html`<li class="empty">The line is empty.</li>`}
        ${shown.map((t) => html`<${Row} key=${t.id} task=${t} now=${now} ids=${ids} next=${t.id === line.next_up} />`)}
      </ol>
    </div>
  </section>`;
}
