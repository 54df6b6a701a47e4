"""`slotline stats`: counts per state, wait and run times per agent type, throughput."""

from __future__ import annotations

import click
from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from slotline import stats as queue_stats
from slotline.cli.context import CliState, json_option, pass_state
from slotline.cli.plain import ago, print_json
from slotline.cli.render import STATUS_STYLES, keep_widths, show, text
from slotline.clock import utcnow
from slotline.models import Status
from slotline.pacing.spend import BY, Spend, describe

ALL_TASKS = 1_000_000_000


@click.command()
@json_option
@pass_state
def stats(state: CliState) -> None:
    """Show counts, wait and run times per agent type, throughput, and what runs spent.

    Wait is from entering the line to the start of the run; run is each attempt's
    start to end; spent is cost and tokens (as the agent types' `usage` rules read them)
    per agent type, user, workspace and day. Computed from the stored tasks and
    attempts, so it survives restarts.
    """
    now = utcnow()
    computed = queue_stats.compute(state.store.list_tasks(limit=ALL_TASKS), now)
    if state.json:
        print_json(computed.to_dict())
    else:
        show(render(computed))


def seconds(value: float | None) -> str:
    """A duration with a precision that suits it: `0.25s`, `12.5s`, `4m05s`, `2h10m`."""
    if value is None:
        return "-"
    if value < 10:
        return f"{value:.2f}s"
    if value < 60:
        return f"{value:.1f}s"
    whole = round(value)
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def render(computed: queue_stats.Stats) -> RenderableType:
    parts: list[RenderableType] = [_counts_line(computed)]
    if computed.agents:
        parts.append(_agents_table(computed.agents))
    parts.append(_throughput_line(computed))
    if computed.spend.total.runs or computed.spend.total.denied:
        parts.append(_spend_table(computed.spend))
    return Group(*parts)


def _spend_table(spend: Spend) -> Table:
    """Cost and tokens per agent type, user, workspace and day, and the total; and how
    many runs had their agent refused tool uses, if any did."""
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, title="SPENT")
    table.add_column("BY", no_wrap=True)
    table.add_column("KEY", overflow="ellipsis", ratio=1)
    table.add_column("RUNS", justify="right", no_wrap=True)
    table.add_column("SPENT", justify="right", no_wrap=True)
    total = spend.total
    refused = total.denied > 0
    if refused:
        table.add_column("REFUSED TOOLS", justify="right", no_wrap=True, style="bold red")
    rows = [("total", [total])] + [(by, spend.groups.get(by, [])) for by in BY]
    for by, group in rows:
        for row in group:
            key = "" if by == "total" else row.key
            spent = describe(row.cost_usd, row.input_tokens, row.output_tokens)
            denied = [f"{row.denied} run{'' if row.denied == 1 else 's'}"] if refused else []
            table.add_row(by, text(key), str(row.runs), spent, *denied)
    return table


def _counts_line(computed: queue_stats.Stats) -> Text:
    line = Text(f"{computed.total} task{'' if computed.total == 1 else 's'}", style="bold")
    shown = [s for s in Status if computed.counts.get(s.value)]
    for index, status in enumerate(shown):
        line.append(": " if index == 0 else ", ")
        line.append(f"{computed.counts[status.value]} {status.value}", STATUS_STYLES[status])
    return line


def _agents_table(agents: list[queue_stats.AgentStats]) -> Table:
    # Avg, p50 and p95 share a column each for waits and run times (TOOK), and the state
    # headers are short, so that the table fits 80 columns with every number; only the
    # agent name shrinks.
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, collapse_padding=True)
    table.add_column("AGENT", no_wrap=True, overflow="ellipsis", ratio=1, min_width=5)
    for name in ("ALL", "RUN", "QUEUED", "OK", "FAIL"):
        table.add_column(name, justify="right", no_wrap=True)
    for what in ("WAIT", "TOOK"):  # the average, then p50 and p95, as the values
        table.add_column(
            " ".join(f"{head:>6}" for head in (what, "P50", "P95")), justify="right", no_wrap=True
        )
    for agent in agents:
        counts = agent.counts
        table.add_row(
            text(agent.agent),
            str(agent.tasks),
            *(
                str(counts.get(s.value, 0))
                for s in (Status.RUNNING, Status.QUEUED, Status.SUCCEEDED, Status.FAILED)
            ),
            _spread(agent.wait),
            _spread(agent.run),
        )
    return keep_widths(table)


def _spread(values: queue_stats.Timing) -> str:
    return " ".join(f"{seconds(v):>6}" for v in (values.avg, values.p50, values.p95))


def _throughput_line(computed: queue_stats.Stats) -> Text:
    flow = computed.throughput
    line = Text("throughput: ", style="bold")
    line.append(
        f"{flow.per_minute_last_hour:.2f}/min in the last hour ({flow.finished_last_hour} ended)"
    )
    if flow.per_minute_overall is not None:
        line.append(
            f" · {flow.per_minute_overall:.2f}/min since the first task, "
            f"{ago(flow.since, computed.now)} ({flow.finished} ended)"
        )
    return line
