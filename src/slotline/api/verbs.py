"""The queue's verbs, declared once: each verb's name and arguments, and how each face of
the queue spells it or why it lacks it.

The faces are the CLI's `Backend` protocol (client/backend.py, which `Store` and
`SlotlineClient` both satisfy), the HTTP client `SlotlineClient` (client/http.py), the
async `Queue` (api/queue.py), `SyncQueue` (api/sync.py, every verb a `Queue` coroutine
run to its end) and the MCP tools (mcp/tools.py). `tests/unit/test_verb_faces.py` checks
each face against this list: a face that lacks a verb without a reason here, has a verb
not declared here, or names its arguments otherwise, fails it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

FACES = ("backend", "client", "queue", "sync", "mcp")

# How the MCP tools spell an argument every face shares (a model reads `task_id`).
MCP_SPELLING: Mapping[str, str] = {"ref": "task_id"}

# Members of a face that are not verbs of the queue: the face's own plumbing.
PLUMBING: Mapping[str, frozenset[str]] = {
    "backend": frozenset({"url", "close", "watcher"}),
    "client": frozenset({"close", "call", "async_http", "watcher"}),
    "queue": frozenset({"close", "node"}),
    "sync": frozenset({"close", "node", "run"}),
    "mcp": frozenset(),
}

OPERATOR = "an operator's verb: a supervising agent submits, reads and steers its tasks"
NOT_CLI = "the CLI reads this from the store or the server directly, not through Backend"
HTTP_ONLY = "a read of the server (its files, its metrics): the Python API has the store"
STREAMS = "a stream: the CLI and MCP follow with watcher() and events"


@dataclass(frozen=True)
class Verb:
    """One verb of the queue.

    Attributes:
        name: the verb as most faces spell it.
        arguments: its arguments, in order, as most faces name them.
        spelled: a face that names the verb otherwise (face -> its name).
        omitted: a face that lacks the verb (face -> why).
        differs: a face that takes other arguments (face -> (its arguments, why)).
    """

    name: str
    arguments: tuple[str, ...] = ()
    spelled: Mapping[str, str] = field(default_factory=dict)
    omitted: Mapping[str, str] = field(default_factory=dict)
    differs: Mapping[str, tuple[tuple[str, ...], str]] = field(default_factory=dict)


def _no_mcp(reason: str = OPERATOR) -> dict[str, str]:
    return {"mcp": reason}


_PYTHON_HAS_STORE = {"queue": HTTP_ONLY, "sync": HTTP_ONLY}
_SCHEDULES = {"backend": NOT_CLI, "mcp": OPERATOR}

VERBS: tuple[Verb, ...] = (
    # Reading.
    Verb("get", ("ref",), spelled={"mcp": "get_task"}),
    Verb(
        "list_tasks",
        ("status", "limit"),
        spelled={"queue": "list", "sync": "list"},
        omitted=_no_mcp("MCP lists a page at a time (list_tasks is the `page` verb there)"),
        differs={
            "client": (("status", "limit", "filters"), "also filter keywords (agent, label…)"),
            "queue": (("status",), "at most 10,000 tasks, as documented"),
            "sync": (("status",), "at most 10,000 tasks, as documented"),
        },
    ),
    Verb(
        "list_page",
        ("query",),
        spelled={"queue": "page", "sync": "page", "mcp": "list_tasks"},
        differs={
            "mcp": (
                ("status", "agent", "parent", "limit", "offset", "after"),
                "a model gives plain fields, not a ListQuery",
            ),
            "queue": (("query", "fields"), "ListQuery's fields as keywords, as before it"),
            "sync": (("query", "fields"), "ListQuery's fields as keywords, as before it"),
        },
    ),
    # The head of the line (`limit` tasks, STATUS_HEAD unless given) and `queued_total`;
    # the whole line only with `all`.
    Verb(
        "status",
        ("limit", "all"),
        spelled={"mcp": "queue_status"},
        differs={
            "client": (("mine", "root", "limit", "all"), "the server also answers a caller's own"),
            "mcp": (
                (),
                "the line's length and NEXT UP, never the line (a model reads its own tasks, "
                "as its token scopes them)",
            ),
        },
    ),
    Verb("events", ("since", "limit"), omitted=_no_mcp(STREAMS)),
    Verb("follow", ("since",), omitted={"backend": STREAMS, "mcp": STREAMS}),
    Verb("last_seq", omitted={**_PYTHON_HAS_STORE, "mcp": STREAMS}),
    Verb("settings", omitted=_no_mcp()),
    Verb("counts", omitted={**_PYTHON_HAS_STORE, "mcp": OPERATOR}),
    Verb("stats", omitted={"backend": NOT_CLI, **_PYTHON_HAS_STORE, "mcp": OPERATOR}),
    Verb("export", omitted={"backend": NOT_CLI, **_PYTHON_HAS_STORE, "mcp": OPERATOR}),
    Verb("config", omitted={"backend": NOT_CLI, **_PYTHON_HAS_STORE, "mcp": OPERATOR}),
    Verb("notify_log", ("limit",), omitted={"backend": NOT_CLI, **_PYTHON_HAS_STORE, **_no_mcp()}),
    Verb(
        "log",
        ("ref", "attempt"),
        spelled={"mcp": "task_log"},
        omitted={"backend": NOT_CLI, **_PYTHON_HAS_STORE},
        differs={"mcp": (("ref", "max_bytes"), "the last bytes of the last attempt's log")},
    ),
    Verb(
        "follow_log",
        ("ref", "attempt"),
        omitted={"backend": NOT_CLI, **_PYTHON_HAS_STORE, "mcp": STREAMS},
    ),
    Verb(
        "wait",
        ("ref", "timeout"),
        spelled={"mcp": "wait_for_task"},
        omitted={
            "backend": "the CLI waits with watcher() and get (submit --wait)",
            "client": "waiting is watcher() and get",
        },
    ),
    Verb(
        "result",
        ("ref", "timeout"),
        omitted={
            "backend": "a callable's return value is the Python API's",
            "client": "a callable's return value is the Python API's",
            "mcp": "a callable's return value is the Python API's",
        },
    ),
    # Submitting.
    Verb(
        "submit",
        ("spec",),
        spelled={"mcp": "submit_task"},
        differs={
            "queue": (("command", "callable", "fields"), "a command or a callable, then fields"),
            "sync": (("command", "callable", "fields"), "a command or a callable, then fields"),
            "mcp": (
                (
                    "agent",
                    "prompt",
                    "command",
                    "title",
                    "priority",
                    "workspace",
                    "after",
                    "parent",
                    "expected_duration",
                    "key",
                    "delay",
                    "run_at",
                ),
                "a model gives plain fields, not a spec",
            ),
        },
    ),
    Verb(
        "submit_many",
        ("specs",),
        omitted={"backend": "the CLI submits one task a call", "mcp": "one task a call"},
    ),
    Verb(
        "followup",
        ("ref", "prompt"),
        spelled={"mcp": "followup_task"},
        omitted={"backend": "the CLI builds a follow-up and submits it (client/followup.py)"},
        differs={
            "queue": (("ref", "prompt", "config"), "the agent types of a local config"),
            "sync": (("ref", "prompt", "config"), "the agent types of a local config"),
        },
    ),
    # Steering one task.
    Verb("cancel", ("ref", "cascade"), spelled={"mcp": "cancel_task"}),
    Verb("terminate", ("ref", "reason", "resumable"), spelled={"mcp": "terminate_task"}),
    Verb("restart", ("ref", "force"), spelled={"mcp": "restart_task"}),
    Verb(
        "send_input",
        ("ref", "text", "enter"),
        omitted={"backend": "the CLI types into a local terminal itself, else asks the server"},
    ),
    Verb("hold", ("ref",), omitted=_no_mcp()),
    Verb("release", ("ref",), omitted=_no_mcp()),
    Verb("boost", ("ref",), spelled={"mcp": "boost_task"}),
    Verb("bump", ("ref",), spelled={"mcp": "start_now"}),
    Verb("move", ("ref", "to", "before", "after"), spelled={"mcp": "move_task"}),
    Verb(
        "set_priority",
        ("ref", "level", "reason"),
        differs={"mcp": (("ref", "priority"), "a model names a priority and gives no reason")},
    ),
    # Steering many tasks, the queue.
    Verb(
        "bulk",
        ("verb", "refs", "priority", "reason", "force", "progress"),
        omitted={"queue": "a script loops over its tasks", "sync": "a script loops", **_no_mcp()},
    ),
    Verb(
        "emergency_stop",
        ("reason",),
        omitted={
            "queue": "the CLI's and the server's",
            "sync": "the CLI's and the server's",
            **_no_mcp(),
        },
    ),
    Verb("pause", omitted=_no_mcp()),
    Verb("resume", omitted=_no_mcp()),
    Verb("clear", omitted=_no_mcp()),
    # Settings and limits.
    Verb(
        "set_setting",
        ("name", "value"),
        omitted={
            "queue": "a verb per setting (set_max_concurrent)",
            "sync": "a verb per setting",
            **_no_mcp(),
        },
    ),
    Verb(
        "set_max_concurrent",
        ("value",),
        omitted={"backend": "set_setting", "client": "set_setting", **_no_mcp()},
    ),
    Verb(
        "set_exempt_agents",
        ("agents",),
        omitted={
            "backend": NOT_CLI,
            "queue": "a file's setting",
            "sync": "a file's setting",
            **_no_mcp(),
        },
    ),
    Verb("set_limit", ("key", "value", "max_running"), omitted=_no_mcp()),
    Verb("set_rate", ("key", "value", "max_starts", "period"), omitted=_no_mcp()),
    Verb("set_budget", ("key", "value", "amount", "period", "unit"), omitted=_no_mcp()),
    Verb("set_fairness", ("key", "weights"), omitted=_no_mcp()),
    Verb("set_backoff", ("agent", "rule"), omitted=_no_mcp()),
    # Schedules.
    Verb("schedules", omitted=_SCHEDULES),
    Verb(
        "schedule",
        ("name",),
        omitted={**_SCHEDULES, "queue": "schedules() lists them", "sync": "schedules() lists them"},
    ),
    Verb(
        "add_schedule",
        ("name", "cron", "command", "tz", "overlap", "paused", "replace", "fields"),
        omitted=_SCHEDULES,
        differs={
            "client": (
                ("name", "cron_expr", "spec", "tz", "overlap", "paused", "replace_existing"),
                "the HTTP body's names",
            )
        },
    ),
    Verb("pause_schedule", ("name",), omitted=_SCHEDULES),
    Verb("resume_schedule", ("name",), omitted=_SCHEDULES),
    Verb("remove_schedule", ("name",), omitted=_SCHEDULES),
    # A run's work.
    Verb(
        "diff",
        ("ref", "stat_only", "max_bytes"),
        spelled={"mcp": "task_diff"},
        omitted={
            "backend": NOT_CLI,
            "client": NOT_CLI,
            "queue": "SyncLanding",
            "sync": "SyncLanding",
        },
    ),
    Verb(
        "merge",
        ("ref", "into", "squash"),
        spelled={"mcp": "merge_task"},
        omitted={
            "backend": NOT_CLI,
            "client": NOT_CLI,
            "queue": "SyncLanding",
            "sync": "SyncLanding",
        },
    ),
)


def verb(name: str) -> Verb:
    """The declared verb `name`."""
    for one in VERBS:
        if one.name == name:
            return one
    raise KeyError(name)
