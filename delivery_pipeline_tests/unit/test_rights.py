"""The review page's rights as rules: whom each token signs in and with which right, the
token lists' checks (never showing a token), and the size of an edited text."""

from __future__ import annotations

import pytest

from delivery_pipeline.service.sessions import Person, Sessions
from delivery_pipeline.settings import ReviewSettings, Settings, SettingsError
from delivery_pipeline.store.intake import BODY_MAX_CHARACTERS, InputError, check_body
from delivery_pipeline.store.review import Decision

SHARED = "shared-reviewer-token-0001"
ANA = "ana-own-token-000000000001"
OLGA = "olga-operator-token-000001"
TOKENS = {
    "REVIEW_TOKEN": SHARED,
    "REVIEW_TOKENS": f"Ana={ANA}, João Silva=joao-own-token-00000001",
    "OPERATOR_TOKENS": f"Olga={OLGA}",
}


def _sessions(**environ: str) -> Sessions:
    sessions = Sessions.from_settings(Settings.from_env(environ).review)
    assert sessions is not None
    return sessions


def test_each_token_signs_in_its_person_with_their_right() -> None:
    sessions = _sessions(**TOKENS)
    assert sessions.identify(ANA) == Person("Ana", operator=False)
    assert sessions.identify("joao-own-token-00000001") == Person("João Silva")
    assert sessions.identify(OLGA) == Person("Olga", operator=True)
    assert sessions.identify(SHARED) == Person(None, operator=False), "the form names them"
    for wrong in (ANA + " ", ANA[:-1], "", "Ana", f"Ana={ANA}"):
        assert sessions.identify(wrong) is None, wrong


def test_the_page_is_on_with_any_token_and_off_with_none() -> None:
    assert Sessions.from_settings(ReviewSettings()) is None
    for name, value in TOKENS.items():
        assert Sessions.from_settings(Settings.from_env({name: value}).review) is not None, name


def test_changing_any_token_name_or_right_signs_everyone_out() -> None:
    """The cookies' key derives from every token with its name and right; the shared
    token alone keeps the key it had before personal tokens."""
    base = _sessions(**TOKENS)
    signature = base._sign("a-session-key")
    assert _sessions(**TOKENS)._sign("a-session-key") == signature, "every replica"
    changed = [
        {**TOKENS, "REVIEW_TOKEN": SHARED + "x"},
        {**TOKENS, "REVIEW_TOKENS": f"Ana={ANA}"},
        {**TOKENS, "OPERATOR_TOKENS": f"Olga={OLGA},Pia=pia-operator-token-0001"},
        {**TOKENS, "OPERATOR_TOKENS": f"Olga S={OLGA}"},
        {**{k: v for k, v in TOKENS.items() if k != "OPERATOR_TOKENS"}, "REVIEW_TOKENS": (
            f"Ana={ANA}, João Silva=joao-own-token-00000001, Olga={OLGA}"
        )},
    ]  # fmt: skip
    for environ in changed:
        assert _sessions(**environ)._sign("a-session-key") != signature, environ
    assert Sessions(SHARED)._sign("k") == _sessions(REVIEW_TOKEN=SHARED)._sign("k")


@pytest.mark.parametrize(
    ("environ", "said"),
    [
        ({"REVIEW_TOKENS": "Ana"}, "REVIEW_TOKENS: item 1 is not name=token"),
        ({"REVIEW_TOKENS": f"={ANA}"}, "REVIEW_TOKENS: item 1 is not name=token"),
        (
            {"OPERATOR_TOKENS": f"Olga={OLGA},Pia=short-one"},
            "OPERATOR_TOKENS: item 2 (Pia): a token is at least 16 characters",
        ),
        (
            {"REVIEW_TOKENS": f"Ana={ANA},Bea={ANA}"},
            "REVIEW_TOKENS: item 2 (Bea): that token is another person's",
        ),
        ({"REVIEW_TOKENS": f"A\x1bna={ANA}"}, "REVIEW_TOKENS: item 1: a name is printable"),
        (
            {"REVIEW_TOKEN": ANA, "REVIEW_TOKENS": f"Ana={ANA}"},
            "REVIEW_TOKENS: shares a token with REVIEW_TOKEN or REVIEW_TOKENS",
        ),
        (
            {"REVIEW_TOKENS": f"Ana={ANA}", "OPERATOR_TOKENS": f"Ana={ANA}"},
            "OPERATOR_TOKENS: shares a token with REVIEW_TOKEN or REVIEW_TOKENS",
        ),
    ],
)
def test_a_bad_token_list_names_the_item_and_never_the_token(
    environ: dict[str, str], said: str
) -> None:
    with pytest.raises(SettingsError) as refused:
        Settings.from_env(environ)
    message = str(refused.value)
    assert said in message, message
    for token in (ANA, OLGA, "short-one"):
        assert token not in message, message


def test_an_edited_text_has_the_limit_of_any_document() -> None:
    fits = "x" * BODY_MAX_CHARACTERS
    assert Decision.approve(1, "Ana", body=fits).body == fits
    check_body(fits)
    with pytest.raises(InputError) as refused:
        Decision.approve(1, "Ana", body=fits + "x")
    assert str(refused.value) == (
        f"the edited text is {BODY_MAX_CHARACTERS + 1:,} characters, over the "
        f"{BODY_MAX_CHARACTERS:,} a document may have"
    )
    with pytest.raises(InputError, match="the document body is empty"):
        check_body(" \n")
