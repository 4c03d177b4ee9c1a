"""The WhatsApp sandbox over real HTTP: a subprocess, driven by httpx and by CloudApiClient."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import httpx
import pytest

from delivery_pipeline.settings import DEV_APP_SECRET
from delivery_pipeline.testing.sandbox import (
    ReceivedWebhook,
    SandboxProcess,
    WebhookReceiver,
    start_sandbox,
)
from delivery_pipeline.whatsapp.client import CloudApiClient
from delivery_pipeline.whatsapp.errors import (
    GlobalSendError,
    RecipientUnreachable,
    ReEngagementRequired,
    SendOutcomeUnknown,
    TemplateRefused,
    Throttled,
    TransientError,
    from_error_object,
)

SECRET = "test-app-secret"
REENGAGEMENT_DETAILS = (
    "Message failed to send because more than 24 hours have passed since the customer last "
    "replied to this number."
)
T = TypeVar("T")


@pytest.fixture
def hooked(sandbox: SandboxProcess, receiver: WebhookReceiver) -> WebhookReceiver:
    """The sandbox posting signed webhooks to ``receiver``, with short status delays."""
    sandbox.faults(webhook_url=receiver.url, app_secret=SECRET, status_delay_ms=10)
    return receiver


def with_client(
    sandbox: SandboxProcess,
    use: Callable[[CloudApiClient], Awaitable[T]],
    *,
    token: str | None = None,
    phone_number_id: str | None = None,
) -> T:
    async def run() -> T:
        async with CloudApiClient(
            sandbox.url,
            phone_number_id or sandbox.phone_number_id,
            token or sandbox.access_token,
            timeout=5.0,
        ) as client:
            return await use(client)

    return asyncio.run(run())


def send_text(sandbox: SandboxProcess, to: str, body: str = "hello", **kw: Any) -> str:
    return with_client(sandbox, lambda c: c.send_text(to, body, **kw))


def send_template(
    sandbox: SandboxProcess,
    to: str,
    parameters: list[str] | None = None,
    *,
    name: str = "document_ready",
    language: str = "en",
    **kw: Any,
) -> str:
    params = ["Ana"] if parameters is None else parameters
    return with_client(sandbox, lambda c: c.send_template(to, name, language, params, **kw))


def post_raw(
    sandbox: SandboxProcess, payload: Any, *, token: str | None = None, url: str | None = None
) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token or sandbox.access_token}"}
    return sandbox.http.post(url or sandbox.messages_url, json=payload, headers=headers)


def text_payload(to: str, body: str = "hello", **extra: Any) -> dict[str, Any]:
    return {
        "messaging_product": "whatsapp",
        "to": to,
        "type": "text",
        "text": {"body": body},
        **extra,
    }


def template_payload(
    to: str, parameters: list[Any], name: str = "document_ready", language: str = "en"
) -> dict[str, Any]:
    return {
        "messaging_product": "whatsapp",
        "to": to,
        "type": "template",
        "template": {
            "name": name,
            "language": {"code": language},
            "components": [{"type": "body", "parameters": parameters}],
        },
    }


def error_of(response: httpx.Response) -> dict[str, Any]:
    error = response.json()["error"]
    assert set(error) - {"error_subcode"} == {"message", "type", "code", "error_data", "fbtrace_id"}
    assert error["error_data"]["messaging_product"] == "whatsapp"
    assert error["error_data"]["details"]
    return error


def statuses_for(receiver: WebhookReceiver, wamid: str) -> list[dict[str, Any]]:
    return [s for s in receiver.statuses() if s["id"] == wamid]


def about(webhooks: list[ReceivedWebhook], number: str) -> list[ReceivedWebhook]:
    """The webhooks that mention ``number`` (a late post from an earlier test may arrive)."""
    return [w for w in webhooks if f'"{number[1:]}"'.encode() in w.body]


# --- authentication and addressing ----------


def test_wrong_or_missing_token_is_401_code_190(sandbox: SandboxProcess) -> None:
    wrong = post_raw(sandbox, text_payload("+15550100001"), token="not-the-token")
    assert wrong.status_code == 401
    assert error_of(wrong)["code"] == 190
    assert error_of(wrong)["type"] == "OAuthException"

    missing = sandbox.http.post(sandbox.messages_url, json=text_payload("+15550100001"))
    assert missing.status_code == 401 and error_of(missing)["code"] == 190

    with pytest.raises(GlobalSendError) as raised:
        with_client(sandbox, lambda c: c.send_text("+15550100001", "hi"), token="expired")
    assert raised.value.code == 190 and raised.value.http_status == 401


def test_rotated_token_refuses_the_old_one_until_reset(sandbox: SandboxProcess) -> None:
    sandbox.set_window("+15550100002", 60)
    sandbox.faults(access_token="rotated-token")
    with pytest.raises(GlobalSendError):
        send_text(sandbox, "+15550100002")
    assert post_raw(sandbox, text_payload("+15550100002"), token="rotated-token").status_code == 200
    sandbox.reset()
    sandbox.set_window("+15550100002", 60)
    assert send_text(sandbox, "+15550100002").startswith("wamid.")


def test_unknown_phone_number_id_is_code_100(sandbox: SandboxProcess) -> None:
    url = f"{sandbox.url}/v23.0/999999999/messages"
    response = post_raw(sandbox, text_payload("+15550100003"), url=url)
    assert response.status_code == 400
    assert error_of(response)["code"] == 100
    assert error_of(response)["error_subcode"] == 33, "what tells it from a malformed request"
    with pytest.raises(GlobalSendError) as raised:
        with_client(sandbox, lambda c: c.send_text("+15550100003", "hi"), phone_number_id="999")
    assert raised.value.code == 100


def test_the_phone_number_record_answers_only_our_identity(sandbox: SandboxProcess) -> None:
    record = with_client(sandbox, lambda c: c.phone_number())
    assert record["id"] == sandbox.phone_number_id and record["display_phone_number"]
    with pytest.raises(GlobalSendError) as token:
        with_client(sandbox, lambda c: c.phone_number(), token="not-the-token")
    assert (token.value.code, token.value.http_status) == (190, 401)
    with pytest.raises(GlobalSendError) as number:
        with_client(sandbox, lambda c: c.phone_number(), phone_number_id="999")
    assert number.value.code == 100 and "Unsupported get request" in number.value.message


def test_the_configured_identity_replaces_the_development_one() -> None:
    env = {"WHATSAPP_ACCESS_TOKEN": "configured-token", "WHATSAPP_PHONE_NUMBER_ID": "4242"}
    with start_sandbox(**env) as configured:
        ours = with_client(
            configured, lambda c: c.phone_number(), token="configured-token", phone_number_id="4242"
        )
        with pytest.raises(GlobalSendError) as development:
            with_client(configured, lambda c: c.phone_number(), phone_number_id="4242")
        assert "token=WHATSAPP_ACCESS_TOKEN" in configured.log()
    assert ours["id"] == "4242" and development.value.code == 190


def test_any_api_version_is_served(sandbox: SandboxProcess) -> None:
    for version in ("v23.0", "v26.0"):
        url = f"{sandbox.url}/{version}/{sandbox.phone_number_id}/messages"
        response = post_raw(sandbox, template_payload("+15550100004", [_param("Ana")]), url=url)
        assert response.status_code == 200, response.text


# --- payload rules ----------


def _param(text: Any) -> dict[str, Any]:
    return {"type": "text", "text": text}


def test_text_body_up_to_4096_characters(sandbox: SandboxProcess) -> None:
    number = "+15550100010"
    sandbox.set_window(number, 60)
    assert post_raw(sandbox, text_payload(number, "x" * 4096)).status_code == 200
    too_long = post_raw(sandbox, text_payload(number, "x" * 4097))
    assert too_long.status_code == 400 and error_of(too_long)["code"] == 100
    assert "4096" in error_of(too_long)["error_data"]["details"]
    empty = post_raw(sandbox, text_payload(number, ""))
    assert empty.status_code == 400 and error_of(empty)["code"] == 100
    assert [len(m["text"]) for m in sandbox.inbox(number)] == [4096]


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"to": "15550100011"}, 131009),
        ({"to": "+1"}, 131009),
        ({"messaging_product": "sms"}, 100),
        ({"type": "image", "image": {"link": "https://example.com/a.png"}}, 131051),
        ({"biz_opaque_callback_data": "c" * 513}, 100),
    ],
)
def test_payload_rules(sandbox: SandboxProcess, change: dict[str, Any], code: int) -> None:
    sandbox.set_window("+15550100011", 60)
    response = post_raw(sandbox, {**text_payload("+15550100011"), **change})
    assert response.status_code == 400
    assert error_of(response)["code"] == code
    assert sandbox.inboxes() == {}


def test_callback_data_up_to_512_characters_is_kept(sandbox: SandboxProcess) -> None:
    sandbox.set_window("+15550100012", 60)
    send_text(sandbox, "+15550100012", callback_data="d" * 512)
    assert sandbox.inbox("+15550100012")[0]["callback_data"] == "d" * 512


@pytest.mark.parametrize(
    ("name", "language", "parameters", "code"),
    [
        ("plan_ready", "en", ["Ana"], 132001),
        ("document_ready", "fr", ["Ana"], 132001),
        ("document_ready", "pt", ["Ana"], 132001),
        ("document_ready", "en", [], 132000),
        ("document_ready", "en", ["Ana", "Bea"], 132000),
        ("document_ready", "en", ["Ana\nBea"], 132018),
        ("document_ready", "en", ["Ana\tBea"], 132018),
        ("document_ready", "en", ["Ana     Bea"], 132018),
    ],
)
def test_template_rules(
    sandbox: SandboxProcess, name: str, language: str, parameters: list[str], code: int
) -> None:
    with pytest.raises(TemplateRefused) as raised:
        send_template(sandbox, "+15550100013", parameters, name=name, language=language)
    assert raised.value.code == code and raised.value.http_status == 400
    assert sandbox.inboxes() == {}


def test_template_parameter_with_four_spaces_is_fine(sandbox: SandboxProcess) -> None:
    send_template(sandbox, "+15550100014", ["Ana    Bea"])
    assert sandbox.inbox("+15550100014")[0]["template"]["parameters"] == ["Ana    Bea"]


# --- the 24-hour window -----------------------------------------------------------------


def test_text_outside_the_window_is_refused_synchronously(sandbox: SandboxProcess) -> None:
    number = "+15550100020"
    raw = post_raw(sandbox, text_payload(number))
    assert raw.status_code == 400
    error = error_of(raw)
    assert (error["code"], error["message"]) == (131047, "Re-engagement message")
    assert error["error_data"]["details"] == REENGAGEMENT_DETAILS

    with pytest.raises(ReEngagementRequired) as raised:
        send_text(sandbox, number)
    assert raised.value.details == REENGAGEMENT_DETAILS
    assert sandbox.inbox(number) == []
    assert sandbox.stats()["rejected_by_code"]["131047"] == 2


def test_window_age_decides(sandbox: SandboxProcess) -> None:
    number = "+15550100021"
    sandbox.set_window(number, 23 * 3600)
    send_text(sandbox, number, "inside")
    sandbox.set_window(number, 24 * 3600 + 5)
    with pytest.raises(ReEngagementRequired):
        send_text(sandbox, number, "outside")
    assert sandbox.person(number)["window_open"] is False
    sandbox.set_window(number, None)
    with pytest.raises(ReEngagementRequired):
        send_text(sandbox, number, "never wrote")
    assert [m["text"] for m in sandbox.inbox(number)] == ["inside"]


def test_templates_are_allowed_outside_the_window_and_do_not_open_it(
    sandbox: SandboxProcess,
) -> None:
    number = "+15550100022"
    wamid = send_template(sandbox, number, ["Ana"], language="pt_BR", callback_data="knock:7")
    [message] = sandbox.inbox(number)
    assert message["id"] == wamid and message["type"] == "template"
    assert message["template"] == {
        "name": "document_ready",
        "language": "pt_BR",
        "parameters": ["Ana"],
    }
    assert message["text"].startswith("Olá Ana")
    assert message["callback_data"] == "knock:7"
    with pytest.raises(ReEngagementRequired):
        send_text(sandbox, number)


def test_async_refusal_accepts_then_posts_a_failed_status(
    sandbox: SandboxProcess, hooked: WebhookReceiver
) -> None:
    number = "+15550100023"
    sandbox.faults(refusal_mode="async")
    wamid = send_text(sandbox, number, callback_data="doc:9:chunk:0")
    assert wamid.startswith("wamid.")
    assert sandbox.inbox(number) == []
    [failure] = sandbox.failures()
    assert (failure["id"], failure["code"], failure["to"]) == (wamid, 131047, number)
    assert sandbox.stats()["refused_async"] == 1

    hooked.wait_for(lambda got: any(s["id"] == wamid for w in got for s in w.statuses()))
    sandbox.wait_webhooks_idle()
    [webhook] = [w for w in hooked.received if any(s["id"] == wamid for s in w.statuses())]
    assert webhook.signature_valid(SECRET)
    assert not webhook.signature_valid("another-secret")
    [status] = webhook.statuses()
    assert status["status"] == "failed"
    assert status["recipient_id"] == number[1:]
    assert status["biz_opaque_callback_data"] == "doc:9:chunk:0"
    assert status["errors"] == [
        {
            "code": 131047,
            "title": "Re-engagement message",
            "message": "Re-engagement message",
            "error_data": {"details": REENGAGEMENT_DETAILS},
        }
    ]
    assert isinstance(from_error_object(status["errors"][0]), ReEngagementRequired)
    assert [s["status"] for s in statuses_for(hooked, wamid)] == ["failed"]


def test_unreachable_person_sync_and_async(
    sandbox: SandboxProcess, hooked: WebhookReceiver
) -> None:
    number = "+15550100024"
    sandbox.say(number, "hi")
    assert sandbox.set_unreachable(number)["unreachable"] == "sync"
    with pytest.raises(RecipientUnreachable) as raised:
        send_text(sandbox, number)
    assert raised.value.code == 131026
    with pytest.raises(RecipientUnreachable):
        send_template(sandbox, number)

    sandbox.set_unreachable(number, mode="async")
    wamid = send_text(sandbox, number, callback_data="doc:3:chunk:0")
    hooked.wait_for(lambda _: len(statuses_for(hooked, wamid)) == 1)
    [status] = statuses_for(hooked, wamid)
    assert status["status"] == "failed" and status["errors"][0]["code"] == 131026
    assert isinstance(from_error_object(status["errors"][0]), RecipientUnreachable)
    assert [f["code"] for f in sandbox.failures()] == [131026]

    sandbox.set_unreachable(number, unreachable=False)
    send_text(sandbox, number)
    assert len(sandbox.inbox(number)) == 1


# --- inbound ----------


def test_inbound_message_opens_the_window_and_posts_a_signed_webhook(
    sandbox: SandboxProcess, hooked: WebhookReceiver
) -> None:
    number = "+15550100030"
    with pytest.raises(ReEngagementRequired):
        send_text(sandbox, number)
    wamid = sandbox.say(number, "olá, quero o plano ✓", name="Ana")
    assert sandbox.person(number)["window_open"] is True
    send_text(sandbox, number, "here it is")
    assert [m["text"] for m in sandbox.inbox(number)] == ["here it is"]

    received = hooked.wait_for(lambda got: any(w.messages() for w in about(got, number)))
    [webhook] = [w for w in about(received, number) if w.messages()]
    assert webhook.signature_valid(SECRET)
    assert b"\\u2713" in webhook.body  # escaped unicode, as Meta signs it
    [value] = list(webhook.values())
    assert value["metadata"]["phone_number_id"] == sandbox.phone_number_id
    # Since 2026 the platform names everybody's business-scoped user id too.
    user_id = sandbox.person(number)["user_id"]
    assert user_id.startswith("US.")
    assert value["contacts"] == [
        {"profile": {"name": "Ana"}, "wa_id": number[1:], "user_id": user_id}
    ]
    [message] = value["messages"]
    assert message["id"] == wamid and message["from"] == number[1:]
    assert message["from_user_id"] == user_id
    assert message["type"] == "text" and message["text"] == {"body": "olá, quero o plano ✓"}
    assert message["timestamp"].isdigit()
    assert abs(int(message["timestamp"]) - time.time()) < 60


def test_the_window_is_the_persons_with_one_business_number(
    sandbox: SandboxProcess, hooked: WebhookReceiver
) -> None:
    """A person who writes to one of the token's numbers opens that number's window
    only; the webhooks name the number they concern in their metadata."""
    other = "300000000000009"
    sandbox.faults(numbers={other: None})
    number = "+15550100031"
    sandbox.say(number, "hi", to=other)
    with pytest.raises(ReEngagementRequired):
        send_text(sandbox, number, "from the default number")
    wamid = with_client(
        sandbox, lambda c: c.send_text(number, "from the other"), phone_number_id=other
    )
    described = sandbox.person(number)
    assert described["window_open"] is False  # the default number's, as with one number
    assert described["windows"][other]["open"] is True

    def values(got: list[ReceivedWebhook]) -> list[dict[str, Any]]:
        return [v for w in about(got, number) for v in w.values()]

    received = hooked.wait_for(
        lambda got: (
            any(v.get("messages") for v in values(got))
            and any(s["id"] == wamid for v in values(got) for s in v.get("statuses", []))
        )
    )
    [inbound] = [v for v in values(received) if v.get("messages")]
    assert inbound["metadata"] == {
        "display_phone_number": "1555" + other[-7:],
        "phone_number_id": other,
    }
    status = next(
        v for v in values(received) if any(s["id"] == wamid for s in v.get("statuses", []))
    )
    assert status["metadata"]["phone_number_id"] == other

    sandbox.set_window(number, 60, phone_number_id=sandbox.phone_number_id)
    send_text(sandbox, number, "now the default number may")
    sandbox.set_window(number, None)  # no number named: every number's
    assert not any(w["open"] for w in sandbox.person(number)["windows"].values())
    answer = sandbox.http.post(
        f"/_sandbox/people/{number}/messages", json={"text": "hi", "to": "999"}
    )
    assert answer.status_code == 400 and "plays no business number '999'" in answer.text


def test_person_paths_accept_plus_and_percent_encoded_plus(sandbox: SandboxProcess) -> None:
    for path_number in ("+15550100031", "%2B15550100031"):
        response = sandbox.http.post(
            f"/_sandbox/people/{path_number}/messages", json={"text": "hi"}
        )
        assert response.status_code == 200 and response.json()["id"].startswith("wamid.")
    assert sandbox.person("+15550100031")["written"][1]["text"] == "hi"
    assert sandbox.http.get("/_sandbox/people/+15550100031/inbox").json() == []
    bad = sandbox.http.post("/_sandbox/people/+12/messages", json={"text": "hi"})
    assert bad.status_code == 400


# --- status webhooks ----------


def test_status_webhooks_sent_delivered_read_echo_callback_data(
    sandbox: SandboxProcess, hooked: WebhookReceiver
) -> None:
    number = "+15550100040"
    sandbox.faults(read_rate=1.0)
    sandbox.set_window(number, 60)
    wamid = send_text(sandbox, number, "chunk", callback_data="doc:1:chunk:2")
    hooked.wait_for(lambda _: len(statuses_for(hooked, wamid)) == 3)
    statuses = statuses_for(hooked, wamid)
    assert [s["status"] for s in statuses] == ["sent", "delivered", "read"]
    for status in statuses:
        assert status["biz_opaque_callback_data"] == "doc:1:chunk:2"
        assert status["recipient_id"] == number[1:]
        assert status["timestamp"].isdigit()
    assert statuses[0]["pricing"]["category"] == "service"
    assert "conversation" in statuses[0]
    assert all(w.signature_valid(SECRET) for w in hooked.received)


def test_no_read_status_when_read_rate_is_zero(
    sandbox: SandboxProcess, hooked: WebhookReceiver
) -> None:
    wamid = send_template(sandbox, "+15550100041")
    sandbox.wait_webhooks_idle()
    statuses = statuses_for(hooked, wamid)
    assert [s["status"] for s in statuses] == ["sent", "delivered"]
    assert "biz_opaque_callback_data" not in statuses[0]
    assert statuses[0]["pricing"]["category"] == "utility"


def test_statuses_can_be_batched(sandbox: SandboxProcess, hooked: WebhookReceiver) -> None:
    sandbox.faults(status_batch=50, status_delay_ms=100)

    async def burst(client: CloudApiClient) -> list[str]:
        numbers = [f"+1555010005{i}" for i in range(8)]
        return list(
            await asyncio.gather(
                *(client.send_template(n, "document_ready", "en", ["Ana"]) for n in numbers)
            )
        )

    wamids = with_client(sandbox, burst)
    stats = sandbox.wait_webhooks_idle()
    assert stats["webhooks_posted_by_kind"] == {"sent": 8, "delivered": 8}
    assert stats["webhooks_posted"] < 16
    assert sorted(s["id"] for s in hooked.statuses() if s["status"] == "sent") == sorted(wamids)


def test_statuses_can_be_disabled(sandbox: SandboxProcess, hooked: WebhookReceiver) -> None:
    number = "+15550100042"
    sandbox.faults(statuses_enabled=False)
    send_template(sandbox, number)
    sandbox.say(number, "hello")
    sandbox.wait_webhooks_idle()
    [webhook] = about(hooked.received, number)
    assert (len(webhook.statuses()), len(webhook.messages())) == (0, 1)


def test_a_non_200_answer_is_redelivered_with_the_same_bytes(
    sandbox: SandboxProcess, hooked: WebhookReceiver
) -> None:
    sandbox.faults(statuses_enabled=False)
    hooked.answer_next(500, 503)
    sandbox.say("+15550100043", "hello")
    attempts = about(
        hooked.wait_for(lambda got: len(about(got, "+15550100043")) == 3), "+15550100043"
    )
    assert [w.answered for w in attempts] == [500, 503, 200]
    assert len({w.body for w in attempts}) == 1
    assert all(w.signature_valid(SECRET) for w in attempts)
    stats = sandbox.wait_webhooks_idle()
    assert (stats["webhooks_retried"], stats["webhooks_posted"], stats["webhooks_failed"]) == (
        2,
        1,
        0,
    )


def test_redelivery_is_bounded(sandbox: SandboxProcess, hooked: WebhookReceiver) -> None:
    sandbox.faults(statuses_enabled=False)
    hooked.answer_always(500)
    sandbox.say("+15550100044", "hello")
    hooked.wait_for(lambda got: len(about(got, "+15550100044")) == 4)
    stats = sandbox.wait_webhooks_idle()
    assert (stats["webhooks_retried"], stats["webhooks_failed"], stats["webhooks_posted"]) == (
        3,
        1,
        0,
    )
    time.sleep(0.3)
    assert len(about(hooked.received, "+15550100044")) == 4


# --- limits ----------


def test_throughput_limit_is_130429(sandbox: SandboxProcess) -> None:
    sandbox.faults(throughput_limit=5, pair_rate_enabled=False)

    async def eight(client: CloudApiClient) -> list[Any]:
        outcomes: list[Any] = []
        for i in range(8):
            try:
                outcomes.append(
                    await client.send_template(f"+1555010006{i}", "document_ready", "en", ["Ana"])
                )
            except Throttled as exc:
                outcomes.append(exc)
        return outcomes

    outcomes = with_client(sandbox, eight)
    assert all(isinstance(o, str) for o in outcomes[:5])
    assert [o.code for o in outcomes[5:]] == [130429] * 3
    stats = sandbox.stats()
    assert stats["accepted"] == 5 and stats["throttled"] == 3
    assert stats["rejected_by_code"] == {"130429": 3}
    assert len(sandbox.inboxes()) == 5


def test_the_throughput_limit_counts_a_request_when_it_arrived(sandbox: SandboxProcess) -> None:
    """Two requests pipelined on one connection arrive together; uvicorn starts the
    second's handler only once the first has answered (here after 300 ms of
    latency). The limit counts both at their arrival, not at their handlers."""
    import socket
    from urllib.parse import urlsplit

    number = "+15550100089"
    sandbox.set_window(number, 60)
    sandbox.faults(latency_ms=300, pair_rate_enabled=False)
    url = urlsplit(sandbox.messages_url)
    requests = b""
    for body in ("first", "second"):
        data = json.dumps(text_payload(number, body)).encode()
        requests += (
            f"POST {url.path} HTTP/1.1\r\nHost: {url.netloc}\r\n"
            f"Authorization: Bearer {sandbox.access_token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
        ).encode() + data
    with socket.create_connection((url.hostname, url.port), timeout=10) as conn:
        conn.sendall(requests)
        answers = b""
        while answers.count(b"HTTP/1.1 200") < 2:
            chunk = conn.recv(65536)
            assert chunk, answers
            answers += chunk
    first, second = (dt.datetime.fromisoformat(m["arrived"]) for m in sandbox.inbox(number))
    assert second - first < dt.timedelta(milliseconds=150), (first, second)


@pytest.mark.solo
def test_a_request_is_counted_when_it_arrived_while_the_sandbox_was_not_running(
    sandbox: SandboxProcess,
) -> None:
    """A sandbox process the machine did not run for a while (stopped here) reads
    the request late; the kernel says when it came, and the limit counts that."""
    import os
    import signal
    import threading

    number = "+15550100088"
    sandbox.set_window(number, 60)
    answers: list[httpx.Response] = []
    os.kill(sandbox.pid, signal.SIGSTOP)
    try:
        sent = dt.datetime.now(dt.UTC)
        poster = threading.Thread(
            target=lambda: answers.append(post_raw(sandbox, text_payload(number, "late read")))
        )
        poster.start()
        time.sleep(0.3)
    finally:
        os.kill(sandbox.pid, signal.SIGCONT)
    poster.join(timeout=10)
    assert answers and answers[0].status_code == 200
    (message,) = sandbox.inbox(number)
    assert dt.datetime.fromisoformat(message["arrived"]) - sent < dt.timedelta(milliseconds=150)


def test_pair_rate_limit_is_131056_per_recipient(sandbox: SandboxProcess) -> None:
    sandbox.faults(pair_burst=3, pair_refill_seconds=60)
    for _ in range(3):
        send_template(sandbox, "+15550100070")
    with pytest.raises(Throttled) as raised:
        send_template(sandbox, "+15550100070")
    assert raised.value.code == 131056
    send_template(sandbox, "+15550100071")  # somebody else is unaffected
    assert len(sandbox.inbox("+15550100070")) == 3

    sandbox.faults(pair_rate_enabled=False)
    send_template(sandbox, "+15550100070")
    assert len(sandbox.inbox("+15550100070")) == 4


def test_pair_rate_defaults_allow_a_nine_chunk_plan(sandbox: SandboxProcess) -> None:
    number = "+15550100072"
    sandbox.set_window(number, 60)
    for index in range(9):
        send_text(sandbox, number, f"chunk {index}")
    assert len(sandbox.inbox(number)) == 9


# --- fault injection ----------


def test_injected_5xx_is_a_transient_error_and_not_recorded(sandbox: SandboxProcess) -> None:
    sandbox.faults(error_5xx_rate=1.0)
    for _ in range(4):
        with pytest.raises(TransientError) as raised:
            send_template(sandbox, "+15550100080")
        assert (raised.value.http_status, raised.value.code) in {(500, 131000), (503, 2)}
    assert sandbox.inboxes() == {}
    assert sandbox.stats()["injected_5xx"] == 4


def test_drop_after_accept_records_the_message_but_breaks_the_answer(
    sandbox: SandboxProcess, hooked: WebhookReceiver
) -> None:
    number = "+15550100081"
    sandbox.set_window(number, 60)
    sandbox.faults(drop_after_accept_rate=1.0)
    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
        post_raw(sandbox, text_payload(number, "first", biz_opaque_callback_data="c:1"))
    with pytest.raises(SendOutcomeUnknown):
        send_text(sandbox, number, "second", callback_data="c:2")
    inbox = sandbox.inbox(number)
    assert [m["text"] for m in inbox] == ["first", "second"]
    assert sandbox.stats()["dropped"] == 2
    # The status webhooks still settle what the lost answers could not.
    hooked.wait_for(lambda _: len(statuses_for(hooked, inbox[1]["id"])) == 2)
    assert statuses_for(hooked, inbox[1]["id"])[0]["biz_opaque_callback_data"] == "c:2"
    assert "without completing response" not in sandbox.log()


@pytest.mark.solo
def test_latency_is_applied_without_blocking_other_requests(sandbox: SandboxProcess) -> None:
    sandbox.faults(latency_ms=300, pair_rate_enabled=False)

    async def timed(client: CloudApiClient) -> tuple[float, float]:
        started = time.perf_counter()
        await client.send_template("+15550100090", "document_ready", "en", ["Ana"])
        single = time.perf_counter() - started
        started = time.perf_counter()
        await asyncio.gather(
            *(
                client.send_template(f"+1555010009{i}", "document_ready", "en", ["Ana"])
                for i in range(10)
            )
        )
        return single, time.perf_counter() - started

    single, ten_at_once = with_client(sandbox, timed)
    assert single >= 0.3
    assert ten_at_once < 1.5  # ten serialised sends would take 3 s

    async def stats_during_send(client: CloudApiClient) -> float:
        send = asyncio.create_task(
            client.send_template("+15550100099", "document_ready", "en", ["Ana"])
        )
        await asyncio.sleep(0.05)
        async with httpx.AsyncClient() as other:
            started = time.perf_counter()
            (await other.get(f"{sandbox.url}/_sandbox/stats")).raise_for_status()
            elapsed = time.perf_counter() - started
        await send
        return elapsed

    assert with_client(sandbox, stats_during_send) < 0.2


def test_seeded_faults_are_reproducible(sandbox: SandboxProcess) -> None:
    def outcomes() -> list[bool]:
        async def run(client: CloudApiClient) -> list[bool]:
            results = []
            for i in range(20):
                try:
                    await client.send_template(
                        f"+155501001{i:02d}", "document_ready", "en", ["Ana"]
                    )
                    results.append(True)
                except TransientError:
                    results.append(False)
            return results

        return with_client(sandbox, run)

    sandbox.faults(error_5xx_rate=0.5, seed=7)
    first = outcomes()
    sandbox.faults(seed=7)
    assert outcomes() == first
    assert True in first and False in first


# --- controls ----------


def test_faults_rejects_unknown_keys_and_bad_values(sandbox: SandboxProcess) -> None:
    unknown = sandbox.http.post("/_sandbox/faults", json={"latency": 5, "bogus": 1})
    assert unknown.status_code == 400
    assert unknown.json()["error"]["unknown_keys"] == ["bogus", "latency"]
    bad = sandbox.http.post("/_sandbox/faults", json={"refusal_mode": "later"})
    assert bad.status_code == 400 and "refusal_mode" in bad.json()["error"]["message"]
    rate = sandbox.http.post("/_sandbox/faults", json={"error_5xx_rate": 2})
    assert rate.status_code == 400

    config = sandbox.faults(app_secret="very-secret", access_token="token-value")
    text = json.dumps(config)
    assert "very-secret" not in text and "token-value" not in text
    assert config["app_secret_set"] is True
    assert config["latency_ms"] == 0


def test_reset_forgets_state_and_restores_the_startup_config(sandbox: SandboxProcess) -> None:
    startup = sandbox.config()
    sandbox.faults(latency_ms=5, refusal_mode="async", throughput_limit=3)
    send_text(sandbox, "+15550100110")  # async refusal: a failure
    sandbox.say("+15550100111", "hi")
    send_text(sandbox, "+15550100111")
    sandbox.http.post("/_sandbox/ops", json={"text": "alert"}).raise_for_status()
    assert sandbox.stats()["accepted"] == 2

    sandbox.reset()
    assert sandbox.config() == startup
    assert sandbox.inboxes() == {} and sandbox.failures() == [] and sandbox.ops_alerts() == []
    assert sandbox.person("+15550100111")["window_open"] is False
    stats = sandbox.stats()
    assert (stats["accepted"], stats["inbound"], stats["rejected"], stats["people"]) == (0, 0, 0, 0)


def test_ops_alert_sink(sandbox: SandboxProcess) -> None:
    alert = {"text": ":rotating_light: queue depth 12", "blocks": [{"type": "section"}]}
    response = sandbox.http.post("/_sandbox/ops", json=alert)
    assert response.status_code == 200
    assert sandbox.ops_alerts() == [alert]


@pytest.mark.solo
def test_sustains_over_a_thousand_sends_per_second(sandbox: SandboxProcess) -> None:
    sandbox.faults(throughput_limit=0, pair_rate_enabled=False)
    body = json.dumps(template_payload("+15550100120", [_param("Ana")])).encode()
    request = (
        f"POST /v25.0/{sandbox.phone_number_id}/messages HTTP/1.1\r\nHost: sandbox\r\n"
        f"Authorization: Bearer {sandbox.access_token}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body

    async def connection(count: int) -> None:
        # A bare keep-alive HTTP/1.1 client: httpx itself is slower than the sandbox.
        reader, writer = await asyncio.open_connection("127.0.0.1", sandbox.port)
        for _ in range(count):
            writer.write(request)
            assert (await reader.readline()).split()[1] == b"200"
            length = 0
            while (line := await reader.readline()) != b"\r\n":
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            await reader.readexactly(length)
        writer.close()

    async def load() -> float:
        started = time.perf_counter()
        await asyncio.gather(*(connection(125) for _ in range(16)))
        return 2000 / (time.perf_counter() - started)

    rate = asyncio.run(load())
    assert sandbox.stats()["accepted"] == 2000
    assert rate > 1000, f"{rate:.0f} sends/s"


# --- startup configuration ----------


def test_startup_config_comes_from_the_environment(receiver: WebhookReceiver) -> None:
    with start_sandbox(
        SANDBOX_WEBHOOK_URL=receiver.url,
        SANDBOX_APP_SECRET="env-secret",
        SANDBOX_REFUSAL_MODE="async",
        SANDBOX_LATENCY_MS="5",
        SANDBOX_THROUGHPUT_LIMIT="7",
        SANDBOX_READ_RATE="0.5",
        SANDBOX_PAIR_RATE="off",
    ) as other:
        config = other.config()
        assert (config["refusal_mode"], config["latency_ms"], config["throughput_limit"]) == (
            "async",
            5.0,
            7,
        )
        assert (config["read_rate"], config["pair_rate_enabled"]) == (0.5, False)
        assert config["webhook_url"] == receiver.url and config["app_secret_set"] is True
        wamid = send_text(other, "+15550100130")
        webhooks = receiver.wait_for(
            lambda got: any(s["id"] == wamid for w in got for s in w.statuses())
        )
        assert all(w.signature_valid("env-secret") for w in webhooks)
        other.faults(refusal_mode="sync")
        other.reset()
        assert other.config()["refusal_mode"] == "async"
        assert "env-secret" not in other.log()


def test_it_signs_with_its_development_key_not_the_services_secret(
    receiver: WebhookReceiver,
) -> None:
    """WHATSAPP_APP_SECRET is the real service's: a sandbox started in that environment
    must not sign what the real service accepts."""
    with start_sandbox(
        SANDBOX_WEBHOOK_URL=receiver.url, WHATSAPP_APP_SECRET="real-secret"
    ) as other:
        other.say("+15550100131", "hi")
        wamid = send_text(other, "+15550100131")
        webhooks = receiver.wait_for(
            lambda got: any(s["id"] == wamid for w in got for s in w.statuses())
        )
        assert all(w.signature_valid(DEV_APP_SECRET) for w in webhooks)
        assert not any(w.signature_valid("real-secret") for w in webhooks)


# --- who may drive the controls ----------


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::1]", "localhost:8765"])
def test_the_controls_answer_a_loopback_host(sandbox: SandboxProcess, host: str) -> None:
    assert sandbox.http.get("/_sandbox/inboxes", headers={"Host": host}).status_code == 200
    changed = sandbox.http.post("/_sandbox/faults", json={"latency_ms": 1}, headers={"Host": host})
    assert changed.status_code == 200


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:8765", "127.0.0.1.evil.example", ""]
)
def test_a_rebound_name_reads_no_inbox(sandbox: SandboxProcess, host: str) -> None:
    sandbox.say("+15550100140", "hi")
    send_text(sandbox, "+15550100140")
    read = sandbox.http.get("/_sandbox/inboxes", headers={"Host": host})
    assert read.status_code == 403 and "loopback" in read.json()["error"]["message"]
    assert "+15550100140" not in read.text


def test_a_web_page_cannot_drive_the_controls(sandbox: SandboxProcess) -> None:
    writes = "/_sandbox/people/+15550100141/messages"
    refused = [
        # a form
        sandbox.http.post(writes, data={"text": "hi"}),
        # a script's simple request: text/plain, or no body at all
        sandbox.http.post(
            writes, content=b'{"text": "hi"}', headers={"Content-Type": "text/plain"}
        ),
        sandbox.http.post("/_sandbox/reset"),
        sandbox.http.delete("/_sandbox/refusals"),
    ]
    assert [r.status_code for r in refused] == [415, 415, 415, 415]
    # JSON, but sent by a page elsewhere (the browser names it)
    page = sandbox.http.post(
        writes, json={"text": "hi"}, headers={"Origin": "https://evil.example"}
    )
    assert page.status_code == 403
    assert sandbox.person("+15550100141")["written"] == []
    # the same from a page of this machine, or from a program (no Origin)
    local = {"Origin": "http://localhost:3000"}
    assert sandbox.http.post(writes, json={"text": "hi"}, headers=local).status_code == 200
    assert sandbox.http.post(writes, json={"text": "hi"}).status_code == 200


def test_the_cloud_api_endpoints_answer_any_host(sandbox: SandboxProcess) -> None:
    """A sender reaches the API by whatever name it was given (a container's, say)."""
    answered = sandbox.http.get(
        f"/v25.0/{sandbox.phone_number_id}",
        headers={"Host": "sandbox:8765", "Authorization": f"Bearer {sandbox.access_token}"},
    )
    assert answered.status_code == 200


def test_bad_startup_config_fails_loudly() -> None:
    with pytest.raises(RuntimeError, match="SANDBOX_REFUSAL_MODE"):
        start_sandbox(SANDBOX_REFUSAL_MODE="later")


def test_an_answer_that_trickles_forever_is_an_unknown_outcome_after_the_send_timeout(
    sandbox: SandboxProcess,
) -> None:
    """The sandbox accepts, then sends its answer a byte every 0.2 s for 20 s: each read
    gets data, so only the client's total timeout (connect + WHATSAPP_SEND_TIMEOUT)
    ends the wait."""
    number = "+15550100083"
    sandbox.set_window(number, 60)
    sandbox.faults(stall_after_accept_rate=1.0, stall_ms=20_000)

    async def send() -> str:
        async with CloudApiClient(
            sandbox.url, sandbox.phone_number_id, sandbox.access_token, timeout=1.0
        ) as client:
            return await client.send_text(number, "slow", callback_data="c:stall")

    with pytest.raises(SendOutcomeUnknown):
        asyncio.run(send())
    assert [m["text"] for m in sandbox.inbox(number)] == ["slow"], "accepted all the same"
    assert sandbox.stats()["stalled"] == 1


# --- any code on demand ----------


def test_any_code_on_demand_sync_then_async_counted_down(sandbox: SandboxProcess) -> None:
    number = "+15550100077"
    sandbox.say(number, "hi")
    sandbox.refuse(131064, "sync", to=number, count=1)
    sandbox.refuse(137000, "async", to=number, message_type="text", count=1)
    first = post_raw(sandbox, text_payload(number))
    assert first.status_code == 400 and error_of(first)["code"] == 131064
    second = post_raw(sandbox, text_payload(number))
    assert second.status_code == 200, "async: accepted, then a failed status"
    [failure] = [f for f in sandbox.failures() if f["to"] == number]
    assert failure["code"] == 137000
    third = post_raw(sandbox, text_payload(number))
    assert third.status_code == 200 and sandbox.inbox(number), "both refusals used up"
    assert [r["used"] for r in sandbox._call("GET", "/_sandbox/refusals")] == [1, 1]
    sandbox.clear_refusals()
    assert sandbox._call("GET", "/_sandbox/refusals") == []


def test_a_refusal_for_one_type_spares_the_other(sandbox: SandboxProcess) -> None:
    number = "+15550100078"
    sandbox.say(number, "hi")
    sandbox.refuse(132015, "sync", message_type="template")
    assert post_raw(sandbox, text_payload(number)).status_code == 200
    refused = post_raw(sandbox, template_payload(number, [{"type": "text", "text": "A"}]))
    assert refused.status_code == 400 and error_of(refused)["code"] == 132015


def test_a_bad_refusal_request_is_told_what_to_send(sandbox: SandboxProcess) -> None:
    response = sandbox.http.post("/_sandbox/refusals", json={"code": "190"})
    assert response.status_code == 400 and '"code": <int>' in response.json()["error"]["message"]
