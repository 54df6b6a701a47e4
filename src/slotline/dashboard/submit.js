// Submitting a task: an agent type and a prompt, or a raw command where allowed.

import { PRIORITIES, submit } from "./actions.js";
import { state } from "./state.js";
import { html } from "./ui.js";

async function send(event) {
  event.preventDefault();
  const form = event.currentTarget;
  const v = (name) => (form.elements[name] ? form.elements[name].value.trim() : "");
  const body = { priority: v("priority") };
  if (v("title")) body.title = v("title");
  if (v("workspace")) body.workspace = v("workspace");
  const after = v("after").split(/[\s,]+/).filter(Boolean);
  if (after.length) body.depends_on = after;
  if (v("kind") === "command") {
    body.command = form.elements.command.value.split("\n").filter((line) => line !== "");
  } else {
    body.agent = v("agent");
    body.prompt = v("prompt");
  }
  if (await submit(body)) form.reset();
}

export function Submit() {
  const agents = Object.keys(state.config.agents || {});
  const raw = state.me.is_admin || state.config.raw_commands === "all";
  return html`<section aria-labelledby="submit-title">
    <h2 id="submit-title">Submit</h2>
    <form class="submit" onSubmit=${send}>
      <fieldset><legend>What to run</legend>
        ${agents.length > 0 && html`<label><input type="radio" name="kind" value="agent" checked /> Agent type and prompt</label>`}
        ${raw && html`<label><input type="radio" name="kind" value="command" checked=${!agents.length} /> Command (one argument per line, no shell)</label>`}
        ${agents.length > 0 && html`<label>Agent type <select name="agent">${agents.map((a) => html`<option value=${a}>${a}</option>`)}</select></label>
          <label>Prompt <textarea name="prompt" rows="3"></textarea></label>`}
        ${raw && html`<label>Command <textarea name="command" rows="3" placeholder=${"pytest\n-x"}></textarea></label>`}
        ${!agents.length && !raw && html`<p class="muted">No agent type is configured and raw commands are for admins.</p>`}
      </fieldset>
      <label>Title <input name="title" maxlength="500" /></label>
      <label>Priority <select name="priority">${PRIORITIES.map((p) => html`<option value=${p} selected=${p === "normal"}>${p}</option>`)}</select></label>
      <label>Workspace <input name="workspace" /></label>
      <label>After (task ids) <input name="after" placeholder="3f2a 9c1d" /></label>
      <button type="submit" class="btn primary" data-action="submit">Submit</button>
    </form>
  </section>`;
}
