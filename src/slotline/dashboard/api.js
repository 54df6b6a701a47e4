// The HTTP API and the live event stream, with the token kept in sessionStorage (never in a URL).

const KEY = "slotline.token";

export const token = {
  get: () => sessionStorage.getItem(KEY),
  set: (value) => sessionStorage.setItem(KEY, value),
  clear: () => sessionStorage.removeItem(KEY),
};

export class ApiError extends Error {
  constructor(status, detail) {
    super(detail);
    this.status = status;
  }
}

/** `?a=1&b=x&b=y` from an object; empty values are left out, arrays repeat their key. */
export function query(params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    for (const one of Array.isArray(value) ? value : [value]) {
      if (one !== undefined && one !== null && one !== "") search.append(name, String(one));
    }
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

function headers(json) {
  const found = { Accept: "application/json" };
  const secret = token.get();
  if (secret) found.Authorization = `Bearer ${secret}`;
  if (json) found["Content-Type"] = "application/json";
  return found;
}

async function failure(response) {
  let detail = response.statusText;
  try {
    const body = await response.json();
    detail = typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail);
  } catch {
    // not JSON: keep the status text
  }
  return new ApiError(response.status, detail);
}

export async function api(path, { method = "GET", body } = {}) {
  const response = await fetch(path, {
    method,
    headers: headers(body !== undefined),
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!response.ok) throw await failure(response);
  return response.json();
}

/** Stream a task's log: `onText(chunk)` for each piece; returns an AbortController. */
export function followLog(taskId, onText, onEnd) {
  const abort = new AbortController();
  (async () => {
    const response = await fetch(`/api/tasks/${encodeURIComponent(taskId)}/log?follow=true`, {
      headers: headers(false),
      signal: abort.signal,
    });
    if (!response.ok) throw await failure(response);
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      onText(decoder.decode(value, { stream: true }));
    }
    onEnd(null);
  })().catch((error) => {
    if (error.name !== "AbortError") onEnd(error);
  });
  return abort;
}

/**
 * A WebSocket to this server's `path`, with the token: a browser cannot send headers, so it
 * offers the subprotocols `slotline` and `slotline-token.TOKEN` (never the URL, which is logged).
 */
export function openSocket(path) {
  const protocols = ["slotline"];
  const secret = token.get();
  if (secret) protocols.push(`slotline-token.${secret}`);
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  return new WebSocket(`${scheme}://${location.host}${path}`, protocols);
}

/**
 * The event stream over a WebSocket, resumed from the last seq seen after any drop.
 * `onEvent(event)` for each event, `onState("live" | "reconnecting" | "refused", why)`.
 */
export function connect(since, onEvent, onState) {
  let socket = null;
  let last = since;
  let delay = 250;
  let stopped = false;

  function open() {
    socket = openSocket(`/api/events/ws?since=${last}`);
    socket.onopen = () => {
      delay = 250;
      onState("live");
    };
    socket.onmessage = (message) => {
      const frame = JSON.parse(message.data);
      if (frame.type === "event" && frame.seq > last) {
        last = frame.seq;
        onEvent(frame);
      }
    };
    socket.onclose = (closed) => {
      if (stopped) return;
      const refused = closed.code === 1008;
      onState(refused ? "refused" : "reconnecting", closed.reason);
      setTimeout(open, refused ? 5000 : delay);
      delay = Math.min(delay * 2, 4000);
    };
  }

  open();
  return {
    close() {
      stopped = true;
      socket.close();
    },
    get last() {
      return last;
    },
  };
}
