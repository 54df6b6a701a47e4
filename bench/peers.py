"""Peers that live in venvs of their own (PgQueuer, PraisonAI): where each is, and how to run
one measurement of it in a child of that venv's python.

A peer is not a project dependency (PraisonAI alone pulls in hundreds of packages), so each
gets a venv of its own, made once:

    python3 -m venv .peers/pgqueuer && .peers/pgqueuer/bin/pip install 'pgqueuer==1.6.0' \\
        'asyncpg==0.32.0' 'psycopg[binary]==3.3.9'
    python3 -m venv .peers/praisonai && .peers/praisonai/bin/pip install 'praisonai==4.7.19'

Another place is given with `--pgqueuer-venv` / `--praisonai-venv` or the environment
variables `BENCH_PGQUEUER_VENV` / `BENCH_PRAISONAI_VENV`. The side scripts
(`bench/pgqueuer_side.py`, `bench/praisonai_side.py`) import only the peer and the standard
library (plus `bench.workloads` and `bench.stats`, which need nothing else).
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True, slots=True)
class Peer:
    """A peer queue benchmarked from a venv of its own."""

    name: str  # also its side module: bench/{name}_side.py
    env: str  # the environment variable that names its venv
    install: str  # what to run to make the default venv

    def default_venv(self) -> Path:
        return ROOT / ".peers" / self.name

    def venv(self, given: str | Path | None = None) -> Path:
        """The venv to use: `given`, else the environment variable, else `.peers/NAME`."""
        return Path(given or os.environ.get(self.env) or self.default_venv())

    def python(self, given: str | Path | None = None) -> Path | None:
        """The venv's python, or None when it is not there."""
        python = self.venv(given) / "bin" / "python"
        return python if python.exists() else None

    def missing(self, given: str | Path | None = None) -> str:
        """What to tell a user whose venv for this peer is not there."""
        return (
            f"{self.name}: no venv at {self.venv(given)} (set {self.env} or pass "
            f"--{self.name}-venv); make one with:\n  {self.install}"
        )


PGQUEUER = Peer(
    "pgqueuer",
    "BENCH_PGQUEUER_VENV",
    "python3 -m venv .peers/pgqueuer && .peers/pgqueuer/bin/pip install "
    "'pgqueuer==1.6.0' 'asyncpg==0.32.0' 'psycopg[binary]==3.3.9'",
)
PRAISONAI = Peer(
    "praisonai",
    "BENCH_PRAISONAI_VENV",
    "python3 -m venv .peers/praisonai && .peers/praisonai/bin/pip install 'praisonai==4.7.19'",
)
PEERS = {peer.name: peer for peer in (PGQUEUER, PRAISONAI)}


def run_peer(
    python: Path, peer: str, action: str, target: str, timeout: float, **params: Any
) -> dict[str, Any]:
    """Run `action` of `bench/{peer}_side.py` under `python`; return the JSON it printed.

    `target` is the SQLite file or the PostgreSQL URL. The page cache is flushed first,
    as for the project's own children (`bench.child.run_child`).

    Raises:
        RuntimeError: the child failed or timed out (its stderr tail is in the message).
    """
    os.sync()
    argv = [str(python), "-m", f"bench.{peer}_side", action, target, f"--timeout={timeout}"]
    argv += [f"--{name}={value}" for name, value in params.items()]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PYTHONPATH"] = str(ROOT)
    try:
        proc = subprocess.run(
            argv,
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout + 30,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"{peer} {action} did not finish in {timeout + 30:g}s") from exc
    if proc.returncode != 0:
        raise RuntimeError(f"{peer} {action} failed:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def version(python: Path, package: str) -> str:
    """`package`'s version in the venv of `python`, and that venv's place."""
    code = f"from importlib.metadata import version; print(version({package!r}))"
    proc = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=False)
    found = proc.stdout.strip() if proc.returncode == 0 else "unknown"
    return f"{found} (venv {python.parent.parent})"
