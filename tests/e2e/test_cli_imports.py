"""A command imports what it uses: what people see needs rich, a receipt or JSON does not."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

# Runs one CLI command in this interpreter, then prints which heavy packages it imported.
PROBE = """
import sys
from slotline.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
heavy = ("rich", "pydantic", "asyncio", "httpx", "psutil", "yaml")
print(json.dumps({"code": code, "loaded": [m for m in heavy if m in sys.modules]}))
"""


def imported(store: Path, *args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", "import json\n" + PROBE, "--store", str(store), *args],
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["code"] == 0, done.stderr
    return list(result["loaded"])


@pytest.mark.parametrize(
    "args",
    [
        ("status", "--json"),
        ("ls", "--json"),
        ("limits", "--json"),
    ],
)
def test_json_reads_do_not_import_rich(tmp_path: Path, args: tuple[str, ...]) -> None:
    assert "rich" not in imported(tmp_path / "s.db", *args)


def test_status_imports_neither_pydantic_nor_asyncio(tmp_path: Path) -> None:
    loaded = imported(tmp_path / "s.db", "status")
    assert "rich" in loaded  # the table people read
    assert not {"pydantic", "asyncio", "httpx", "psutil", "yaml"} & set(loaded)


def test_submit_receipt_does_not_import_rich(tmp_path: Path) -> None:
    assert "rich" not in imported(tmp_path / "s.db", "submit", "--", "true")
