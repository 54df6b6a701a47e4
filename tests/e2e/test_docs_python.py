"""The PraisonAI-style example of docs/python.md runs as written: its files are taken from
the page, served by `slotline serve --app research:app`, and submitted from another
process."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from e2e.conftest import Serve
from overlap import peak
from slotline.models import Priority, Status
from slotline.store import Store

DOC = Path(__file__).parents[2] / "docs" / "python.md"


def files_of(text: str) -> dict[str, str]:
    """The code blocks of the page marked `<!-- file: NAME -->`, by name."""
    found = re.findall(r"<!-- file: (\S+) -->\n```python\n(.*?)```", text, flags=re.DOTALL)
    return dict(found)


def test_the_praisonai_style_example_runs_two_agents_at_a_time_urgent_first(
    tmp_path: Path, serve: Serve, base_env: dict[str, str], store: Store
) -> None:
    # Given the example's two files,
    files = files_of(DOC.read_text())
    assert set(files) == {"research.py", "submit.py"}
    for name, code in files.items():
        (tmp_path / name).write_text(code)
    # when the node serves the app and the submitting script runs,
    serve("--app", "research:app", "--max-concurrent", "4")
    script = subprocess.run(
        [sys.executable, "submit.py"],
        capture_output=True,
        text=True,
        env=base_env,
        cwd=tmp_path,
        timeout=240,
        check=False,
    )
    # then it prints the four summaries,
    assert script.returncode == 0, script.stderr
    assert script.stdout.splitlines() == [
        "researcher-agent (researcher): notes on Research task queues",
        "researcher-agent (researcher): notes on Research rate limits",
        "researcher-agent (researcher): notes on Research sandboxes",
        "incident analyst-agent (incident analyst): notes on Research the outage",
    ]
    # and at most two agents ran at once.
    tasks = store.list_tasks()
    assert [t.status for t in tasks] == [Status.SUCCEEDED] * 4
    assert tasks[-1].priority is Priority.URGENT
    assert {t.agent for t in tasks} == {"praisonai"}
    assert peak((t.started_at or 0, t.finished_at or 0) for t in tasks) <= 2
