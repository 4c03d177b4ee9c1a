"""``classify``: every platform error code to the error type that says its scope and trouble."""

from __future__ import annotations

import pytest

from delivery_pipeline.whatsapp.errors import (
    MEDIA_UPLOAD_RULES,
    PHONE_NUMBER_ID_SUBCODE,
    RULES,
    GlobalSendError,
    MalformedRequest,
    MediaRefused,
    NumberSendError,
    ReEngagementRequired,
    Scope,
    TransientError,
    Trouble,
    classify,
    from_error_object,
)


@pytest.mark.parametrize("code", sorted(RULES))
def test_each_code_of_the_table_gets_its_rows_type(code: int) -> None:
    error = classify(code, "m", "d", 400)
    assert type(error) is RULES[code].error
    assert (error.code, error.message, error.details, error.http_status) == (code, "m", "d", 400)
    assert (error.scope, error.trouble) == (RULES[code].scope, RULES[code].trouble)


def test_131047_is_the_knock_and_concerns_the_person() -> None:
    error = classify(131047)
    assert isinstance(error, ReEngagementRequired)
    assert (error.scope, error.trouble) == (Scope.PERSON, Trouble.WINDOW_CLOSED)


def test_100_is_one_bad_request_unless_it_names_our_phone_number_id() -> None:
    assert type(classify(100)) is MalformedRequest
    wrong_id = classify(100, subcode=PHONE_NUMBER_ID_SUBCODE)
    assert type(wrong_id) is NumberSendError and wrong_id.scope is Scope.NUMBER
    assert isinstance(wrong_id, GlobalSendError) and wrong_id.trouble is Trouble.SENDER_REFUSED


@pytest.mark.parametrize("code", [133010, 131037])
def test_a_numbers_own_trouble_pauses_that_number(code: int) -> None:
    error = classify(code)
    assert (type(error), error.scope, error.trouble) == (
        NumberSendError,
        Scope.NUMBER,
        Trouble.SENDER_REFUSED,
    )


@pytest.mark.parametrize("code", [190, 10, 200, 368, 131031, 131005, 131064, 4, 80007])
def test_what_every_number_shares_pauses_every_number(code: int) -> None:
    """The token, the app, the account and the portfolio's messaging limit: one for
    every number."""
    assert classify(code).scope is Scope.SENDER


@pytest.mark.parametrize(
    ("http_status", "expected"),
    [(503, TransientError), (401, GlobalSendError), (400, TransientError), (None, TransientError)],
)
def test_an_unknown_code_falls_back_on_the_http_status(http_status: int | None, expected) -> None:
    assert type(classify(987_654, http_status=http_status)) is expected


def test_an_error_object_is_read_as_the_platform_writes_it() -> None:
    error = from_error_object(
        {
            "code": "131047",
            "title": "Re-engagement message",
            "error_data": {"details": "more than 24 hours"},
        }
    )
    assert isinstance(error, ReEngagementRequired)
    assert (error.message, error.details) == ("Re-engagement message", "more than 24 hours")


@pytest.mark.parametrize("code", ["x", None, 2**40, [1]])
def test_a_code_that_is_no_platform_code_is_unknown_not_a_crash(code: object) -> None:
    error = from_error_object({"code": code, "error_data": "not an object"})
    assert error.code is None and type(error) is TransientError


@pytest.mark.parametrize("code", sorted(MEDIA_UPLOAD_RULES))
def test_the_media_endpoints_refusals_concern_the_file(code: int) -> None:
    upload = from_error_object({"code": code, "message": "m"}, 400, upload=True)
    assert type(upload) is MediaRefused
    assert (upload.scope, upload.trouble) == (Scope.MESSAGE, Trouble.FILE_REFUSED)


def test_on_the_media_endpoint_the_others_mean_what_they_mean_on_a_send() -> None:
    assert type(classify(100)) is MalformedRequest, "a 100 on a send is one bad request"
    assert type(classify(100, subcode=PHONE_NUMBER_ID_SUBCODE, upload=True)) is NumberSendError
    assert type(classify(190, http_status=401, upload=True)) is GlobalSendError
    assert type(classify(131000, upload=True)) is TransientError


def test_a_file_refused_after_a_send_was_accepted_goes_without_the_file() -> None:
    error = from_error_object({"code": 131053, "title": "Media upload error"})
    assert type(error) is MediaRefused and error.trouble is Trouble.FILE_REFUSED
