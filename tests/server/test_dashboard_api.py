"""The HTTP side of the dashboard: its static files with a strict CSP, the paged line,
bulk verbs, the emergency stop, whoami and the chart history."""

from __future__ import annotations

import httpx

from slotline.models import Status

from .conftest import Running, ServerFactory


def test_the_page_and_its_modules_are_served_with_a_strict_csp(http: httpx.Client) -> None:
    page = http.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp
    assert "unsafe-inline" not in csp
    assert "unsafe-eval" not in csp
    assert "frame-ancestors 'none'" in csp
    assert '<script type="module" src="/ui/main.js">' in page.text
    module = http.get("/ui/main.js")
    assert module.headers["content-type"].startswith("text/javascript")
    assert http.get("/ui/vendor/uPlot.LICENSE.txt").status_code == 200
    xterm = http.get("/ui/vendor/xterm.module.js")  # the task page's terminal, when shown
    assert xterm.headers["content-type"].startswith("text/javascript")
    assert http.get("/ui/vendor/xterm.css").headers["content-type"].startswith("text/css")
    assert http.get("/ui/../server/app.py").status_code == 404
    assert http.get("/ui/__init__.py").status_code == 404


def test_the_line_is_paged_with_positions_of_the_whole_line(
    server: Running, http: httpx.Client
) -> None:
    ids = [server.store.submit({"command": ["true"], "title": f"t{i}"}).id for i in range(5)]
    server.store.hold(ids[4])

    page = http.get("/api/line", params={"offset": 2, "limit": 2}).json()

    assert [(t["title"], t["position"]) for t in page["queued"]] == [("t2", 3), ("t3", 4)]
    assert (page["queued_total"], page["next_up"], page["parked_total"]) == (4, ids[0], 1)
    assert page["last_seq"] == server.store.last_seq()
    found = http.get("/api/line", params={"q": "T3"}).json()
    assert [(t["title"], t["position"]) for t in found["queued"]] == [("t3", 4)]


def test_bulk_by_filter_cancels_only_the_matching_tasks(
    server: Running, http: httpx.Client
) -> None:
    batch = [server.store.submit({"command": ["true"], "title": f"batch {i}"}).id for i in range(3)]
    other = server.store.submit({"command": ["true"], "title": "other"}).id

    answer = http.post(
        "/api/tasks/bulk", json={"verb": "cancel", "filter": {"status": ["queued"], "q": "batch"}}
    )

    assert answer.status_code == 200, answer.text
    assert sorted(answer.json()["done"]) == sorted(batch)
    assert server.store.get(other).status is Status.QUEUED
    assert {server.store.get(i).status for i in batch} == {Status.CANCELLED}


def test_bulk_needs_exactly_one_target_and_a_real_filter(http: httpx.Client) -> None:
    for body in (
        {"verb": "cancel"},
        {"verb": "cancel", "ids": [], "filter": {"q": "x"}},
        {"verb": "cancel", "filter": {}},
        {"verb": "explode", "ids": ["abc"]},
    ):
        assert http.post("/api/tasks/bulk", json=body).status_code == 422, body


def test_a_viewer_reads_the_line_but_cannot_steer(make_server: ServerFactory) -> None:
    server = make_server()
    viewer, user = server.token("watcher", "viewer"), server.token("ann", "user")
    task = server.store.submit({"command": ["true"], "title": "t"}).id
    with server.client(viewer) as http:
        assert http.get("/api/whoami").json() == {
            "name": "watcher",
            "role": "viewer",
            "can_write": False,
            "is_admin": False,
        }
        assert http.get("/api/line").status_code == 200
        bulk = {"verb": "cancel", "ids": [task]}
        assert http.post("/api/tasks/bulk", json=bulk).status_code == 403
        assert http.post(f"/api/tasks/{task}/cancel").status_code == 403
    with server.client(user) as http:
        assert http.post("/api/emergency-stop").status_code == 403
        # A user's filter reaches only their own tasks.
        answer = http.post("/api/tasks/bulk", json={"verb": "hold", "filter": {"q": "t"}})
        assert answer.json()["done"] == []
    assert server.store.get(task).status is Status.QUEUED


def test_charts_read_the_stored_samples(server: Running, http: httpx.Client) -> None:
    server.store.submit({"command": ["true"], "title": "t"})
    now = server.store.clock()
    server.store.record_sample(10, now=now - 20)
    server.store.record_sample(10, now=now)

    charts = http.get("/api/charts", params={"window": "hour"}).json()

    assert [s["queued"] for s in charts["samples"]] == [1, 1]
    assert charts["samples"][0]["at"] == now - 20
    assert http.get("/api/charts", params={"window": "week"}).status_code == 422


def test_a_task_lists_its_dependents_and_its_events(server: Running, http: httpx.Client) -> None:
    first = server.store.submit({"command": ["true"], "title": "first"}).id
    then = server.store.submit({"command": ["true"], "title": "then", "depends_on": [first]}).id
    server.store.set_priority(first, "high", "needed soon")

    assert [t["id"] for t in http.get(f"/api/tasks/{first[:8]}/dependents").json()] == [then]
    events = http.get(f"/api/tasks/{first}/events").json()["events"]
    assert [e["kind"] for e in events] == ["submitted", "priority"]
    assert events[1]["data"]["reason"] == "needed soon"


def test_a_user_sees_limit_use_of_others_only_as_a_count(make_server: ServerFactory) -> None:
    server = make_server()
    ann, admin = server.token("ann", "user"), server.token("root", "admin")
    server.store.set_limit("workspace", None, 2)
    server.store.submit({"command": ["true"], "user": "ann", "workspace": "/srv/ann"})
    server.store.submit({"command": ["true"], "user": "bob", "workspace": "/srv/secret"})
    assert len(server.store.claim("elsewhere").claims) == 2

    with server.client(ann) as http:
        (limit,) = http.get("/api/line").json()["limits"]
    assert limit["used"] == {"/srv/ann": 1, "(others)": 1}
    with server.client(admin) as http:
        (limit,) = http.get("/api/line").json()["limits"]
    assert limit["used"] == {"/srv/ann": 1, "/srv/secret": 1}
