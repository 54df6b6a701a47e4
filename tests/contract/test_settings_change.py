"""Settings changed together (`Store.apply_settings`): one transaction for every part, so
a request whose last part is refused changes nothing (an HTTP request used to apply each
part in a transaction of its own, and could half-apply)."""

from __future__ import annotations

import pytest

from slotline.errors import InvalidInput
from slotline.store import SettingsChange, Store


def snapshot(store: Store) -> dict[str, object]:
    return store.settings().to_dict()


def test_every_part_is_applied_in_one_change(store: Store) -> None:
    seq = store.last_seq()
    settings = store.apply_settings(
        SettingsChange(
            settings={"max_concurrent": 7, "max_depth": 2},
            limits=[("agent", "claude", 2)],
            exempt_agents=["pm"],
            rates=[("agent", "claude", 20, "1m")],
            budgets=[("agent", "claude", 50.0, "1d", "usd")],
            fairness_given=True,
            fairness=("user", None),
            backoff=[("claude", {"exit_codes": [75]})],
        )
    )
    # Then the answer is the settings as they are now, and each part left its own event.
    assert settings.to_dict() == snapshot(store)
    assert (settings["max_concurrent"], settings["max_depth"]) == (7, 2)
    assert [(lim.key, lim.value, lim.max) for lim in settings.per_key] == [("agent", "claude", 2)]
    assert settings["exempt_agents"] == ["pm"]
    assert [rate.rate for rate in settings.rates] == ["20/1m"]
    assert [b.amount for b in settings.budgets] == [50.0]
    assert settings["fairness"]["key"] == "user"
    assert settings["backoff"]["claude"]["exit_codes"] == [75]
    kinds = [event.kind for event in store.events(seq)]
    assert kinds.count("settings") >= 3
    assert {"limit", "rate", "budget"} <= set(kinds)


@pytest.mark.parametrize(
    "refused",
    [
        SettingsChange(limits=[("agent", "x\x00", 1)]),
        SettingsChange(rates=[("agent", "claude", 0, "1m")]),
        SettingsChange(budgets=[("agent", "claude", 5.0, "1d", "eur")]),
        SettingsChange(backoff=[("", {"exit_codes": [75]})]),
        SettingsChange(fairness_given=True, fairness=("nope", None)),
    ],
    ids=["limit", "rate", "budget", "backoff", "fairness"],
)
def test_a_refused_part_leaves_every_other_part_undone(
    store: Store, refused: SettingsChange
) -> None:
    before, seq = snapshot(store), store.last_seq()
    # Given a change whose settings and limits come before the refused part,
    change = SettingsChange(
        settings={"max_concurrent": 9},
        limits=[("agent", "claude", 1)],
        exempt_agents=["pm"],
        rates=refused.rates,
        budgets=refused.budgets,
        backoff=refused.backoff,
        fairness_given=refused.fairness_given,
        fairness=refused.fairness,
    )
    if refused.limits:
        change = SettingsChange(
            settings={"max_concurrent": 9}, limits=[("agent", "claude", 1), *refused.limits]
        )
    # when it is applied, it is refused,
    with pytest.raises(InvalidInput):
        store.apply_settings(change)
    # and nothing of it was made: no setting, no limit, no event.
    assert snapshot(store) == before
    assert store.events(seq) == []


def test_a_change_on_one_thread_does_not_take_in_another_threads_verbs(store: Store) -> None:
    import threading

    done: list[int] = []

    def elsewhere() -> None:
        store.set_setting("max_depth", 4)
        done.append(1)

    thread = threading.Thread(target=elsewhere)

    def refused_change() -> None:
        with store._together():
            store.set_setting("max_concurrent", 5)
            # The store serializes writes: the other thread waits for this transaction.
            thread.start()
            raise InvalidInput("refused")

    # A verb made on another thread while a change is open commits on its own.
    with pytest.raises(InvalidInput):
        refused_change()
    thread.join(timeout=30)
    assert done == [1]
    assert store.settings()["max_depth"] == 4
    assert store.settings()["max_concurrent"] == 3
