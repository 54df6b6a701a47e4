// The live terminal of an interactive run on its task page: the vendored xterm.js over the
// WebSocket /api/tasks/ID/terminal (binary frames of terminal bytes both ways, a text frame
// {"resize": [cols, rows]} when the box changes size), fitted to its box. Whether typing
// reaches the run is the server's to say (its first frame, {"attached": {"read_only"}}).

import { Component } from "./vendor/preact.module.js";
import { openSocket } from "./api.js";
import { shortId } from "./format.js";
import { html } from "./ui.js";

// xterm.js is the largest file of the page: loaded when a terminal is first shown, with
// its stylesheet (a file: the CSP allows no inline style).
let loading = null;

function loadXterm() {
  if (!loading) {
    const sheet = Object.assign(document.createElement("link"), { rel: "stylesheet", href: "/ui/vendor/xterm.css" });
    document.head.append(sheet);
    loading = Promise.all([import("./vendor/xterm.module.js"), import("./vendor/xterm-addon-fit.module.js")]);
  }
  return loading;
}

/**
 * xterm.js writes its colours, fonts and row sizes into <style> elements, which the page's
 * Content-Security-Policy (no inline style) blocks. A constructed stylesheet is not inline
 * markup: the text of those elements is copied into one. Each is taken out of the page as
 * soon as it appears (xterm keeps writing to it, out of the page, where the CSP does not
 * refuse every change again) and watched there. Returns the undo.
 */
function adoptStyles(host) {
  const sheet = new CSSStyleSheet();
  document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
  const styles = new Set();
  const copy = () => sheet.replaceSync([...styles].map((s) => s.textContent).join("\n"));
  const changed = new MutationObserver(copy);
  const take = (style) => {
    styles.add(style);
    changed.observe(style, { childList: true, characterData: true, subtree: true });
    style.remove();
  };
  const added = new MutationObserver((records) => {
    const found = records.flatMap((r) => [...r.addedNodes]).filter((n) => n.nodeName === "STYLE");
    if (!found.length) return;
    found.forEach(take);
    copy();
  });
  added.observe(host, { childList: true, subtree: true });
  host.querySelectorAll("style").forEach(take);
  copy();
  return () => {
    added.disconnect();
    changed.disconnect();
    document.adoptedStyleSheets = document.adoptedStyleSheets.filter((s) => s !== sheet);
  };
}

// The colours of the page's log box (app.css .log), for the terminal too.
const THEME = { background: "#0d1117", foreground: "#d1d9e0", cursor: "#d1d9e0" };

// The box xterm.js draws in: never redrawn by Preact, which would not know its children.
class Screen extends Component {
  shouldComponentUpdate() {
    return false;
  }
  render() {
    return html`<div class="term-box" id="task-terminal" aria-label="Terminal"></div>`;
  }
}

/**
 * The terminal of one attempt of an interactive task (`task`, `running`): connects while the
 * run runs, keeps the last screen once it ends, and can connect again after a detach.
 */
export class Terminal extends Component {
  constructor(props) {
    super(props);
    this.state = { phase: "waiting", readOnly: null, reason: null, ended: false };
    this.screen = null;
  }

  componentDidMount() {
    this.componentDidUpdate();
  }

  componentDidUpdate() {
    if (this.props.running && !this.started) {
      this.started = true;
      this.connect();
    }
  }

  componentWillUnmount() {
    this.gone = true;
    if (this.socket) this.socket.close();
    if (this.undo) this.undo();
    if (this.watch) this.watch.disconnect();
    if (this.term) this.term.dispose();
  }

  async setUp() {
    const [{ Terminal: Xterm }, { FitAddon }] = await loadXterm();
    if (this.gone || this.term) return;
    const host = this.base.querySelector(".term-box");
    this.undo = adoptStyles(host);
    const small = matchMedia("(max-width: 700px)").matches;
    this.term = new Xterm({ theme: THEME, fontSize: small ? 11 : 13, scrollback: 2000, convertEol: false });
    this.fit = new FitAddon();
    this.term.loadAddon(this.fit);
    this.term.open(host);
    this.term.onData((text) => this.type(new TextEncoder().encode(text)));
    this.term.onBinary((text) => this.type(Uint8Array.from(text, (c) => c.charCodeAt(0))));
    this.term.onResize(({ cols, rows }) => this.send(JSON.stringify({ resize: [cols, rows] })));
    // Fitted to its box whenever the box changes size (the window, a phone turned).
    let pending = false;
    this.watch = new ResizeObserver(() => {
      if (pending) return;
      pending = true;
      requestAnimationFrame(() => {
        pending = false;
        if (this.term && host.clientWidth > 0) this.fit.fit();
      });
    });
    this.watch.observe(host);
    this.fit.fit();
  }

  async connect() {
    this.setState({ phase: "connecting", reason: null });
    try {
      await this.setUp();
    } catch (error) {
      this.setState({ phase: "closed", reason: `cannot load the terminal (${error.message})` });
      return;
    }
    if (this.gone) return;
    const { cols, rows } = this.term;
    const socket = openSocket(`/api/tasks/${encodeURIComponent(this.props.task.id)}/terminal?cols=${cols}&rows=${rows}`);
    socket.binaryType = "arraybuffer";
    this.socket = socket;
    // The size again once open: the box may have been fitted since the URL was made.
    socket.onopen = () => this.send(JSON.stringify({ resize: [this.term.cols, this.term.rows] }));
    socket.onmessage = (message) => {
      if (typeof message.data !== "string") {
        this.term.write(new Uint8Array(message.data));
        return;
      }
      const frame = JSON.parse(message.data);
      if (frame.attached) {
        const readOnly = frame.attached.read_only;
        this.term.options.disableStdin = readOnly;
        this.setState({ phase: "live", readOnly });
      }
    };
    socket.onclose = (closed) => {
      if (this.gone || socket !== this.socket) return;
      this.socket = null;
      // 1000: the run ended; any other close leaves the run going (a detach, a refusal, the
      // network), and the page offers to connect again while it runs.
      const reason = closed.reason || `the connection closed (code ${closed.code})`;
      this.setState({ phase: "closed", reason, ended: closed.code === 1000 });
    };
  }

  send(data) {
    if (this.socket && this.socket.readyState === WebSocket.OPEN) this.socket.send(data);
  }

  type(bytes) {
    if (this.state.phase === "live" && this.state.readOnly === false) this.send(bytes);
  }

  render({ task, running }, { phase, readOnly, reason, ended }) {
    const id = shortId(task.id);
    const said = {
      waiting: task.finished_at ? "The run has ended: what it printed is in its log below." : "Its terminal shows here when the run starts.",
      connecting: "Connecting…",
      live: readOnly ? "Watching: only its owner and admins can type here." : "Live: what you type goes to the run.",
      closed: `Closed: ${reason}.${ended || !running ? " What it printed is in its log below." : ""}`,
    }[phase];
    const again = phase === "closed" && running && !ended;
    // No screen before the run starts, nor once it has ended (tmux clears it as it leaves).
    const blank = phase === "waiting" || (phase === "closed" && (ended || !running));
    return html`<section class=${`terminal-panel ${blank ? "blank" : ""}`} aria-labelledby="terminal-title">
      <h3 id="terminal-title">Terminal ${readOnly && html`<span class="badge badge-readonly" id="terminal-readonly">read-only</span>`}
        ${phase === "live" && html` <span class="badge badge-live">live</span>`}</h3>
      <${Screen} />
      <p class="muted" id="terminal-state" role="status">${said}
        ${again && html` <button type="button" class="btn small" data-action="reconnect" onClick=${() => this.connect()}>Connect again</button>`}</p>
      ${running && html`<p class="help" id="terminal-attach">From a shell: <code>slotline attach ${id}</code> (<code>--read-only</code> to watch). Detach with C-b d: the run goes on.</p>`}
    </section>`;
  }
}
