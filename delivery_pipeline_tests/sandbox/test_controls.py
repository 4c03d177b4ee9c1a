"""The ``/_sandbox`` controls parse their JSON bodies into typed values
(sandbox/control_bodies.py): a body that does not fit is answered 400 with the
field it got wrong named, or with the body's shape when the shape is wrong."""

from __future__ import annotations

from typing import Any

import pytest

from delivery_pipeline.testing.sandbox import SandboxProcess

NUMBER = "+15550109001"
WINDOW = f"/_sandbox/people/{NUMBER}/window"
PRESS = f"/_sandbox/people/{NUMBER}/press"
WRITES = f"/_sandbox/people/{NUMBER}/messages"
TEMPLATE = "/_sandbox/templates/document_ready/en"
WINDOW_SHAPE = 'body must be {"age_seconds": <seconds> | null, "phone_number_id"?: "<id>"}'
PRESS_SHAPE = (
    'body must be {"button": "<its text>" | <index>, "message_id"?: "<wamid>", '
    '"interactive"?: <bool>}'
)
WRITES_SHAPE = (
    'body must be {"text": "<non-empty string>", "name"?: "<string>", '
    '"username"?: "<string>", "to"?: "<business phone number id>"}'
)


def refused(sandbox: SandboxProcess, path: str, body: Any) -> str:
    answer = sandbox.http.post(path, json=body)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert (error["type"], error["code"]) == ("SandboxError", 100)
    return str(error["message"])


@pytest.mark.parametrize(
    ("path", "body", "said"),
    [
        (WINDOW, [60], WINDOW_SHAPE),
        (WINDOW, {}, WINDOW_SHAPE),
        (WINDOW, {"age_seconds": 60, "age": 60}, WINDOW_SHAPE),
        (WINDOW, {"age_seconds": -1}, "age_seconds must be a number >= 0 or null"),
        (WINDOW, {"age_seconds": True}, "age_seconds must be a number >= 0 or null"),
        (WINDOW, {"age_seconds": "60"}, "age_seconds must be a number >= 0 or null"),
        (WINDOW, {"age_seconds": 60, "phone_number_id": 7}, "phone_number_id must be a string"),
        (PRESS, {}, PRESS_SHAPE),
        (PRESS, {"button": ""}, PRESS_SHAPE),
        (PRESS, {"button": True}, PRESS_SHAPE),
        (PRESS, {"button": 1.5}, PRESS_SHAPE),
        (PRESS, {"button": "Later", "message_id": 5}, "message_id must be a string"),
        (PRESS, {"button": 1, "interactive": "yes"}, "interactive must be a boolean"),
        (WRITES, {"text": ""}, WRITES_SHAPE),
        (WRITES, {"text": "hi", "name": 5}, "name must be a string"),
        (WRITES, {"text": "hi", "to": 5}, "to must be a string"),
        (
            TEMPLATE,
            {"status": "GONE"},
            "status must be one of APPROVED, PAUSED, DISABLED, FLAGGED, REJECTED",
        ),
        (TEMPLATE, {"mode": None}, "mode must be one of sync, async"),
        (TEMPLATE, {"fail_code": "131049"}, "fail_code must be an integer error code or null"),
        (
            TEMPLATE,
            {"message_send_ttl_seconds": 0},
            "message_send_ttl_seconds must be a whole number of seconds >= 1 or null",
        ),
        (TEMPLATE, {"webhook": "no"}, "webhook must be a boolean"),
    ],
)
def test_a_body_that_does_not_fit_is_told_what_is_wrong(
    sandbox: SandboxProcess, path: str, body: Any, said: str
) -> None:
    assert refused(sandbox, path, body) == said


def test_a_template_change_of_unknown_keys_is_shown_the_keys_it_may_have(
    sandbox: SandboxProcess,
) -> None:
    said = refused(sandbox, TEMPLATE, {"status": "PAUSED", "colour": "red"})
    assert said.startswith("body must be a JSON object of status, reason, quality,")
    assert sandbox.template("document_ready", "en")["status"] == "APPROVED", "nothing changed"


def test_a_business_number_the_sandbox_does_not_play_is_named(sandbox: SandboxProcess) -> None:
    said = refused(sandbox, WINDOW, {"age_seconds": 60, "phone_number_id": "999"})
    assert said.startswith("the sandbox plays no business number '999': it plays ")
    said = refused(sandbox, WRITES, {"text": "hi", "to": "999"})
    assert said.startswith("the sandbox plays no business number '999': it plays ")


def test_bodies_that_fit_do_what_they_say(sandbox: SandboxProcess) -> None:
    opened = sandbox.set_window(NUMBER, 60.5)
    assert opened["window_open"] is True
    assert sandbox.set_window(NUMBER, None)["window_open"] is False
    changed = sandbox.template(
        "document_ready", "en", status="PAUSED", reason="LOW_QUALITY", webhook=False
    )
    assert (changed["status"], changed["fail_code"], changed["webhooks"]) == ("PAUSED", None, [])
    cleared = sandbox.template("document_ready", "en", fail_code=131026, mode="async")
    assert (cleared["fail_code"], cleared["mode"], cleared["status"]) == (131026, "async", "PAUSED")
