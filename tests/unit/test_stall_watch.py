"""The stall watcher's reading of a run's log, checked round by round against a real
store and real log files: a waiting pattern counts only on the last line of output,
and a run adopted after a restart is judged on what it prints from then on."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from slotline.node.run import Run
from slotline.node.stall import StallWatch
from slotline.node.supervisor import Supervisor
from slotline.runner.process import ProcessHandle
from slotline.store import Store, open_store
from slotline.webhooks.config import StallRule

RULE = StallRule(pattern=r"waiting for input$")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = open_store(str(tmp_path / "store.db"))
    yield opened
    opened.close()


def start(
    store: Store, tmp_path: Path, output: str, adopted: bool = False
) -> tuple[StallWatch, Run, Path]:
    """A claimed run of agent type `coder` whose log holds `output`, and a watcher."""
    store.submit({"command": ["true"], "agent": "coder"})
    claim = store.claim("node-a").claims[0]
    log = tmp_path / f"{claim.attempt.id}.log"
    log.write_text(output)
    handle = ProcessHandle(1, None, log, log.with_suffix(".exit"))
    run = Run(claim.task, claim.attempt, handle=handle, adopted=adopted)
    supervisor = SimpleNamespace(runs={run.attempt.id: run}, store=store, changed=asyncio.Event())
    return StallWatch(cast(Supervisor, supervisor), {"coder": RULE}), run, log


def stalled(store: Store, run: Run) -> bool:
    return store.get(run.task.id).stalled_at is not None


def test_a_prompt_printed_at_once_stalls_a_new_run(store: Store, tmp_path: Path) -> None:
    watch, run, _ = start(store, tmp_path, "working\nAllow this edit? waiting for input")
    asyncio.run(watch.check())
    assert stalled(store, run)


def test_a_prompt_followed_by_more_output_is_no_stall(store: Store, tmp_path: Path) -> None:
    # Given a run whose output shows the prompt, answered, with more output after it,
    watch, run, log = start(store, tmp_path, "Allow this edit? waiting for input\nyes\nworking\n")
    asyncio.run(watch.check())
    # then it is not stalled; once the prompt is its last line again, it is.
    assert not stalled(store, run)
    with log.open("a") as out:
        out.write("Allow that edit? waiting for input\n")
    asyncio.run(watch.check())
    assert stalled(store, run)


def test_an_adopted_run_is_judged_on_its_new_output(store: Store, tmp_path: Path) -> None:
    # Given a run adopted after a restart whose old output ends with the prompt (the
    # earlier node saw it, and the answer may have gone since),
    watch, run, log = start(store, tmp_path, "Allow this edit? waiting for input\n", adopted=True)

    async def rounds() -> None:
        await watch.check()
        assert not stalled(store, run)  # old output: not this node's to judge
        with log.open("a") as out:
            out.write("back to work\n")
        await watch.check()
        assert not stalled(store, run)
        with log.open("a") as out:
            out.write("Allow that edit? waiting for input")
        await watch.check()
        assert stalled(store, run)  # a new prompt, printed since

    asyncio.run(rounds())
