"""The client's own rules, over httpx's in-memory transport: a hand-over always carries
an Idempotency-Key and keeps it on every retry; a resend is never retried blind; a
refusal is an ApiError naming the field."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from delivery_pipeline.client import ApiError, AsyncDeliveryClient, DeliveryClient
from delivery_pipeline.client import http as client_http


@pytest.fixture(autouse=True)
def _no_waiting(monkeypatch):
    monkeypatch.setattr(client_http, "RETRY_AFTER_MAX_SECONDS", 0.0)
    monkeypatch.setattr(client_http.time, "sleep", lambda seconds: None)


def _recording(
    answers: list[httpx.Response | Exception],
) -> tuple[list[httpx.Request], httpx.MockTransport]:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    return seen, httpx.MockTransport(handle)


def test_a_hand_over_retries_under_one_key_it_made():
    seen, transport = _recording(
        [
            httpx.ConnectError("refused"),
            httpx.Response(503, headers={"Retry-After": "1"}, json={"status": 503}),
            httpx.Response(201, json={"id": 7, "state": "undelivered"}),
        ]
    )
    with DeliveryClient("http://delivery", "t0ken-of-enough-length", transport=transport) as api:
        document = api.hand_over({"phone": "+15550001111"}, "plan", "Text.")
    assert document["id"] == 7
    keys = {request.headers["idempotency-key"] for request in seen}
    assert len(seen) == 3 and len(keys) == 1
    assert json.loads(seen[0].content) == {
        "person": {"phone": "+15550001111"},
        "kind": "plan",
        "body": "Text.",
    }
    assert seen[0].headers["authorization"] == "Bearer t0ken-of-enough-length"


def test_a_resend_whose_answer_was_lost_is_not_sent_again():
    seen, transport = _recording([httpx.ReadTimeout("no answer")])
    with DeliveryClient("http://delivery", "t0ken-of-enough-length", transport=transport) as api:
        with pytest.raises(httpx.ReadTimeout):
            api.resend(7)
    assert len(seen) == 1


def test_a_refusal_names_its_field():
    problem = {"status": 422, "field": "person.phone", "detail": "person.phone: not E.164"}
    _, transport = _recording([httpx.Response(422, json=problem)])
    with DeliveryClient("http://delivery", "t0ken-of-enough-length", transport=transport) as api:
        with pytest.raises(ApiError) as refused:
            api.hand_over({"phone": "5550001111"}, "plan", "Text.", idempotency_key="job-1")
    assert (refused.value.status, refused.value.field) == (422, "person.phone")


def test_the_async_client_says_the_same(monkeypatch):
    async def no_sleep(seconds: float) -> None:
        return None

    monkeypatch.setattr(client_http.asyncio, "sleep", no_sleep)
    seen: list[httpx.Request] = []

    async def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if len(seen) == 1:
            return httpx.Response(429, headers={"Retry-After": "2"}, json={"status": 429})
        return httpx.Response(200, json={"id": 3, "key": "user/1"})

    async def run() -> dict:
        async with AsyncDeliveryClient(
            "http://delivery", "t0ken-of-enough-length", transport=httpx.MockTransport(handle)
        ) as api:
            return await api.put_person("user/1", locale="pt")

    assert asyncio.run(run()) == {"id": 3, "key": "user/1"}
    assert [r.url.path for r in seen] == ["/v1/people/user%2F1"] * 2 or [
        r.url.raw_path for r in seen
    ] == [b"/v1/people/user%2F1"] * 2
