"""The claim: a node's turn of its loop in one transaction. It commits the outcomes and
starts the node reports, expires overdue tasks, and starts every task that fits under
the limits, deciding under the store's write lock so concurrent nodes never over-fill
one."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from slotline.errors import SlotlineError, StoreError
from slotline.models import KillRequest, Kind, Task
from slotline.pacing import backoff
from slotline.scheduler import policy
from slotline.scheduler.fairness import Fairness
from slotline.stops import StopRequest
from slotline.store import backoff as provider
from slotline.store import budgets, estimates, head_claim, plain_end, rates, read_ahead, windows
from slotline.store import fairness as fair
from slotline.store.core import StoreCore
from slotline.store.queries import FIRST_PAGE, Tx
from slotline.store.rows import task_from_row
from slotline.store.runs import Report, StartReport, expire, record
from slotline.store.settings import LEASE_SECONDS, read_settings
from slotline.store.starts import Claim, start
from slotline.store.statements import Read
from slotline.store.tasks import count_of

COMMAND_KINDS = frozenset({"command", "callable"})


@dataclass(frozen=True, slots=True)
class ClaimResult:
    claims: list[Claim] = field(default_factory=list)
    # When to look at the queue again even if nothing changes (backoff ends, TTL passes,
    # run times wait to be written: `windows`).
    next_wake: float | None = None
    # The store's clock at the claim: `next_wake` is on that clock, not the node's.
    now: float | None = None
    # For each report handed to the claim, in order: None once committed, or why it was
    # refused (as `finish` would have raised it).
    finished: list[SlotlineError | None] = field(default_factory=list)
    # The same for each start report handed to the claim.
    recorded: list[SlotlineError | None] = field(default_factory=list)
    # The claiming node's running attempts that someone asked to stop.
    kills: list[KillRequest] = field(default_factory=list)


class ClaimVerbs(StoreCore):
    """How a node claims work and learns which of its runs to stop."""

    # The run times the store's claims measured and have not written (set by the store).
    _run_times: windows.Pending

    def claim(
        self,
        node_id: str,
        now: float | None = None,
        kinds: frozenset[str] = COMMAND_KINDS,
        lease: float = LEASE_SECONDS,
        hold: bool = False,
        limit: int | None = None,
        slots: int | None = None,
        *,
        started: Sequence[StartReport] = (),
        finished: Sequence[Report] = (),
        log_dir: Path | None = None,
        watcher: str | None = None,
        functions: frozenset[str] | None = None,
    ) -> ClaimResult:
        """Commit the outcomes a node reports, expire overdue tasks and start every task
        that fits, in one transaction (one commit and one wake-up for a whole turn of
        the node's loop).

        The limit check and the queued→running change happen under the store's write
        lock, so concurrent nodes can never over-fill a limit. The claim reads the
        resource guard's verdict from `node_id`'s own row (`set_pressure`): while it
        holds, only bumped tasks start; its adaptive limit lowers max_concurrent. `hold`
        and `limit` add a caller's own (a node whose disk is full holds; a test or an
        external executor claims at most `limit`); `slots` caps the runs of `node_id`
        (this node's capacity, beside the global and per-key limits; "start now"
        included).

        Args:
            started: starts of commands to record first, each as `record_start` would
                and each on its own, like `finished`.
            finished: outcomes to commit first, each as `finish` would and each on its
                own: a refused report changes nothing and is returned as its error, the
                others are committed. The slots they free are filled by this claim.
            log_dir: the node's log folder: a callable task starts with its claim, so its
                start (and log file) is recorded here, not by a later `record_start`.
            watcher: the id of the claiming node's own watcher, which the commit does not
                wake: the node knows what its claim changed (the result says when to
                look again), and waking it would only cost it an empty claim.
            functions: the function names the node runs: it claims no other callable task
                (None: any callable task, if `kinds` has callables).
        """
        once = functools.partial(
            self._claim_once, node_id, now, kinds, lease, hold, limit, slots,
            started, finished, log_dir, watcher, functions,
        )  # fmt: skip
        try:
            return once(careful=False)
        except _Refused:  # rare: a report came too late (see `_apply`)
            pass  # (made again outside the handler: its errors are not chained to this)
        return once(careful=True)

    def _claim_once(
        self,
        node_id: str,
        now: float | None,
        kinds: frozenset[str],
        lease: float,
        hold: bool,
        limit: int | None,
        slots: int | None,
        started: Sequence[StartReport],
        finished: Sequence[Report],
        log_dir: Path | None,
        watcher: str | None,
        functions: frozenset[str] | None,
        *,
        careful: bool,
    ) -> ClaimResult:
        """`claim` in one transaction, its reports applied as `_apply` says."""
        reports: list[Report | StartReport] = [*started, *finished]
        # What it measured joins the pending run times once it committed: its own commit;
        # and a refused report rolls it back whole (`_apply`).
        if self._joins_write():
            raise RuntimeError("a claim commits on its own, not inside another write")
        # A node's claim (with its watcher) leaves its run times to a later claim, which its
        # next wake-up makes; a claim of another caller writes them at once.
        grouped = watcher is not None
        claiming = windows.Claiming(self._run_times)
        tx: Tx | None = None
        try:
            ahead = read_ahead.reads(reports) if self.reads_ahead else ()
            with self._write(ahead=ahead) as tx:
                # The clock is read under the write lock, so that recorded starts and ends
                # follow commit order: a slot is never seen taken before it was freed.
                now = tx.now() if now is None else now
                runs: list[tuple[str | None, float]] = []
                steps: list[Callable[[], object]] = [
                    functools.partial(record, tx, report) for report in started
                ]
                steps += [
                    functools.partial(plain_end.end, tx, report, now, runs) for report in finished
                ]
                with read_ahead.read_ahead(tx, reports):
                    refusals = _apply(tx, steps, careful)
                recorded, outcomes = refusals[: len(started)], refusals[len(started) :]
                # (Kept while the configuration stays: no statement, no round trip.)
                settings, throttles = read_settings(tx), provider.throttles(tx)
                likely = head_claim.may_be_common(settings, throttles)
                if self.reads_ahead:  # the run-time windows it may write, when they are due
                    due = self._run_times.due(now, bool(runs)) or not grouped
                    adding = [estimates.ALL, estimates.GAP, *windows.measured(runs, None)]
                    scopes = self._run_times.scopes(adding) if due else []
                    counted = slots is not None
                    tx.prefetch(
                        _snapshot_reads(node_id, now, windows.reads(scopes, now), counted, likely)
                    )
                # The next queue-TTL deadline says whether any has lapsed: the tasks to
                # expire are read only then (most claims: no task has a TTL).
                deadline = _deadline(tx)
                lapsed = deadline is not None and deadline <= now
                expired = tx.rows("tasks_ttl_due", now=now) if lapsed else []
                if expired:  # what was read ahead has them as they were
                    tx.forget_preloaded()
                for row in expired:
                    expire(tx, task_from_row(row), now)
                limits = settings.limits
                guard = tx.rows("node_get", id=node_id)  # the resource guard's verdict, if any
                if guard and guard[0]["pressure_hold"]:
                    hold = True
                for cap in (limit, guard[0]["pressure_limit"] if guard else None):
                    if cap is not None and cap < limits.max_concurrent:
                        limits = replace(limits, max_concurrent=cap)
                limits = backoff.limits_under(limits, throttles)
                book = rates.load_book(tx, settings.rates, now) if settings.rates else None
                spend = budgets.load_book(tx, settings.budgets, now)
                freed = budgets.sync_reached(tx, spend, now) if spend or settings.budgets else []
                fairness = Fairness.from_setting(settings["fairness"])
                passes = fair.passes(tx, fairness)
                node_free = None
                if slots is not None:
                    node_free = slots - count_of(tx, "count_running_on_node", node_id=node_id)
                decided = None
                if likely and not hold:  # only the global limit, priorities and boosts decide
                    runnable = (kinds, functions)
                    decided = head_claim.decide(tx, limits.max_concurrent, now, runnable, node_free)
                if decided is None:
                    snapshot = policy.Snapshot(
                        running=[
                            t
                            for r in tx.rows("tasks_running")
                            if (t := task_from_row(r)).holds_slot
                        ],
                        queued=(task_from_row(r) for r in tx.iter_rows("tasks_queued_in_order")),
                        start_now=[task_from_row(r) for r in tx.rows("tasks_start_now")],
                        limits=limits,
                        now=now,
                        paused=bool(settings["paused"]) or hold,
                        aging_interval=settings["aging_interval"],
                        rates=book,
                        holds=backoff.holds(throttles),
                        fairness=fairness,
                        passes=passes,
                        budgets=spend,
                    )
                    decided = _plan(snapshot, kinds, functions)
                    tx.forget_preloaded(_SNAPSHOT)  # what the plan did not take
                # The first starts of a plan are what a plan with fewer slots starts.
                starts = decided.start if node_free is None else decided.start[: max(0, node_free)]
                claims = [start(tx, s, node_id, now, lease, log_dir) for s in starts]
                if book is not None:
                    rates.record_starts(tx, book, [c.task for c in claims], now)
                if fairness is not None:
                    turns = [(c.task, s.turn) for c, s in zip(claims, starts, strict=True)]
                    fair.charge(tx, fairness, passes, turns, now)
                # The line is full again: these claims took slots a finish freed; how long
                # after it is the dispatch gap ETAs add to every run.
                gap = None
                if claims and decided.running + len(claims) >= limits.max_concurrent:
                    ended_now = sum(
                        refusal is None and report.ended_ago is None
                        for report, refusal in zip(finished, outcomes, strict=True)
                    )
                    gap = windows.gap(tx, [c.task for c in claims], now, ended_now)
                samples = windows.measured(runs, gap)
                # Written with the first claim a second after the last write, and with one
                # that starts nothing (the line ran dry or is full: no claim may come for
                # a while), or by a caller whose claims are not a node's.
                if samples or self._run_times.next_write() is not None:
                    if not grouped or not claims or self._run_times.due(now, bool(samples)):
                        claiming.write(tx, samples, now)
                    else:
                        claiming.keep(samples)
                tx.notify = bool(claims or expired or outcomes.count(None) or recorded.count(None))
                tx.quiet_for = watcher
                # No node could start a task after this commit (by the store's limit, not
                # this node's guard): the others' claims would find nothing.
                tx.line_full = decided.closed_by(settings.limits, [c.task for c in claims])
                deadline = _next_deadline(tx, claims, deadline, bool(expired))
                wakes = [decided.next_wake, deadline, *freed, claiming.next_write()]
                kills = _kill_requests(tx, node_id)
                tx.forget_preloaded()  # what it did not need
                wake = min((w for w in wakes if w is not None), default=None)
                result = ClaimResult(claims, wake, now, outcomes, recorded, kills)
        except BaseException:
            claiming.settle(committed=tx is not None and tx.committed)
            raise
        claiming.settle(committed=True)
        return result

    def _write_run_times(self) -> None:
        """Write the run times the claims left to a later claim (as the store closes: a
        node that stops mid-drain keeps them); a store that cannot write loses them."""
        if self._run_times.next_write() is None:
            return
        claiming = windows.Claiming(self._run_times)
        try:
            with self._write() as tx:
                claiming.write(tx, {}, tx.now())
                tx.notify = False
        except StoreError:
            claiming.settle(committed=False)
            return
        claiming.settle(committed=True)

    def kill_requests(self, node_id: str) -> list[KillRequest]:
        """Running attempts of `node_id` someone asked to stop (cancel, terminate, restart)."""
        with self._transaction(write=False) as tx:
            return _kill_requests(tx, node_id)

    def between_claims(self, node_id: str) -> ClaimResult:
        """What a node whose slots are all taken needs instead of a claim, in a read: its
        runs someone asked to stop, and when the next queue TTL lapses (`next_wake`)."""
        with self._transaction(write=False) as tx:
            kills = _kill_requests(tx, node_id)
            return ClaimResult(next_wake=_deadline(tx), now=tx.now(), kills=kills)


class _Refused(Exception):
    """A claim's report was refused while its reports were applied without savepoints:
    the claim's transaction is rolled back and the claim made again, carefully."""


def _apply(
    tx: Tx, steps: Sequence[Callable[[], object]], careful: bool
) -> list[SlotlineError | None]:
    """Apply a claim's reports, a step each: a refusal undoes only its own step, and is
    returned in its place. A refusal is rare (a report that came too late), so the steps
    first run as they are, with no savepoint (two statements fewer per claim); a refusal
    then rolls the whole claim back (`_Refused`), which is made again `careful`: each
    step in a savepoint of its own."""
    if careful:
        return [_part(tx, step) for step in steps]
    try:
        for step in steps:
            step()
    except StoreError:
        raise
    except SlotlineError as exc:
        raise _Refused from exc
    return [None] * len(steps)


def _part(tx: Tx, step: Callable[[], object]) -> SlotlineError | None:
    try:
        with tx.part():
            step()
    except StoreError:
        raise
    except SlotlineError as exc:
        return exc
    return None


# The reads of the line a claim decides on, read ahead together once its reports are in.
_SNAPSHOT = ("tasks_ttl_due", "tasks_running", "tasks_start_now", "tasks_queued_in_order")


def _snapshot_reads(
    node_id: str,
    now: float,
    run_times: Sequence[Read],
    counted: bool,
    common: bool,
) -> list[Read]:
    """What a claim reads once its reports are in, all in one round trip: the tasks due
    to expire and the line as it stands (its first page); for its answer, the next
    queue-TTL deadline and the node's runs to stop (which its starts do not change, but
    for a start of a task with a TTL: `_next_deadline`); the windows of run times it
    writes (`run_times`: `windows.reads`, when they are due); and, if `counted`
    (the node has `slots`), the count of the node's runs; and the node's own row, for
    its resource guard's verdict. The line is read as the plan reads it, or, when the
    claim will likely take the common case (`common`), as that reads it."""
    line = head_claim.reads() if common else [
        Read("tasks_running", by_index=True),
        Read("tasks_start_now", by_index=True),
        Read("tasks_queued_in_order", {"limit": FIRST_PAGE, "offset": 0}, by_index=True),
    ]  # fmt: skip
    reads = [
        Read("tasks_ttl_due", {"now": now}, by_index=True),
        *line,
        Read("next_ttl_deadline", by_index=True),
        Read("tasks_kill_requested", {"node_id": node_id}, by_index=True),
        Read("node_get", {"id": node_id}, by_index=True),
        *(replace(read, by_index=True) for read in run_times),
    ]
    if counted:
        reads.append(Read("count_running_on_node", {"node_id": node_id}, by_index=True))
    return reads


def _next_deadline(
    tx: Tx, claims: Sequence[Claim], read: float | None, expired: bool
) -> float | None:
    """When the next queue TTL lapses: the deadline `read` after the claim's reports and
    before it expired tasks and started others, read again if it `expired` some or
    started a task with a queue TTL (either may have been the next to lapse)."""
    if not expired and all(c.task.queue_ttl is None for c in claims):
        return read
    tx.forget_preloaded(["next_ttl_deadline"])
    return _deadline(tx)


def _deadline(tx: Tx) -> float | None:
    row = tx.one("next_ttl_deadline")
    return None if row is None or row["at"] is None else float(row["at"])


def _plan(
    snapshot: policy.Snapshot[Task], kinds: frozenset[str], functions: frozenset[str] | None
) -> head_claim.Decided:
    """What `policy.plan` decides on `snapshot` for a node running `kinds` and `functions`."""
    plan = policy.plan(snapshot, runnable=lambda t: _runnable(t, kinds, functions))
    running = snapshot.running
    return head_claim.Decided(plan.start, plan.next_wake, len(running), running, snapshot.start_now)


def _runnable(task: Task, kinds: frozenset[str], functions: frozenset[str] | None) -> bool:
    if task.kind is Kind.CALLABLE and functions is not None:
        return task.callable in functions
    return task.kind.value in kinds


def _kill_requests(tx: Tx, node_id: str) -> list[KillRequest]:
    return [
        KillRequest(r["task_id"], r["attempt_id"], r["pid"], StopRequest.read(r["kill_request"]))
        for r in tx.rows("tasks_kill_requested", node_id=node_id)
    ]
