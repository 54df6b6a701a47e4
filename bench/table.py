"""The report table: which metrics are shown, how, and which direction is better."""

from __future__ import annotations

from dataclasses import dataclass

from bench.workloads import Sizes


@dataclass(frozen=True, slots=True)
class Row:
    """One line of the table: a metric measured on both sides (or on slotline only)."""

    workload: str
    metric: str
    key: str  # the metric's key in a run's sample, without the side prefix
    better: str  # "higher" or "lower"
    digits: int = 2
    huey: bool = True  # False: huey has no equivalent


def rows(sizes: Sizes) -> list[Row]:
    drain = f"2. drain {sizes.drain:,} no-op callables, limit {sizes.drain_limit}"
    procs = (
        f"3. {sizes.procs} × `sleep {sizes.sleep:g}`, limit {sizes.procs_limit} "
        f"(ideal {sizes.ideal_procs_seconds():.2f} s)"
    )
    handoff = f"4. hand-off at limit 1 ({sizes.handoff} callables)"
    served = (
        f"2b. drain {sizes.drain:,} no-op functions through `slotline serve --app` "
        f"(a worker process each), limit {sizes.drain_limit}"
    )
    return [
        Row("1. submit, one at a time", "tasks/s", "submit", "higher", 0),
        Row(
            "1. submit, one at a time; huey at synchronous=NORMAL like slotline",
            "tasks/s",
            "submit_normal",
            "higher",
            0,
        ),
        Row("1. submit_many, one batch", "tasks/s", "submit_many", "higher", 0, huey=False),
        Row(drain, "wall s", "drain_s", "lower"),
        Row(drain, "tasks/s", "drain_rate", "higher", 0),
        Row(served, "wall s", "served_drain_s", "lower", huey=False),
        Row(served, "tasks/s", "served_drain_rate", "higher", 0, huey=False),
        Row(procs, "wall s", "procs_s", "lower"),
        Row(procs, "overhead over ideal, s", "procs_overhead_s", "lower"),
        Row(handoff, "p50 ms (in-task stamps)", "handoff_p50_ms", "lower"),
        Row(handoff, "p99 ms (in-task stamps)", "handoff_p99_ms", "lower"),
        Row(handoff, "p50 ms (store finished→started)", "store_p50_ms", "lower", huey=False),
        Row(handoff, "p99 ms (store finished→started)", "store_p99_ms", "lower", huey=False),
        Row("5. peak RSS of the node/consumer", "MiB, during 2", "drain_rss_mib", "lower", 1),
        Row("5. peak RSS of the node/consumer", "MiB, during 3", "procs_rss_mib", "lower", 1),
        Row(
            "5. peak RSS of the node/consumer",
            "MiB, during 2b",
            "served_drain_rss_mib",
            "lower",
            1,
            huey=False,
        ),
    ]


def _cell(value: float | None, digits: int) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def render(table: list[Row], medians: dict[str, float]) -> str:
    """A Markdown table of medians with the slotline/huey ratio of each metric."""
    lines = [
        "| workload | metric | slotline | huey | slotline/huey | better |",
        "|---|---|---:|---:|---:|---|",
    ]
    for row in table:
        mine = medians.get(f"slotline.{row.key}")
        theirs = medians.get(f"huey.{row.key}") if row.huey else None
        ratio = "—"
        if mine is not None and theirs:
            ratio = f"{mine / theirs:.2f}"
        lines.append(
            f"| {row.workload} | {row.metric} | {_cell(mine, row.digits)} | "
            f"{_cell(theirs, row.digits)} | {ratio} | {row.better} |"
        )
    return "\n".join(lines)


def render_spread(table: list[Row], samples: list[dict[str, float]]) -> str:
    """A Markdown table of the lowest and highest value of each metric across the runs."""
    lines = ["| workload | metric | slotline min–max | huey min–max |", "|---|---|---:|---:|"]
    for row in table:
        cells = []
        for side in ("slotline", "huey"):
            values = [s[f"{side}.{row.key}"] for s in samples if f"{side}.{row.key}" in s]
            if not values or (side == "huey" and not row.huey):
                cells.append("—")
            else:
                cells.append(f"{_cell(min(values), row.digits)}–{_cell(max(values), row.digits)}")
        lines.append(f"| {row.workload} | {row.metric} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)
