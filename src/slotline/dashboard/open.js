// Opening and closing the task panel (its log followed while it runs, and its diff read
// again at a pace while it runs in a worktree).

import { followLog } from "./api.js";
import { loadTask, paceDiff, stopDiff } from "./refresh.js";
import { state, update } from "./state.js";

let following = null;

export function close() {
  if (following) following.abort();
  following = null;
  stopDiff();
  update({ open: null, task: null });
}

/** Bring the task's panel into sight once drawn: below the line on a middle-sized screen,
 * where it would open out of sight (a phone shows it over the page, see app.css). */
function reveal() {
  requestAnimationFrame(() => {
    const panel = document.getElementById("task-panel");
    if (!panel) return;
    const box = panel.getBoundingClientRect();
    if (box.top < 0 || box.top > window.innerHeight - 80) panel.scrollIntoView({ block: "start" });
  });
}

export function open(id) {
  close();
  update({ open: id, task: { log: "", following: true } });
  reveal();
  loadTask();
  paceDiff();
  following = followLog(
    id,
    (text) => {
      if (state.open !== id) return;
      const log = (state.task.log + text).slice(-200_000);
      update({ task: { ...state.task, log } });
    },
    (error) => {
      if (state.open !== id) return;
      update({ task: { ...state.task, following: false, logError: error ? error.message : null } });
    },
  );
}
