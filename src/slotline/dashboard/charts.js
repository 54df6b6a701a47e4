// Charts from the stored samples (server clock): queue depth and running, tasks ended per
// interval, and wait/run time p50/p95 per agent type. Drawn with the vendored uPlot.

import { Component } from "./vendor/preact.module.js";
import uPlot from "./vendor/uPlot.esm.js";
import { duration } from "./format.js";
import { loadCharts } from "./refresh.js";
import { state, update } from "./state.js";
import { html } from "./ui.js";

// uPlot's stylesheet, added once the charts are first shown (a file: the CSP allows no inline style).
if (!document.querySelector("link[data-uplot]")) {
  const sheet = Object.assign(document.createElement("link"), { rel: "stylesheet", href: "/ui/vendor/uPlot.min.css" });
  sheet.dataset.uplot = "";
  document.head.append(sheet);
}

class Plot extends Component {
  componentDidMount() {
    this.draw();
  }
  componentDidUpdate() {
    this.draw();
  }
  componentWillUnmount() {
    if (this.plot) this.plot.destroy();
  }
  draw() {
    if (this.plot) this.plot.destroy();
    const width = Math.max(280, Math.min(720, this.base.clientWidth || 600));
    // Axis text and grid in the theme's colours (read from the CSS variables).
    const css = getComputedStyle(document.documentElement);
    const axis = { stroke: css.getPropertyValue("--muted").trim(), grid: { stroke: css.getPropertyValue("--line").trim() } };
    const options = { width, height: 180, series: this.props.series, axes: [axis, axis] };
    this.plot = new uPlot(options, this.props.data, this.base);
  }
  render() {
    return html`<div class="plot" role="img" aria-label=${this.props.label}></div>`;
  }
}

function Timings({ agents }) {
  if (!agents.length) return html`<p class="muted">No task ended in this window.</p>`;
  const top = Math.max(1, ...agents.flatMap((a) => [a.wait.p95 || 0, a.run.p95 || 0]));
  const bar = (value) => html`<span class="hbar" style=${{ width: `${((value || 0) / top) * 100}%` }}></span>`;
  return html`<table class="timings"><thead><tr><th>agent</th><th>tasks</th>
    <th>wait p50</th><th>wait p95</th><th>run p50</th><th>run p95</th></tr></thead>
    <tbody>${agents.map((a) => html`<tr key=${a.agent}><td>${a.agent}</td><td>${a.tasks}</td>
      <td>${duration(a.wait.p50)} ${bar(a.wait.p50)}</td><td>${duration(a.wait.p95)} ${bar(a.wait.p95)}</td>
      <td>${duration(a.run.p50)} ${bar(a.run.p50)}</td><td>${duration(a.run.p95)} ${bar(a.run.p95)}</td></tr>`)}</tbody></table>`;
}

export function Charts() {
  const { window, data } = state.charts;
  const pick = (w) => () => {
    update({ charts: { window: w, data: null } });
    loadCharts();
  };
  const samples = data ? data.samples : [];
  const times = samples.map((s) => s.at);
  return html`<section aria-labelledby="charts-title" id="charts">
    <h2 id="charts-title">Charts</h2>
    <div class="tabs" role="group" aria-label="Window">
      <button type="button" class="btn" aria-pressed=${window === "hour"} onClick=${pick("hour")}>Last hour</button>
      <button type="button" class="btn" aria-pressed=${window === "day"} onClick=${pick("day")}>Last day</button>
    </div>
    ${!data && html`<p>Loading…</p>`}
    ${data && data.samples_withheld && html`<p class="muted">${data.samples_withheld}</p>`}
    ${data && !data.samples_withheld && samples.length < 2 && html`<p class="muted">Fewer than two samples yet: nodes write one every few seconds.</p>`}
    ${data && samples.length >= 2 && html`
      <h3>Queue depth and running</h3>
      <${Plot} label="Queue depth and running over time" data=${[times, samples.map((s) => s.queued), samples.map((s) => s.running)]}
        series=${[{}, { label: "queued", stroke: "#2f6fde", width: 2 }, { label: "running", stroke: "#1a9e5c", width: 2 }]} />
      <h3>Throughput (tasks ended per sample)</h3>
      <${Plot} label="Tasks ended per interval" data=${[times, samples.map((s) => s.finished), samples.map((s) => s.failed)]}
        series=${[{}, { label: "ended", stroke: "#8a5cd6", width: 2 }, { label: "failed", stroke: "#d64545", width: 2 }]} />`}
    ${data && html`<h3>Wait and run time per agent type</h3><${Timings} agents=${data.agents} />`}
  </section>`;
}
