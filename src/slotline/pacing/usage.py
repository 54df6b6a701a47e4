"""An agent type's `usage` rules and what they read from a run's output: its cost, its
tokens in and out, its agent's session id (the one `resume` continues), and the tool
uses its agent was refused.

`json:` maps each key to a dotted path into the LAST JSON object the output holds (a
whole-output JSON document, or the last line of a stream of JSON lines that parses as
an object); `regex:` maps each key to a pattern whose first group, in its LAST match in
the output, is the value. A value nothing matches stays None: reading never fails a run.
Only the output's tail is read (`TAIL_BYTES`), never the whole of a huge log.

`permission_denials` reads every refusal: a `json` path to a list (one item per refused
tool use, its `tool_name` naming the tool, as Claude Code prints them), or a `regex`
whose EVERY match is one refusal, its first group the tool. `session_totals:` lists the
keys whose printed value is the running total of the agent's session (Claude Code's cost,
Codex's tokens after a resume): the reading keeps them as `Usage.session_totals`, and the
store records for a run that continues a session each total less the one recorded before
it (`spend.run_share`).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import re2  # type: ignore[import-untyped]
from pydantic import BaseModel, ConfigDict, Field, field_validator

from slotline.models import Usage
from slotline.pacing.backoff import checked_pattern
from slotline.runlogs import plain_text

AMOUNTS = ("cost_usd", "input_tokens", "output_tokens")
KEYS = (*AMOUNTS, "session_id", "permission_denials")
# How much of a run's log is read at its end: the results agents print come last.
TAIL_BYTES = 1024 * 1024
_MAX_SESSION_ID = 200

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # an invalid pattern is reported by `check_usage_pattern`


@cache
def _compiled(pattern: str) -> Any:
    # RE2: linear time in the output whatever the pattern (a MiB of log, at a run's end).
    return re2.compile("(?m)" + pattern, _OPTIONS)


def check_usage_pattern(pattern: str) -> str:
    """Raises ValueError if `pattern` is not an RE2 regex with a group to capture."""
    checked_pattern(pattern)  # as back-off patterns are checked
    if _compiled(pattern).groups < 1:
        raise ValueError(f"pattern {pattern!r} has no group: put the value in ( )")
    return pattern


def _check_keys(rules: dict[str, str]) -> dict[str, str]:
    for key, value in rules.items():
        if key not in KEYS:
            raise ValueError(f"unknown key {key!r}; known: {', '.join(KEYS)}")
        if not value:
            raise ValueError(f"{key}: give a path or a pattern")
    return rules


class UsageConfig(BaseModel):
    """`usage:` of an agent type: where its runs print what they spent."""

    model_config = ConfigDict(extra="forbid", strict=True, serialize_by_alias=True)

    json_paths: dict[str, str] = Field(default_factory=dict, alias="json")
    regex: dict[str, str] = Field(default_factory=dict)
    session_totals: list[str] = Field(default_factory=list)

    @field_validator("json_paths")
    @classmethod
    def _paths(cls, paths: dict[str, str]) -> dict[str, str]:
        return _check_keys(paths)

    @field_validator("regex")
    @classmethod
    def _patterns(cls, patterns: dict[str, str]) -> dict[str, str]:
        for key, pattern in _check_keys(patterns).items():
            try:
                check_usage_pattern(pattern)
            except ValueError as exc:
                raise ValueError(f"{key}: {exc}") from None
        return patterns

    @field_validator("session_totals")
    @classmethod
    def _totals(cls, keys: list[str]) -> list[str]:
        for key in keys:
            if key not in AMOUNTS:
                raise ValueError(f"unknown key {key!r}; known: {', '.join(AMOUNTS)}")
        return keys


@dataclass(frozen=True, slots=True)
class Reading:
    """What a run's output said it spent, its session id (None: not found), and the
    tool uses its agent was refused (one name per refusal)."""

    usage: Usage | None = None
    session_id: str | None = None
    denied: tuple[str, ...] = ()


def read_usage(rules: UsageConfig, text: str) -> Reading:
    """The values `rules` find in `text` (a `regex` rule wins over a `json` one for the
    same key). Never raises."""
    found: dict[str, Any] = {}
    if rules.json_paths:
        document = last_json_object(text)
        if document is not None:
            for key, path in rules.json_paths.items():
                found[key] = _at_path(document, path)
    for key, pattern in rules.regex.items():
        if key == "permission_denials":
            found[key] = [m.group(1) for m in _compiled(pattern).finditer(text)]
            continue
        match = None
        for match in _compiled(pattern).finditer(text):  # noqa: B007 - the last one counts
            pass
        if match is not None and match.group(1) is not None:
            found[key] = match.group(1)
    cost = _number(found.get("cost_usd"), float)
    tokens_in = _number(found.get("input_tokens"), int)
    tokens_out = _number(found.get("output_tokens"), int)
    usage = None
    if (cost, tokens_in, tokens_out) != (None, None, None):
        read = {"cost_usd": cost, "input_tokens": tokens_in, "output_tokens": tokens_out}
        totals = {key: read[key] for key in rules.session_totals if read[key] is not None}
        usage = Usage(cost, tokens_in, tokens_out, totals or None)
    session = found.get("session_id")
    session_id = None
    if isinstance(session, str | int) and not isinstance(session, bool):
        text_id = str(session).strip()
        if text_id and len(text_id) <= _MAX_SESSION_ID and text_id.isprintable():
            session_id = text_id
    return Reading(usage, session_id, _denied(found.get("permission_denials")))


# At most this many refusals are kept, each name at most this long: what an output
# prints is not trusted to be small.
MAX_DENIALS = 1000
_MAX_TOOL_NAME = 100


def _denied(value: Any) -> tuple[str, ...]:
    """The tools of a list of refusals: `{"tool_name": …}` objects (Claude Code's
    `permission_denials`) or names; `?` for one that names none."""
    if not isinstance(value, list):
        return ()
    names = []
    for item in value[:MAX_DENIALS]:
        name = item.get("tool_name") if isinstance(item, dict) else item
        text = str(name).strip() if isinstance(name, str | int) else ""
        ok = text and len(text) <= _MAX_TOOL_NAME and text.isprintable()
        names.append(text if ok else "?")
    return tuple(names)


def read_log(rules: UsageConfig, path: Path, terminal: bool = False) -> Reading:
    """`read_usage` over the last `TAIL_BYTES` of the log at `path` (nothing if there is
    no log), followed by the output its keeper dropped past the log's cap, if any (the
    last of it, in `N.tail` beside `N.log`): the result an agent prints last is read even
    when its log was full. The log of a run in a `terminal` (an interactive one) is read
    without its escape sequences, as `logs` shows it."""
    try:
        with path.open("rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(0, log.tell() - TAIL_BYTES))
            data = log.read()
    except OSError:
        return Reading()
    with contextlib.suppress(OSError):
        # It may start inside a line: a reader takes whole lines or the last object.
        data += b"\n" + path.with_suffix(".tail").read_bytes()
    if terminal:
        data = plain_text(data)
    return read_usage(rules, data.decode("utf-8", errors="replace"))


def last_json_object(text: str) -> dict[str, Any] | None:
    """The last JSON object in `text` that starts a line: the last of a stream of JSON
    lines, or a pretty-printed one (its inner lines are indented)."""
    decoder = json.JSONDecoder()
    starts = [0] if text.startswith("{") else []
    starts += [m.start() + 1 for m in re.finditer(r"\n\{", text)]
    for start in reversed(starts):
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def _at_path(document: dict[str, Any], path: str) -> Any:
    value: Any = document
    for part in path.split("."):
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


# The largest amount read (2**53: exact as a float, and within a database's BIGINT): an
# output that prints more is not believed, and must not fail the report that carries it.
MAX_AMOUNT = float(2**53)


def _number(value: Any, kind: type[float] | type[int]) -> Any:
    """A number as printed (`1,234`, `$0.12`, 12 or 0.5 in JSON), as `kind`; else None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        cleaned = value.strip().replace(",", "").replace("_", "").removeprefix("$")
        try:
            number = float(cleaned)
        except ValueError:
            return None
    else:
        return None
    if not math.isfinite(number) or number < 0 or number > MAX_AMOUNT:
        return None
    return int(number) if kind is int else number
