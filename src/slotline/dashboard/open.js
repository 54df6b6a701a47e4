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

export function open(id) {
  close();
  update({ open: id, task: { log: "", following: true } });
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
