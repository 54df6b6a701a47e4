"""`slotline limits`: read the caps on running tasks, or change them with `--set KEY=N`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import click

from slotline.cli.context import CliState, json_option, pass_state
from slotline.cli.pacing import Pacing, parse_pacing
from slotline.cli.plain import print_json
from slotline.client.backend import Backend
from slotline.errors import InvalidInput
from slotline.limits import LIMIT_KEYS, check_limit_max
from slotline.store import NONE_MEANS_NO_BOUND, SETTING_RULES

# KEY[VALUE]=N: the value in brackets runs to the last `]=`, so it may hold `=` or `]`.
_ASSIGNMENT = re.compile(r"^(?P<key>[^\[=]+?)(?:\[(?P<value>.*)\])?=(?P<n>[^=]*)$")
_KEYS_HELP = (
    "max_concurrent, agent, workspace, user, repo or label:NAME (optionally with a value in "
    "brackets: agent[claude]), or a setting: "
    + ", ".join(sorted(set(SETTING_RULES) - {"max_concurrent"}))
)


@dataclass(frozen=True, slots=True)
class Assignment:
    """One `--set`: a per-key limit (key, value, max) or a store setting (key, max)."""

    key: str
    value: str | None
    max: int | float | None
    per_key: bool

    def apply(self, store: Backend) -> None:
        if self.per_key:
            store.set_limit(self.key, self.value, None if self.max is None else int(self.max))
        else:
            store.set_setting(self.key, self.max)


def parse_assignment(text: str) -> Assignment | Pacing:
    """`agent[claude]=2`, `workspace=1`, `label:team[infra]=none`, `max_concurrent=4`;
    or a rate, the fairness or a back-off rule (`cli/pacing.py`).

    Raises:
        click.BadParameter: the text is not KEY=N with a known key.
    """
    pacing = parse_pacing(text)
    if pacing is not None:
        return pacing
    match = _ASSIGNMENT.match(text.strip())
    if match is None:
        raise click.BadParameter(f"{text!r} is not KEY=N or KEY[VALUE]=N", param_hint="--set")
    key, value, number = match["key"].strip(), match["value"], match["n"].strip().lower()
    per_key = key in LIMIT_KEYS or (key.startswith("label:") and len(key) > len("label:"))
    if not per_key and key not in SETTING_RULES:
        raise click.BadParameter(f"unknown limit {key!r}; use {_KEYS_HELP}", param_hint="--set")
    if value is not None and not per_key:
        raise click.BadParameter(f"{key} takes no [VALUE]", param_hint="--set")
    if value is not None and not value.strip():
        raise click.BadParameter(f"empty value in brackets in {text!r}", param_hint="--set")
    if key in ("workspace", "repo") and value is not None:
        # Tasks store their workspace (repository) as an absolute path; name it so.
        value = str(Path(value).expanduser().resolve())
    if number == "none":
        if not per_key and key not in NONE_MEANS_NO_BOUND:
            raise click.BadParameter(f"{key} cannot be none; give a number", param_hint="--set")
        return Assignment(key, value, None, per_key)
    kind = int if per_key else SETTING_RULES[key][0]
    try:
        parsed: int | float = int(number) if kind is int else float(number)
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        extra = " or none" if per_key or key in NONE_MEANS_NO_BOUND else ""
        raise click.BadParameter(
            f"{key} must be {what}{extra}, got {number!r}", param_hint="--set"
        ) from None
    if parsed < 0:
        raise click.BadParameter(f"{key} must be 0 or more, got {number}", param_hint="--set")
    if per_key:  # settings are checked by the store (or the server), as on every surface
        try:
            parsed = check_limit_max(parsed)
        except InvalidInput as exc:
            raise click.BadParameter(f"{key}: {exc}", param_hint="--set") from None
    return Assignment(key, value, parsed, per_key)


@click.command()
@click.option(
    "--set",
    "assignments",
    metavar="KEY=N",
    multiple=True,
    help="Change a limit (repeatable): max_concurrent=4, agent[claude]=2, "
    "workspace=1, 'label:team[infra]=1'; N=none removes a per-key limit. Rates: "
    "'rate:agent[claude]=20/1m', rate:global=100/1h, rate:user=5/1m (per user). "
    "Budgets: 'budget:agent[claude]=50usd/1d', 'budget:user=2Mtok/1h' (tokens in+out), "
    "several windows at once ('budget:agent[claude]=10usd/1h' and '=100usd/1d'), "
    "'budget:agent[claude]=none/1h' (that window), 'budget:agent[claude]=none' (all). "
    "Fairness: fairness=user (or workspace, agent, parent, "
    "label:NAME), "
    "'fairness[alice]=2', fairness=none. Back-off: "
    '\'backoff[claude]={"exit_codes": [75], "pattern": "429"}\', backoff[claude]=none.',
)
@json_option
@pass_state
def limits(state: CliState, assignments: tuple[str, ...]) -> None:
    """Show or change the limits.

    With --set, change them first; a running node applies them at once.
    """
    parsed = [parse_assignment(a) for a in assignments]
    store = state.store
    for assignment in parsed:
        assignment.apply(store)
    settings = store.settings()
    if parsed and settings["max_concurrent"] == 0:
        from slotline.config.file import warn_no_slots

        warn_no_slots("set now")
    if state.json:
        print_json(settings.to_dict())
    else:
        from slotline.cli.render import limits_table, show  # rich: for people only

        show(limits_table(settings))
