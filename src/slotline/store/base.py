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
follow-up tasks (`followups.py`). No group calls another's methods: the steps they share
are functions over the caller's transaction (`tasks.py`, `deps.py`, `events.py`, and the
steering steps).
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
from slotline.store.settings import SettingsVerbs
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
