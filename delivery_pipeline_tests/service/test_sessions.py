"""Reviewer sessions: signed cookies naming a session row in Postgres, ended by signing
out; CSRF per session; the sign-in limits' rule and their clients."""

from __future__ import annotations

import asyncio
import datetime as dt

from delivery_pipeline.service.sessions import Sessions, SignedIn, client_key
from delivery_pipeline.store.db import connect_async
from delivery_pipeline.store.review import Held, HoldScope, SignInLimits, WrongToken, held
from delivery_pipeline.store.rows.review import SignInState

TOKEN = "a-long-reviewer-token-for-tests"
NOW = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)


def _run(database_url: str, work):
    async def go():
        conn = await connect_async(database_url)
        try:
            return await work(conn)
        finally:
            await conn.close()

    return asyncio.run(go())


def test_a_session_lives_in_the_database_until_it_expires_or_is_signed_out(database_url, db):
    sessions = Sessions(TOKEN, lifetime_seconds=600)

    async def work(conn):
        signed = await sessions.sign_in(conn, "10.0.0.1", "Rita", TOKEN)
        assert isinstance(signed, SignedIn) and signed.session.name == "Rita"
        assert await sessions.read(conn, signed.cookie) == signed.session
        other = await sessions.sign_in(conn, "10.0.0.1", "Sam", TOKEN)
        await sessions.end(conn, signed.cookie)
        assert await sessions.read(conn, signed.cookie) is None, "signed out"
        assert await sessions.read(conn, other.cookie) is not None, "only that session"
        return other

    other = _run(database_url, work)
    rows = db.execute("SELECT reviewer, key_hash, client FROM review_sessions").fetchall()
    assert [(r["reviewer"], r["client"]) for r in rows] == [("Sam", "10.0.0.1")]
    key = other.cookie.split(".")[0]
    assert key.encode() not in bytes(rows[0]["key_hash"]), "only the key's hash is stored"
    db.execute("UPDATE review_sessions SET expires_at = now() - interval '1 second'")

    async def expired(conn):
        return await sessions.read(conn, other.cookie)

    assert _run(database_url, expired) is None


def test_any_change_to_the_cookie_or_the_token_ends_the_session(database_url):
    sessions = Sessions(TOKEN)

    async def work(conn):
        signed = await sessions.sign_in(conn, "10.0.0.1", "Rita", TOKEN)
        assert isinstance(signed, SignedIn)
        key, signature = signed.cookie.split(".")
        flipped = signature[:-1] + ("0" if signature[-1] != "0" else "1")
        for tampered in (
            key + "." + flipped,
            key[:-1] + "." + signature,
            signed.cookie + ".x",
            "",
            None,
            "garbage",
        ):
            assert sessions.key_hash(tampered) is None, tampered
            assert await sessions.read(conn, tampered) is None, tampered
        assert await Sessions(TOKEN + "-rotated").read(conn, signed.cookie) is None
        assert await Sessions(TOKEN).read(conn, signed.cookie) is not None, "any replica"

    _run(database_url, work)


def test_csrf_tokens_are_per_session_and_the_token_check_is_exact(database_url):
    sessions = Sessions(TOKEN)

    async def work(conn):
        rita = await sessions.sign_in(conn, "10.0.0.1", "Rita", TOKEN)
        sam = await sessions.sign_in(conn, "10.0.0.2", "Sam", TOKEN)
        wrong = await sessions.sign_in(conn, "10.0.0.3", "Eve", TOKEN[:-1])
        return rita, sam, wrong

    rita, sam, wrong = _run(database_url, work)
    assert isinstance(wrong, WrongToken)
    assert Sessions.csrf_matches(rita.session, rita.session.csrf)
    assert not Sessions.csrf_matches(rita.session, sam.session.csrf)
    assert not Sessions.csrf_matches(rita.session, "")
    assert not Sessions.csrf_matches(rita.session, None)
    assert not Sessions(TOKEN).token_valid(TOKEN + " ")
    assert TOKEN not in repr(Sessions(TOKEN))


def _state(client=None, strangers=None, known=False):
    return SignInState(client, strangers, known, NOW)


def test_who_waits_a_client_over_its_limit_and_strangers_over_the_overall_one():
    later = NOW + dt.timedelta(minutes=14, seconds=0.2)
    assert held(_state()) is None
    assert held(_state(client=NOW)) is None, "held until now: free"
    assert held(_state(client=later)) == Held(later, HoldScope.CLIENT, NOW)
    assert held(_state(client=later)).retry_after_seconds == 14 * 60 + 1
    # the overall limit holds strangers, never a client that signed in before
    assert held(_state(strangers=later)) == Held(later, HoldScope.EVERYONE, NOW)
    assert held(_state(strangers=later, known=True)) is None
    # a known client is still held by its own limit; the later hold wins
    sooner = NOW + dt.timedelta(minutes=1)
    assert held(_state(client=sooner, strangers=later, known=True)).scope == HoldScope.CLIENT
    assert held(_state(client=sooner, strangers=later)).until == later
    assert SignInLimits().params("x")["window"] == dt.timedelta(minutes=15)


def test_a_client_is_its_address_an_ipv6_one_its_64():
    assert client_key("203.0.113.7") == "203.0.113.7"
    assert client_key("2001:db8:1:2:aaaa::1") == client_key("2001:db8:1:2:ffff::9")
    assert client_key("2001:db8:1:2::1") == "2001:db8:1:2::/64"
    assert client_key("2001:db8:1:3::1") != client_key("2001:db8:1:2::1")
    assert client_key("::ffff:203.0.113.7") == "203.0.113.7"
    assert client_key(None) == "unknown" and client_key("testclient") == "testclient"
