"""The store: domain verbs, each one transaction that checks the transition and logs
events. Backends (SQLite, PostgreSQL) supply the connector (`StoreCore`): a connection,
a serialized write transaction and change notification. The verbs come in sibling groups
over it, each in its own module: reads (`reads.py`), submit (`submit.py`), steering of
one task (`steering.py`) and of many (`bulk.py`), the claim (`claim.py`) and the rest of
a run's life (`runs.py`), settings (`settings.py`), the event log (`events.py`), node
bookkeeping (`nodes.py`), the dashboard's samples (`samples.py`), the functions nodes
serve (`serving.py`), the rates and budgets slotline.yaml owns (`declared.py`),
recurring schedules (`schedules.py`) and the worktrees of isolated runs
(`worktrees.py`), hooks' delivery (`webhooks.py`), stalled runs (`stalls.py`) and
follow-up tasks (`followups.py`). No group calls another's methods (a verb made of
several groups' verbs, together in one transaction, is the assembled `Store`'s own): the
steps they share are functions over the caller's transaction (`tasks.py`, `deps.py`,
`events.py`, and the steering steps).
"""

from __future__ import annotations

from slotline.store.backoff import BackoffVerbs
from slotline.store.budgets import BudgetVerbs
from slotline.store.bulk import BulkVerbs
from slotline.store.claim import ClaimVerbs
from slotline.store.declared import DeclaredVerbs
from slotline.store.events import EventVerbs
from slotline.store.fairness import FairnessVerbs
from slotline.store.followups import FollowupVerbs
from slotline.store.nodes import NodeVerbs
from slotline.store.rates import RateVerbs
from slotline.store.reads import ReadVerbs
from slotline.store.runs import RunVerbs
from slotline.store.samples import SampleVerbs
from slotline.store.schedules import ScheduleVerbs
from slotline.store.serving import ServingVerbs
from slotline.store.settings import Settings, SettingsChange, SettingsVerbs, read_settings
from slotline.store.stalls import StallVerbs
from slotline.store.steering import SteeringVerbs
from slotline.store.submit import SubmitVerbs
from slotline.store.webhooks import WebhookVerbs
from slotline.store.worktrees import WorktreeVerbs


class Store(
    ReadVerbs,
    SubmitVerbs,
    SteeringVerbs,
    BulkVerbs,
    ClaimVerbs,
    RunVerbs,
    SettingsVerbs,
    EventVerbs,
    NodeVerbs,
    SampleVerbs,
    ServingVerbs,
    RateVerbs,
    BackoffVerbs,
    BudgetVerbs,
    DeclaredVerbs,
    FairnessVerbs,
    ScheduleVerbs,
    WorktreeVerbs,
    WebhookVerbs,
    StallVerbs,
    FollowupVerbs,
):
    """Every change to slotline's state goes through one of these verbs."""

    def apply_settings(self, change: SettingsChange) -> Settings:
        """Make every change of `change` in one transaction, by the verbs each part names
        (each checks its part as it does alone): all of them, or none if one is refused.
        Returns the settings as they are then.

        Raises:
            InvalidInput: a part is refused (nothing is changed).
        """
        with self._together() as tx:
            for name, value in change.settings.items():
                self.set_setting(name, value)
            for key, value, most in change.limits:
                self.set_limit(key, value, most)
            if change.exempt_agents is not None:
                self.set_exempt_agents(list(change.exempt_agents))
            if change.declared is not None:
                self.sync_declared(*change.declared)
            for key, value, starts, period in change.rates:
                self.set_rate(key, value, starts, period)
            for key, value, amount, period, unit in change.budgets:
                self.set_budget(key, value, amount, period, unit)
            if change.fairness_given:
                self.set_fairness(*(change.fairness or (None,)))
            for agent, rule in change.backoff:
                self.set_backoff(agent, rule)
            return read_settings(tx).copy()
