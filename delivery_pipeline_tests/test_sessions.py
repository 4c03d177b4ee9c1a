"""Reviewer sessions: signed, expiring, bound to their token; CSRF per session."""

from __future__ import annotations

from delivery_pipeline.service.sessions import Sessions

TOKEN = "a-long-reviewer-token-for-tests"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_a_session_reads_back_until_it_expires():
    clock = Clock()
    sessions = Sessions(TOKEN, lifetime_seconds=60, clock=clock)
    session, cookie = sessions.issue("Rita")
    assert sessions.read(cookie) == session and session.name == "Rita"
    clock.now += 59
    assert sessions.read(cookie) == session
    clock.now += 1
    assert sessions.read(cookie) is None


def test_any_change_to_the_cookie_or_the_token_ends_the_session():
    sessions = Sessions(TOKEN)
    _, cookie = sessions.issue("Rita")
    payload, signature = cookie.split(".")
    _, other = sessions.issue("Sam")
    for tampered in (
        other.split(".")[0] + "." + signature,  # another payload under Rita's signature
        payload + "." + signature[:-1] + ("0" if signature[-1] != "0" else "1"),
        payload + "." + signature + ".x",
        "",
        None,
        "garbage",
    ):
        assert sessions.read(tampered) is None, tampered
    assert Sessions(TOKEN + "-rotated").read(cookie) is None
    assert Sessions(TOKEN).read(cookie) is not None, "another replica with the token accepts it"


def test_csrf_tokens_are_per_session_and_the_token_check_is_exact():
    sessions = Sessions(TOKEN)
    rita, _ = sessions.issue("Rita")
    sam, _ = sessions.issue("Sam")
    assert Sessions.csrf_matches(rita, rita.csrf)
    assert not Sessions.csrf_matches(rita, sam.csrf)
    assert not Sessions.csrf_matches(rita, "") and not Sessions.csrf_matches(rita, None)
    assert sessions.token_valid(TOKEN)
    assert not sessions.token_valid(TOKEN[:-1]) and not sessions.token_valid(TOKEN + " ")
    assert TOKEN not in repr(sessions)
