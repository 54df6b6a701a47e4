// Opening and closing the task panel (its log followed while it runs).

import { followLog } from "./api.js";
import { loadTask } from "./refresh.js";
import { state, update } from "./state.js";

let following = null;

export function close() {
  if (following) following.abort();
  following = null;
  update({ open: null, task: null });
}

export function open(id) {
  close();
  update({ open: id, task: { log: "", following: true } });
  loadTask();
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
