import json
import logging

from slotline.cli.logfmt import JsonFormatter


def test_json_lines_carry_the_structured_fields() -> None:
    record = logging.LogRecord(
        "slotline.node.node", logging.INFO, "f.py", 1, "re-adopted %s", ("x",), None
    )
    record.task_id = "3f2a"
    entry = json.loads(JsonFormatter().format(record))
    assert entry["message"] == "re-adopted x"
    assert entry["level"] == "info"
    assert entry["logger"] == "slotline.node.node"
    assert entry["task_id"] == "3f2a"
    assert entry["at"].endswith("Z")
