"""Provider back-off as pure values: when an agent type's provider says "too many"
(a configured exit code, or a pattern in the run's output), lower the type's concurrency
and hold its next starts for a growing, jittered delay; step back up as runs succeed.
When the pattern's `reset` group captured when the limit resets (pacing/resets.py),
the hold lasts until then instead, and one run probes before the others follow.

The store keeps one `Throttle` per agent type backing off (table agent_backoff) and
calls `on_throttled` / `on_success` inside the finish (or claim) transaction that commits
the run's outcome; the policy reads the throttles through `limits_under` and `holds`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from functools import cache
from typing import Any, Literal

from slotline.bounds import MAX_COUNT, MAX_SECONDS, Range
from slotline.errors import InvalidInput
from slotline.limits import Limit
from slotline.scheduler import policy


@dataclass(frozen=True, slots=True)
class BackoffRule:
    """How an agent type backs off: which failures mean "rate limited" and how hard."""

    exit_codes: tuple[int, ...] = ()
    pattern: str | None = None
    # The first hold, and its ceiling; each further throttled run doubles it (x0.5-1.5).
    delay: float = 30.0
    max_delay: float = 900.0
    # The concurrency cap never goes below this.
    min_concurrent: int = 1
    # Successful runs (started after the last throttle) per step back up.
    recover_after: int = 1
    # A throttled run goes back in line (its attempt not counted) this many times at
    # most; then it fails as any run would.
    max_requeues: int = 5

    def matches(self, exit_code: int | None, output: str | None) -> bool:
        """Whether a failed run's exit code or output says the provider is throttling."""
        return self.refusal(exit_code, output) is not None

    def refusal(self, exit_code: int | None, output: str | None) -> str | None:
        """What says the provider refused a failed run: `exit code N` when the code is one
        of the rule's, else the line of `output` with the pattern's last match (the
        provider's latest word), trimmed around the match; None if neither matched."""
        if exit_code is not None and exit_code in self.exit_codes:
            return f"exit code {exit_code}"
        if not self.pattern or not output:
            return None
        last = None
        for match in _compiled(self.pattern).finditer(output):
            last = match
        if last is None:
            return None
        return _line_around(output, last.start(), last.end())

    def reset_text(self, output: str | None) -> str | None:
        """What the pattern's `reset` group captured in its last match of `output` that
        captured something (the provider's latest word), if the pattern has that group."""
        if not self.pattern or not output:
            return None
        compiled = _compiled(self.pattern)
        if "reset" not in compiled.groupindex:
            return None
        found = None
        for match in compiled.finditer(output):
            found = match.group("reset") or found
        return found

    def to_dict(self) -> dict[str, Any]:
        return {
            "exit_codes": list(self.exit_codes),
            "pattern": self.pattern,
            "delay": self.delay,
            "max_delay": self.max_delay,
            "min_concurrent": self.min_concurrent,
            "recover_after": self.recover_after,
            "max_requeues": self.max_requeues,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BackoffRule:
        """A rule from its JSON (as stored, or given over HTTP), checked.

        Raises:
            InvalidInput: an unknown field, a bad regex, a number out of range.
        """
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise InvalidInput(f"backoff: unknown field(s) {', '.join(sorted(unknown))}")
        codes = data.get("exit_codes") or ()
        if isinstance(codes, int | str):
            codes = (codes,)
        try:
            exit_codes = tuple(sorted({int(c) for c in codes}))
        except (TypeError, ValueError):
            raise InvalidInput(
                f"backoff: exit_codes must be whole numbers, not {codes!r}"
            ) from None
        pattern = data.get("pattern") or None
        if pattern is not None:
            check_pattern(str(pattern))
        if not exit_codes and pattern is None:
            raise InvalidInput("backoff: give exit_codes, a pattern, or both")
        rule = cls(
            exit_codes=exit_codes,
            pattern=None if pattern is None else str(pattern),
            delay=_number(data, "delay", 30.0, 0.001, MAX_SECONDS),
            max_delay=_number(data, "max_delay", 900.0, 0.001, MAX_SECONDS),
            min_concurrent=int(_number(data, "min_concurrent", 1, 1, MAX_COUNT)),
            recover_after=int(_number(data, "recover_after", 1, 1, MAX_COUNT)),
            max_requeues=int(_number(data, "max_requeues", 5, 0, 1000)),
        )
        if rule.max_delay < rule.delay:
            raise InvalidInput("backoff: max_delay must not be less than delay")
        return rule


# How much of a matched line a back-off's reason keeps: a JSON result line runs to
# kilobytes, and the reason shows in `status` and in events.
REASON_CHARS = 160


def _line_around(text: str, start: int, end: int) -> str:
    """The line of `text` holding [start, end), cut to REASON_CHARS around the match."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    if line_end - line_start <= REASON_CHARS:
        return text[line_start:line_end].strip()
    margin = max(0, (REASON_CHARS - (end - start)) // 2)
    first = max(line_start, start - margin)
    last = min(line_end, max(end, first + REASON_CHARS))
    first = max(line_start, min(first, last - REASON_CHARS))
    head = "…" if first > line_start else ""
    tail = "…" if last < line_end else ""
    return head + text[first:last].strip() + tail


def _number(data: Mapping[str, Any], name: str, default: float, lo: float, hi: float) -> float:
    value = data.get(name, default)
    if isinstance(value, str):  # yaml and JSON give numbers; a string is a mistake
        raise InvalidInput(f"backoff: {name} must be a number, got {value!r}")
    unit: Literal["", "seconds"] = "seconds" if "delay" in name else ""
    return float(Range(lo, hi, unit=unit).check(f"backoff: {name}", value))


def check_pattern(pattern: str) -> str:
    """Raises InvalidInput if `pattern` is not a regular expression RE2 takes."""
    import re2  # type: ignore[import-untyped]

    try:
        _compiled(pattern)
    except re2.error as exc:
        detail = exc.args[0].decode(errors="replace") if exc.args else "invalid"
        raise InvalidInput(
            f"backoff: pattern {pattern!r} is not a valid regex: {detail} (RE2 syntax: no "
            "backreferences or lookarounds)"
        ) from None
    return pattern


# RE2 matches in time linear in the text, whatever the pattern: a pattern is matched
# against a failed run's output inside the transaction that commits its outcome, under
# the store's write lock, where a backtracking regex (Python's `re`) could take minutes.
# Imported on first use: a command that matches no output (`slotline status`) skips it.
@cache
def _compiled(pattern: str) -> Any:
    import re2

    options = re2.Options()
    options.log_errors = False  # an invalid pattern is reported by check_pattern, not on stderr
    return re2.compile("(?m)" + pattern, options)


@dataclass(frozen=True, slots=True)
class Throttle:
    """An agent type backing off: at most `cap` running, none started before
    `not_before`; `level` steps below normal, `successes` since the last step."""

    agent: str
    level: int
    cap: int
    not_before: float
    successes: int
    since: float
    reason: str | None = None
    # When the provider said its limit resets (a pattern's `reset` group): the hold
    # lasts until then, and then one run probes (cap 1) before the others follow.
    reset_at: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "level": self.level,
            "cap": self.cap,
            "not_before": self.not_before,
            "successes": self.successes,
            "since": self.since,
            "reason": self.reason,
            "reset_at": self.reset_at,
        }


def normal_cap(limits: policy.Limits, agent: str) -> int:
    """The concurrency an agent type has when not backing off: its own limit, else the
    global one (which a type outside the global pool is not held to)."""
    own = limits.for_value("agent", agent)
    if agent in limits.exempt_agents:
        return own if own is not None else limits.max_concurrent
    return limits.max_concurrent if own is None else min(own, limits.max_concurrent)


def cap_at(rule: BackoffRule, normal: int, level: int) -> int:
    """The cap `level` steps down: halved per step, never below `min_concurrent`."""
    return max(rule.min_concurrent, min(normal, normal >> level))


def on_throttled(
    rule: BackoffRule,
    current: Throttle | None,
    agent: str,
    normal: int,
    started_at: float,
    now: float,
    jitter: float,
    reason: str | None,
    reset_at: float | None = None,
) -> Throttle:
    """The throttle after a run of `agent` (started at `started_at`) was refused by its
    provider. A run started before the last step down was already in flight when it was
    taken: it does not step down again (but a later reset it was told extends the hold).
    `jitter` is in [0.5, 1.5].

    With `reset_at` (when the provider said its limit resets), no start before then, and
    then a cap of 1: one run probes, and its success ends the back-off (`on_success`).
    A reset time already past backs off as without one."""
    if current is not None and started_at < current.since:
        if reset_at is not None and reset_at > current.not_before:
            return replace(current, not_before=reset_at, reset_at=reset_at, cap=1)
        return current
    level = (current.level if current is not None else 0) + 1
    if reset_at is not None and reset_at > now:
        return Throttle(agent, level, 1, reset_at, 0, now, reason, reset_at)
    # No reset time, or one already past (the provider still refuses: its clock, or its
    # word, is off): back off blindly, so that refused probes do not follow each other.
    hold = min(rule.max_delay, rule.delay * 2 ** (level - 1)) * jitter
    return Throttle(agent, level, cap_at(rule, normal, level), now + hold, 0, now, reason)


def on_success(
    rule: BackoffRule, current: Throttle, normal: int, started_at: float
) -> Throttle | None:
    """The throttle after a run of its agent type succeeded: one step back up every
    `recover_after` successes of runs started since the last step; None once back to
    normal. A run started before the throttle says nothing of the provider now."""
    if started_at < current.since:
        return current
    if current.reset_at is not None:
        return None  # the probe after the reset went through: the limit is lifted
    successes = current.successes + 1
    if successes < rule.recover_after:
        return replace(current, successes=successes)
    level = current.level - 1
    if level <= 0:
        return None
    return replace(current, level=level, cap=cap_at(rule, normal, level), successes=0)


def limits_under(limits: policy.Limits, throttles: Iterable[Throttle]) -> policy.Limits:
    """`limits` with each throttled agent type's cap as a named limit (the lower wins)."""
    extra = []
    for throttle in throttles:
        own = limits.for_value("agent", throttle.agent)
        cap = throttle.cap if own is None else min(own, throttle.cap)
        extra.append(Limit("agent", throttle.agent, cap))
    if not extra:
        return limits
    named = {(lim.key, lim.value) for lim in extra}
    kept = tuple(lim for lim in limits.per_key if (lim.key, lim.value) not in named)
    return replace(limits, per_key=(*kept, *extra))


def holds(throttles: Iterable[Throttle]) -> dict[str, float]:
    """The instant before which no task of each throttled agent type starts."""
    return {t.agent: t.not_before for t in throttles}


def checked_pattern(pattern: str | None) -> str | None:
    """A pattern matched against a run's output (back-off, stall): RE2 syntax, as a
    configuration check (ValueError, which the loader turns into file, line and key)."""
    if pattern is not None:
        try:
            check_pattern(pattern)
        except InvalidInput as exc:
            raise ValueError(str(exc).removeprefix("backoff: ")) from None
    return pattern
