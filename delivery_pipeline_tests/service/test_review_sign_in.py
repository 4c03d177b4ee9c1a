"""The review page's sign-in over real HTTP, on two real service processes sharing
one database: the limits on wrong tokens hold for the fleet, signing out ends a
session on every replica, and behind a load balancer the cookie is ``Secure``
once the balancer is trusted.

Clients are told apart by ``X-Forwarded-For``: the tests' requests come from
127.0.0.1, the trusted proxy by default (``DELIVERY_TRUSTED_PROXIES``), as a
load balancer's would. The load balancer of the last test is 127.0.0.2.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from delivery_pipeline.service.sessions import COOKIE_NAME
from delivery_pipeline.testing.service import ServiceProcess, start_service
from delivery_pipeline_tests.support.review import post_sign_in

pytestmark = pytest.mark.slow

TOKEN = "the-reviewers-own-long-token"
WINDOW = 15 * 60


@pytest.fixture
def replicas(database_url, sandbox) -> Iterator[tuple[ServiceProcess, ServiceProcess]]:
    first = start_service(database_url, sandbox.url, REVIEW_TOKEN=TOKEN)
    try:
        with start_service(database_url, sandbox.url, REVIEW_TOKEN=TOKEN) as second:
            yield first, second
    finally:
        first.stop()


def attempt(service: ServiceProcess, token: str, client: str, name: str = "Eve") -> httpx.Response:
    with httpx.Client(base_url=service.url, timeout=30) as http:
        return post_sign_in(http, name, token, headers={"X-Forwarded-For": client})


def assert_held(response: httpx.Response, *, everyone: bool = False) -> int:
    assert response.status_code == 429, (response.status_code, response.text)
    retry_after = int(response.headers["retry-after"])
    assert 1 <= retry_after <= WINDOW
    assert re.search(r"Try again in [\dhms ]+, at \d\d:\d\d UTC", response.text), response.text
    said = "paused for addresses that have not signed in before"
    assert (said in response.text) == everyone, response.text
    assert COOKIE_NAME not in response.cookies
    return retry_after


def test_a_burst_of_wrong_tokens_on_two_replicas_is_checked_exactly_the_limit(replicas, db):
    first, second = replicas
    attacker = "198.51.100.7"

    def guess(i: int) -> httpx.Response:
        return attempt((first, second)[i % 2], f"guess-number-{i:04d}-of-many", attacker)

    with ThreadPoolExecutor(max_workers=16) as pool:
        answers = list(pool.map(guess, range(300)))

    statuses = Counter(answer.status_code for answer in answers)
    assert statuses == {401: 10, 429: 290}, statuses
    for answer in answers:
        if answer.status_code == 429:
            assert_held(answer)
    # held means not checked: the right token from that client waits too, on either replica
    for service in replicas:
        assert_held(attempt(service, TOKEN, attacker, "Rita"))
    # another client is not held by the attacker's failures
    assert attempt(second, TOKEN, "198.51.100.8", "Sam").status_code == 303
    # once the failures leave the window the client may try again
    db.execute(
        "UPDATE review_sign_in_failures SET failed_at = failed_at - make_interval(secs => %s)",
        (WINDOW,),
    )
    assert attempt(first, TOKEN, attacker, "Rita").status_code == 303


def test_an_attack_from_many_addresses_holds_strangers_and_never_the_known_reviewers(replicas):
    first, second = replicas
    rita = "203.0.113.10"
    assert attempt(first, TOKEN, rita, "Rita").status_code == 303  # she has signed in here before
    # 100 wrong tokens from 20 addresses, 5 each (under the per-client limit), both replicas
    for i in range(100):
        answer = attempt((first, second)[i % 2], f"guess-{i}", f"192.0.2.{i % 20 + 1}")
        assert answer.status_code == 401, (i, answer.status_code)

    assert_held(attempt(first, "guess-101", "192.0.2.200"), everyone=True)
    stranger = attempt(second, TOKEN, "203.0.113.99", "New")
    assert_held(stranger, everyone=True)  # a reviewer at a new address waits too
    # a known reviewer still signs in, on either replica, and still has her own limit
    assert attempt(second, TOKEN, rita, "Rita").status_code == 303
    assert attempt(first, "rita-mistyped-it", rita, "Rita").status_code == 401
    assert attempt(first, TOKEN, rita, "Rita").status_code == 303


def test_a_cookie_copied_before_sign_out_is_refused_after_it_on_every_replica(replicas):
    first, second = replicas
    with httpx.Client(base_url=first.url, timeout=30) as browser:
        assert post_sign_in(browser, "Rita", TOKEN).status_code == 303
        copied = {COOKIE_NAME: browser.cookies[COOKIE_NAME]}
        page = browser.get("/review")
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
        for service in replicas:
            with httpx.Client(base_url=service.url, cookies=copied, timeout=30) as thief:
                assert thief.get("/review").status_code == 200, "the copy works before"
        signed_out = browser.post("/review/sign-out", data={"csrf": csrf})
        assert signed_out.status_code == 303
    for service in (first, second):
        with httpx.Client(base_url=service.url, cookies=copied, timeout=30) as thief:
            page = thief.get("/review")
            assert page.status_code == 303 and page.headers["location"] == "/review/sign-in"
            decided = thief.post("/review/documents/1/approve", data={"csrf": csrf})
            assert decided.status_code == 401 and "session has ended" in decided.text


def _from_balancer(service: ServiceProcess, https: bool = True) -> httpx.Response:
    """A sign-in as a TLS-terminating load balancer at 127.0.0.2 forwards it."""
    transport = httpx.HTTPTransport(local_address="127.0.0.2")
    headers = {"X-Forwarded-For": "198.51.100.20"}
    if https:
        headers["X-Forwarded-Proto"] = "https"
    with httpx.Client(base_url=service.url, transport=transport, timeout=30) as balancer:
        return post_sign_in(balancer, "Rita", TOKEN, headers=headers)


def _secure(response: httpx.Response) -> bool:
    assert response.status_code == 303, response.text
    flags = [part.strip().lower() for part in response.headers["set-cookie"].split(";")]
    return "secure" in flags


def test_behind_a_trusted_load_balancer_the_cookie_is_secure_and_the_client_forwarded(
    database_url, sandbox, db
):
    with start_service(database_url, sandbox.url, REVIEW_TOKEN=TOKEN) as untrusted:
        # a balancer not listed: its headers are not believed
        assert not _secure(_from_balancer(untrusted))
    with start_service(
        database_url, sandbox.url, REVIEW_TOKEN=TOKEN, DELIVERY_TRUSTED_PROXIES="127.0.0.2/32"
    ) as trusted:
        assert _secure(_from_balancer(trusted))
        assert not _secure(_from_balancer(trusted, https=False)), "plain HTTP stays plain"
    with start_service(
        database_url, sandbox.url, REVIEW_TOKEN=TOKEN, REVIEW_COOKIE_SECURE="always"
    ) as forced:
        assert _secure(post_sign_in(forced.http, "Sam", TOKEN))
    clients = [
        row["client"]
        for row in db.execute("SELECT client FROM review_sessions ORDER BY created_at")
    ]
    assert clients == ["127.0.0.2", "198.51.100.20", "198.51.100.20", "127.0.0.1"], clients
