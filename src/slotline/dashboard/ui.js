// Shared view pieces: the html tag, badges, buttons, the modal and the notice.

import { h } from "./vendor/preact.module.js";
import htm from "./vendor/htm.module.js";
import { state, update } from "./state.js";

export const html = htm.bind(h);

/**
 * Runs `draw` (a synchronous render) so that the element with focus keeps it: a keyed row that
 * the diff moves (a live reorder) is taken out and put back, which drops focus to the page.
 */
export function keepingFocus(draw) {
  const focused = document.activeElement;
  draw();
  const dropped = document.activeElement === document.body || document.activeElement === null;
  if (focused && focused !== document.body && focused.isConnected && dropped) {
    focused.focus({ preventScroll: true });
  }
}

export const Badge = ({ kind, children, title }) =>
  html`<span class=${`badge badge-${kind}`} title=${title}>${children}</span>`;

export function Button({ label, onClick, kind = "", title, disabled, action }) {
  return html`<button type="button" class=${`btn ${kind}`} title=${title} aria-label=${title}
    data-action=${action} disabled=${disabled} onClick=${onClick}>${label}</button>`;
}

/**
 * Ask before doing: `ask({title, text, reason: "label" | null, choices, ok, no, run})` (`ok`
 * does it, `no` closes: two labels that cannot be mistaken for each other);
 * `run(reason, choice)` is awaited, its error shown.
 */
let returnFocus = null;

export function ask(modal) {
  returnFocus = document.activeElement; // focus goes back there when the dialog closes
  update({ modal: { reason: null, ok: "OK", no: "Back", ...modal } });
}

export function notify(text, error = false) {
  update({ notice: { text, error, at: Date.now() } });
}

/** Run a steering call; show its error instead of throwing. */
export async function act(promise, done) {
  try {
    const result = await promise;
    if (done) notify(done);
    return result;
  } catch (error) {
    notify(error.message, true);
    return null;
  }
}

function focusFirst(element) {
  if (element && !element.contains(document.activeElement)) {
    const target = element.querySelector("input, select, textarea, button.primary");
    if (target) target.focus();
  }
}

export function Modal() {
  const modal = state.modal;
  if (!modal) return null;
  const close = () => {
    update({ modal: null });
    if (returnFocus && returnFocus.isConnected) returnFocus.focus();
  };
  const submit = async (event) => {
    event.preventDefault();
    const form = event.currentTarget;
    const reason = form.elements.reason ? form.elements.reason.value : null;
    const choice = form.elements.choice ? form.elements.choice.value : null;
    close();
    await modal.run(reason, choice);
  };
  const keys = (event) => {
    if (event.key === "Escape") close();
  };
  // What the person typed or chose is kept in the dialog's state, so that a live update
  // redrawing the page while it is open does not put the defaults back.
  const keep = (field) => (event) => {
    modal[field] = event.currentTarget.value;
  };
  return html`<div class="backdrop" onKeyDown=${keys}>
    <form class="modal" role="dialog" aria-modal="true" aria-labelledby="modal-title"
      ref=${focusFirst} onSubmit=${submit}>
      <h2 id="modal-title">${modal.title}</h2>
      ${modal.text && html`<p>${modal.text}</p>`}
      ${modal.choices &&
      html`<label>Priority <select name="choice" onChange=${keep("chosen")}>
        ${modal.choices.map((c) => html`<option value=${c} selected=${c === modal.chosen}>${c}</option>`)}
      </select></label>`}
      ${modal.reason !== null &&
      html`<label>${modal.reason} <input name="reason" maxlength="500"
        value=${modal.reasonValue || ""} onInput=${keep("reasonValue")} /></label>`}
      <div class="modal-actions">
        <button type="button" class="btn" data-action="dismiss" onClick=${close}>${modal.no}</button>
        <button type="submit" class=${`btn primary ${modal.danger ? "danger" : ""}`}
          data-action="confirm">${modal.ok}</button>
      </div>
    </form>
  </div>`;
}

export function Notice() {
  const notice = state.notice;
  if (!notice) return null;
  return html`<div class=${`notice ${notice.error ? "error" : ""}`} role=${notice.error ? "alert" : "status"}>
    <span>${notice.text}</span>
    <button type="button" class="btn small" aria-label="Dismiss" onClick=${() => update({ notice: null })}>×</button>
  </div>`;
}
