"""The sandbox plays documents as files (sandbox/media.py, documents.py, presence.py,
reads.py), over real HTTP, driven by CloudApiClient: uploads per number with their
refusals and expiry, templates with a DOCUMENT header, document messages, a time to
live that drops an undelivered message without a webhook, read marks with typing."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import httpx
import pytest

from delivery_pipeline.files.pdf import FileSource, render_pdf
from delivery_pipeline.model import Kind
from delivery_pipeline.testing.files import flat, pdf_text
from delivery_pipeline.testing.sandbox import SandboxProcess, WebhookReceiver
from delivery_pipeline.whatsapp.client import CloudApiClient
from delivery_pipeline.whatsapp.errors import (
    MalformedRequest,
    MediaRefused,
    ReEngagementRequired,
    TemplateRefused,
)

T = TypeVar("T")
OTHER_NUMBER = "200000000000777"
BODY = "Good morning, Ana.\n\nWeek 1: Sleep\n\n• Monday: an alarm.\n• Tuesday: a walk."
PDF = render_pdf(FileSource(Kind.PLAN, "en", "Ana", dt.date(2026, 3, 2), BODY))
NAMED = {"name": "Ana", "kind": "plan", "date": "2 March"}


@pytest.fixture(autouse=True)
def _hooked(clean: None, sandbox: SandboxProcess, receiver: WebhookReceiver) -> None:
    """Every test here: the webhooks to ``receiver``, a second business number played."""
    sandbox.faults(webhook_url=receiver.url, status_delay_ms=10, numbers={OTHER_NUMBER: None})


def client_call(
    sandbox: SandboxProcess, use: Callable[[CloudApiClient], Awaitable[T]], number: str = ""
) -> T:
    async def run() -> T:
        async with CloudApiClient(
            sandbox.url, number or sandbox.phone_number_id, sandbox.access_token, timeout=5.0
        ) as client:
            return await use(client)

    return asyncio.run(run())


def upload(sandbox: SandboxProcess, content: bytes = PDF, mime: str = "application/pdf", **kw):
    return client_call(sandbox, lambda c: c.upload_media(content, mime, "Plan - Ana.pdf"), **kw)


def send_document_template(sandbox: SandboxProcess, to: str, media_id: str, **kw: Any) -> str:
    return client_call(
        sandbox,
        lambda c: c.send_document_template(
            to, "document_attached", "en", NAMED, media_id=media_id, filename="Plan - Ana.pdf"
        ),
        **kw,
    )


def raw_template(sandbox: SandboxProcess, to: str, components: list[Any]) -> httpx.Response:
    payload = {
        "messaging_product": "whatsapp",
        "to": to,
        "type": "template",
        "template": {
            "name": "document_attached",
            "language": {"code": "en"},
            "components": components,
        },
    }
    headers = {"Authorization": f"Bearer {sandbox.access_token}"}
    return sandbox.http.post(sandbox.messages_url, json=payload, headers=headers)


def body_component(names: dict[str, str] = NAMED) -> dict[str, Any]:
    parameters = [{"type": "text", "parameter_name": k, "text": v} for k, v in names.items()]
    return {"type": "body", "parameters": parameters}


def statuses(receiver: WebhookReceiver) -> list[tuple[str, str]]:
    return [(s["id"], s["status"]) for hook in receiver.received for s in hook.statuses()]


# ── uploads ─────────────────────────────────────────────────────────────


def test_an_upload_is_kept_for_its_number_and_its_bytes_read_back(sandbox):
    media_id = upload(sandbox)

    [listed] = sandbox.media()
    assert listed["id"] == media_id and media_id.isdigit()
    assert listed["phone_number_id"] == sandbox.phone_number_id
    assert (listed["mime_type"], listed["size"], listed["expired"]) == (
        "application/pdf",
        len(PDF),
        False,
    )
    assert sandbox.media_bytes(media_id) == PDF
    assert flat(pdf_text(sandbox.media_bytes(media_id))).endswith(flat(BODY))


@pytest.mark.parametrize(
    ("content", "mime", "code"),
    [
        (PDF, "application/octet-stream", 100),
        (PDF, "application/zip", 100),
        (PDF, "image/png", 131053),
        (b"plain words", "application/pdf", 131053),
        (b"\xff\xfe\x00 not text", "text/plain", 131053),
    ],
)
def test_a_refused_upload_is_a_media_refusal(sandbox, content, mime, code):
    with pytest.raises(MediaRefused) as refused:
        upload(sandbox, content, mime)

    assert refused.value.code == code
    assert sandbox.media() == []


def test_a_file_larger_than_the_limit_is_refused(sandbox):
    sandbox.faults(media_max_bytes=len(PDF) - 1)

    with pytest.raises(MediaRefused) as refused:
        upload(sandbox)

    assert refused.value.code == 131053


def test_an_upload_can_be_refused_on_demand(sandbox):
    sandbox.refuse(131000, message_type="media", count=1)

    with pytest.raises(Exception) as failed:
        upload(sandbox)
    assert getattr(failed.value, "code", None) == 131000
    assert upload(sandbox)


# ── a template with a DOCUMENT header ───────────────────────────────────


def test_a_document_template_puts_the_file_in_the_inbox(sandbox):
    media_id = upload(sandbox)
    to = "+15550001001"

    wamid = send_document_template(sandbox, to, media_id)

    [received] = sandbox.inbox(to)
    assert received["id"] == wamid and received["type"] == "template"
    assert received["text"] == "Hi Ana, the plan you asked for on 2 March is attached."
    assert received["document"]["id"] == media_id
    assert received["document"]["filename"] == "Plan - Ana.pdf"
    assert received["document"]["mime_type"] == "application/pdf"
    assert pdf_text(sandbox.media_bytes(received["document"]["id"]))


def test_a_media_id_is_its_numbers_alone(sandbox):
    media_id = upload(sandbox)

    with pytest.raises(MalformedRequest) as refused:
        send_document_template(sandbox, "+15550001002", media_id, number=OTHER_NUMBER)

    assert refused.value.code == 100 and "media attachment ID" in refused.value.details
    assert send_document_template(
        sandbox, "+15550001002", upload(sandbox, number=OTHER_NUMBER), number=OTHER_NUMBER
    )


def test_a_media_id_expires(sandbox):
    sandbox.faults(media_ttl_seconds=0.3)
    media_id = upload(sandbox)
    time.sleep(0.4)

    with pytest.raises(MalformedRequest):
        send_document_template(sandbox, "+15550001003", media_id)
    assert sandbox.media()[0]["expired"] is True


@pytest.mark.parametrize(
    "header",
    [
        None,
        {"type": "header", "parameters": []},
        {"type": "header", "parameters": [{"type": "image", "image": {"id": "1"}}]},
        {"type": "header", "parameters": [{"type": "document", "document": {"filename": "a.pdf"}}]},
    ],
)
def test_a_header_of_the_wrong_shape_is_132012(sandbox, header):
    components = [body_component()] + ([header] if header else [])

    response = raw_template(sandbox, "+15550001004", components)

    assert response.status_code == 400 and response.json()["error"]["code"] == 132012
    assert sandbox.inbox("+15550001004") == []


def test_named_parameters_must_be_the_templates(sandbox):
    media_id = upload(sandbox)
    header = {
        "type": "header",
        "parameters": [{"type": "document", "document": {"id": media_id}}],
    }

    wrong = raw_template(
        sandbox,
        "+15550001005",
        [header, body_component({"who": "Ana", "kind": "plan", "date": "x"})],
    )

    assert wrong.json()["error"]["code"] == 132000
    assert raw_template(sandbox, "+15550001005", [header, body_component()]).status_code == 200


def test_a_link_is_taken_and_then_fails_with_131053_no_url_is_fetched(sandbox, receiver):
    header = {
        "type": "header",
        "parameters": [{"type": "document", "document": {"link": "https://example.invalid/a.pdf"}}],
    }

    response = raw_template(sandbox, "+15550001006", [header, body_component()])

    assert response.status_code == 200
    [failure] = sandbox.failures()
    assert failure["code"] == 131053
    sandbox.wait_webhooks_idle()
    assert [s for _, s in statuses(receiver)] == ["failed"]
    assert sandbox.inbox("+15550001006") == []


def test_a_paused_document_template_is_refused_like_any_template(sandbox):
    sandbox.template("document_attached", "en", status="PAUSED")

    with pytest.raises(TemplateRefused) as refused:
        send_document_template(sandbox, "+15550001007", upload(sandbox))

    assert refused.value.code == 132015


# ── a document message, inside the window ───────────────────────────────


def test_a_document_message_goes_inside_the_window_only(sandbox):
    media_id = upload(sandbox)
    inside, outside = "+15550001008", "+15550001009"
    sandbox.say(inside, "hi")

    client_call(
        sandbox, lambda c: c.send_document(inside, media_id, "Plan.pdf", caption="Your plan")
    )

    [received] = sandbox.inbox(inside)
    assert received["type"] == "document" and received["text"] == "Your plan"
    assert (received["document"]["id"], received["document"]["caption"]) == (media_id, "Your plan")
    with pytest.raises(ReEngagementRequired):
        client_call(sandbox, lambda c: c.send_document(outside, media_id, "Plan.pdf"))
    with pytest.raises(ValueError):
        client_call(
            sandbox, lambda c: c.send_document(inside, media_id, "P.pdf", caption="x" * 1025)
        )


# ── read marks and typing ───────────────────────────────────────────────


def test_a_read_mark_with_typing_is_recorded_before_the_message_that_follows(sandbox):
    person = "+15550001010"
    their_message = sandbox.say(person, "send me my plan")

    client_call(sandbox, lambda c: c.mark_read(their_message))
    client_call(sandbox, lambda c: c.send_text(person, "Here it comes."))

    detail = sandbox.person(person)
    [mark] = detail["read_marks"]
    assert (mark["message_id"], mark["typing"]) == (their_message, True)
    assert detail["written"][0]["read_at"]
    [received] = sandbox.inbox(person)
    assert mark["seq"] < received["seq"], "the typing indicator came first"


def test_a_read_mark_names_a_message_the_number_received(sandbox):
    with pytest.raises(MalformedRequest):
        client_call(sandbox, lambda c: c.mark_read("wamid.nobody"))
    their_message = sandbox.say("+15550001011", "hi")
    with pytest.raises(MalformedRequest):
        client_call(sandbox, lambda c: c.mark_read(their_message), number=OTHER_NUMBER)


# ── time to live ────────────────────────────────────────────────────────


def test_an_undelivered_message_past_its_time_to_live_is_dropped_without_a_webhook(
    sandbox, receiver
):
    person = "+15550001012"
    sandbox.template("document_attached", "en", message_send_ttl_seconds=1)
    sandbox.set_online(person, False)

    wamid = send_document_template(sandbox, person, upload(sandbox))
    held = sandbox.person(person)["held"]
    time.sleep(1.3)
    back = sandbox.set_online(person, True)

    assert [h["id"] for h in held] == [wamid]
    assert sandbox.inbox(person) == []
    assert [d["id"] for d in back["dropped"]] == [wamid] and back["held"] == []
    sandbox.wait_webhooks_idle()
    assert statuses(receiver) == [(wamid, "sent")], "sent, then nothing: no failed, no delivered"
    assert sandbox.stats()["dropped_ttl"] == 1


def test_a_held_message_within_its_time_to_live_arrives_when_the_phone_is_back(sandbox, receiver):
    person = "+15550001013"
    sandbox.set_online(person, False)
    wamid = send_document_template(sandbox, person, upload(sandbox))
    assert sandbox.inbox(person) == []

    sandbox.set_online(person, True)

    [received] = sandbox.inbox(person)
    assert received["id"] == wamid and received["delivered"]
    sandbox.wait_webhooks_idle()
    assert [s for _, s in statuses(receiver)] == ["sent", "delivered"]


# ── every template, touched or not ──────────────────────────────────────


def test_the_template_list_has_every_template_and_its_components(sandbox):
    listed = {(t["name"], t["language"]): t for t in sandbox.templates()}

    config = {(t["name"], t["language"]) for t in sandbox.config()["templates"]}
    assert config <= set(listed), "untouched templates are listed too"
    document = listed["document_attached", "pt_BR"]
    assert document["components"][0] == {"type": "HEADER", "format": "DOCUMENT"}
    assert document["parameter_format"] == "NAMED" and document["status"] == "APPROVED"
    assert listed["brief_attached", "en"]["message_send_ttl_seconds"] == 43200
    knock = listed["documents_ready", "en"]
    assert [c["type"] for c in knock["components"]] == ["BODY", "BUTTONS"]
    assert knock["parameter_format"] == "POSITIONAL"
