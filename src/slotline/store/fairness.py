"""Fair dispatch in the store: the setting `fairness`, the passes of its values (table
fair_passes, advanced by the claim that starts a task, in its transaction) and the verb
that changes the setting. The order itself is `scheduler/fairness.py`, applied by the
policy."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from slotline.scheduler.fairness import Fairness, charged, check_fairness
from slotline.store.core import StoreCore
from slotline.store.events import emit
from slotline.store.queries import Tx
from slotline.store.settings import write_setting

# A value not served for this long is forgotten: it comes back at the floor of its band.
FORGET_AFTER = 86_400.0


def passes(tx: Tx, fairness: Fairness | None) -> dict[str, float]:
    """The pass of each value of the fairness key served lately (one row per value)."""
    if fairness is None:
        return {}
    return {
        str(r["value"]): float(r["pass"]) for r in tx.rows("fair_passes_of_key", key=fairness.key)
    }


def charge(
    tx: Tx,
    fairness: Fairness,
    current: Mapping[str, float],
    started: Iterable[tuple[Any, float | None]],
    now: float,
) -> None:
    """Advance the passes of the values whose tasks started now (task, turn)."""
    moved = charged(current, fairness, started)
    for value, new in moved.items():
        tx.run("fair_pass_put", key=fairness.key, value=value, new=new, at=now)
    if moved:
        tx.run("fair_passes_prune", before=now - FORGET_AFTER)


class FairnessVerbs(StoreCore):
    """The verb that turns fair dispatch on, re-weights it or turns it off."""

    def set_fairness(self, key: str | None, weights: Mapping[str, object] | None = None) -> None:
        """Take turns between the values of `key` (user, workspace, agent, parent or
        label:NAME) within each priority level, each value's share its weight (1 unless
        named in `weights`); None turns fairness off (rank order).

        Raises:
            InvalidInput: an unknown key or a weight not in (0, 1000].
        """
        value = None if key is None else check_fairness(key, weights).to_dict()
        with self._write() as tx:
            write_setting(tx, "fairness", value)
            emit(tx, "settings", None, tx.now(), fairness=value)
