"""Who sees the hooks over HTTP: admins read `notify` (never a secret) and the delivery
log; a user or viewer token reads neither, and no token sets them (slotline.yaml only)."""

from __future__ import annotations

import json

from slotline.config.file import Config
from slotline.store import Delivery

from .conftest import ServerFactory

SECRET = "whsec-7c1d-never-shown"
CONFIG = Config.model_validate(
    {
        "notify": [
            {
                "url": "https://ops:pw-in-url@hooks.example.com/services/T0001/SeCrEtToKeN123?token=tok-in-query",
                "events": ["task.failed", "task.stalled"],
                "secret": SECRET,
            }
        ],
        "on_event": {"task.failed": ["notify-send", "--", "slotline", "{title} failed"]},
    }
)
HIDDEN = (SECRET, "pw-in-url", "tok-in-query", "SeCrEtToKeN123", "/services")


def test_a_user_token_cannot_read_or_set_notify(make_server: ServerFactory) -> None:
    server = make_server(config=CONFIG)
    server.store.log_notify(
        Delivery(at=1.0, hook="h", event="task.failed", seq=3, task_id=None, node_id="n",
                 attempt=1, ok=False, status=500, error="answered HTTP 500")
    )  # fmt: skip
    for role in ("user", "viewer"):
        with server.client(server.token(f"someone-{role}", role)) as http:
            config = http.get("/api/config")
            assert config.status_code == 200
            assert "notify" not in config.json()
            assert "on_event" not in config.json()
            assert http.get("/api/notify/log").status_code == 403
            for method in ("PUT", "POST", "PATCH"):
                refused = http.request(method, "/api/config", json={"notify": []})
                assert refused.status_code in (403, 405), (method, refused.status_code)
            export = http.get("/api/export")
            assert not any(secret in export.text for secret in HIDDEN)
    with server.client(server.token("root", "admin")) as http:
        config = http.get("/api/config").json()
        (hook,) = config["notify"]
        assert hook["url"].startswith("https://hooks.example.com/…#")
        assert not any(secret in json.dumps(config) for secret in HIDDEN)
        assert hook["secret"] == "***"
        assert config["on_event"] == {
            "task.failed": [["notify-send", "--", "slotline", "{title} failed"]]
        }
        # Nor does an admin set hooks over HTTP: slotline.yaml is where they live.
        assert http.put("/api/config", json={"notify": []}).status_code == 405
        limits = http.post("/api/limits", json={"notify": [{"url": "http://x"}]})
        assert limits.status_code == 422
        (delivery,) = http.get("/api/notify/log").json()["deliveries"]
        assert (delivery["seq"], delivery["ok"], delivery["status"]) == (3, False, 500)
        every = json.dumps(
            [
                http.get(p).text
                for p in ("/api/config", "/api/export", "/api/notify/log", "/openapi.json")
            ]
        )
        assert not any(secret in every for secret in HIDDEN)
