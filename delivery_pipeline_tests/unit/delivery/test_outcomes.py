"""``consequence_of`` and ``at_limit``: what a platform error means for a document,
sync or async, on a chunk or on a knock, and for the answer to a press."""

from __future__ import annotations

import pytest

from delivery_pipeline.delivery.outcomes import (
    ACKNOWLEDGEMENT_ATTEMPTS,
    ACKNOWLEDGEMENT_RETRY_SECONDS,
    ASYNC_RETRY_SECONDS,
    ECOSYSTEM_RETRY_SECONDS,
    THROUGHPUT_PAUSE_SECONDS,
    Consequence,
    Failure,
    MessageKind,
    Step,
    at_limit,
    consequence_of,
)
from delivery_pipeline.model import AbandonReason
from delivery_pipeline.settings import DeliverySettings
from delivery_pipeline.whatsapp.errors import (
    PAIR_RATE_RETRY_SECONDS,
    CloudApiError,
    Scope,
    classify,
)

SETTINGS = DeliverySettings(max_attempts=3, backoff_base_seconds=10, backoff_max_seconds=1000)


def of(
    code: int | None,
    *,
    attempts: int = 1,
    synchronous: bool = True,
    subcode: int | None = None,
    knock: bool = False,
    kind: MessageKind | None = None,
) -> Consequence:
    """The consequence, with the attempt limit applied to ``attempts`` as counted."""
    error: CloudApiError | None = classify(code, subcode=subcode) if code is not None else None
    kind = kind or (MessageKind.KNOCK if knock else MessageKind.CHUNK)
    failure = Failure(
        error,
        kind,
        document_id=None if kind is MessageKind.ACKNOWLEDGEMENT else 7,
        person_id=3,
        attempts=attempts,
        synchronous=synchronous,
        template=("document_ready", "en") if knock else None,
    )
    return at_limit(
        consequence_of(failure, SETTINGS),
        kind=kind,
        document_id=7,
        attempts=attempts,
        last_error=failure.reason,
        code=code,
        settings=SETTINGS,
    )


@pytest.mark.parametrize("synchronous", [True, False])
def test_a_closed_window_knocks_and_burns_no_attempt(synchronous: bool) -> None:
    consequence = of(131047, synchronous=synchronous)
    assert consequence.step is Step.KNOCK
    assert not consequence.counts_attempt and consequence.alert is None


def test_a_knock_refused_for_the_window_is_retried_after_the_backoff_and_counts() -> None:
    consequence = of(131047, attempts=2, knock=True)
    assert (consequence.step, consequence.counts_attempt) == (Step.RETRY, True)
    assert 0.75 * 20 <= consequence.retry_after <= 1.25 * 20
    assert consequence.alert is None


@pytest.mark.parametrize(
    ("code", "scope"),
    [(190, Scope.SENDER), (133010, Scope.NUMBER), (368, Scope.SENDER), (4, Scope.SENDER)],
)
def test_a_sender_wide_error_pauses_everyone_and_burns_no_attempt(code: int, scope) -> None:
    consequence = of(code)
    assert (consequence.step, consequence.scope) == (Step.PAUSE, scope)
    assert consequence.retry_after == 0.0 and not consequence.counts_attempt
    assert consequence.alert is None, "the pause's own episode alerts, not each refusal"
    assert of(code, synchronous=False).retry_after == ASYNC_RETRY_SECONDS


def test_the_phone_number_id_error_is_sender_wide_but_another_100_is_this_message() -> None:
    assert of(100, subcode=33).step is Step.PAUSE
    other = of(100)
    assert (other.step, other.scope, other.counts_attempt) == (Step.RETRY, Scope.MESSAGE, True)


def test_an_opt_out_abandons_marks_the_person_and_alerts_about_them() -> None:
    consequence = of(131050)
    assert consequence.step is Step.ABANDON and consequence.opts_out
    assert consequence.scope is Scope.PERSON and not consequence.counts_attempt
    assert consequence.alert is not None and consequence.alert.key == "recipient:3"


def test_an_unreachable_person_abandons_without_opting_out() -> None:
    consequence = of(131026)
    assert consequence.step is Step.ABANDON and not consequence.opts_out
    assert consequence.abandon_reason is not None


def test_a_refused_template_holds_knocks_only() -> None:
    consequence = of(132001)
    assert (consequence.step, consequence.scope) == (Step.HOLD_TEMPLATE, Scope.TEMPLATE)
    assert consequence.retry_after == SETTINGS.template_recheck_seconds
    assert not consequence.counts_attempt
    assert consequence.alert is not None and consequence.alert.key == "template_refused:132001"


def test_platform_holds_wait_what_the_platform_asks_without_an_attempt() -> None:
    ecosystem = of(131049, synchronous=False)
    assert (ecosystem.step, ecosystem.retry_after) == (Step.RETRY, ECOSYSTEM_RETRY_SECONDS)
    assert not ecosystem.counts_attempt
    withheld_knock = of(131049, knock=True)
    assert (withheld_knock.step, withheld_knock.retry_after) == (
        Step.RETRY,
        ECOSYSTEM_RETRY_SECONDS,
    )
    assert withheld_knock.counts_attempt, "a withheld knock is spent: it counts"
    pair = of(131056)
    assert pair.step is Step.RETRY and not pair.counts_attempt
    assert PAIR_RATE_RETRY_SECONDS <= pair.retry_after <= 1.5 * PAIR_RATE_RETRY_SECONDS


def test_the_throughput_limit_slows_the_sender_only_when_the_send_itself_was_refused() -> None:
    refused = of(130429)
    assert refused.slows_sender and not refused.counts_attempt
    assert THROUGHPUT_PAUSE_SECONDS <= refused.retry_after <= 1.5 * THROUGHPUT_PAUSE_SECONDS
    later = of(130429, synchronous=False)
    assert not later.slows_sender and later.retry_after == ASYNC_RETRY_SECONDS


@pytest.mark.parametrize("code", [131000, 999_999, None])
def test_this_messages_trouble_backs_off_counting_attempts_then_abandons(code: int | None) -> None:
    first = of(code, attempts=1)
    assert (first.step, first.counts_attempt) == (Step.RETRY, True)
    assert 0.75 * 10 <= first.retry_after <= 1.25 * 10
    second = of(code, attempts=2)
    assert 0.75 * 20 <= second.retry_after <= 1.25 * 20
    last = of(code, attempts=SETTINGS.max_attempts)
    assert (last.step, last.abandon_reason) == (Step.ABANDON, AbandonReason.MAX_ATTEMPTS)
    assert last.counts_attempt and last.alert is not None
    assert last.alert.key == "max_attempts:7"


# ── one decision for every kind of message, whoever reports the failure ──

DOCUMENT_KINDS = [MessageKind.CHUNK, MessageKind.KNOCK]
PATHS = [(kind, sync) for kind in DOCUMENT_KINDS for sync in (True, False)]


@pytest.mark.parametrize(("kind", "synchronous"), PATHS)
def test_the_attempt_limit_is_the_same_for_every_documents_kind_and_path(
    kind: MessageKind, synchronous: bool
) -> None:
    below = of(
        131000,
        attempts=SETTINGS.max_attempts - 1,
        synchronous=synchronous,
        knock=kind is MessageKind.KNOCK,
    )
    assert (below.step, below.counts_attempt) == (Step.RETRY, True)
    last = of(
        131000,
        attempts=SETTINGS.max_attempts,
        synchronous=synchronous,
        knock=kind is MessageKind.KNOCK,
    )
    assert (last.step, last.abandon_reason) == (Step.ABANDON, AbandonReason.MAX_ATTEMPTS)
    assert last.alert is not None and last.alert.key == "max_attempts:7"
    assert "131000" in last.alert.message


def test_every_counted_attempt_meets_the_limit_and_no_other() -> None:
    limit = SETTINGS.max_attempts
    # A knock refused for the window, or withheld: counted, so bounded.
    assert of(131047, attempts=limit, knock=True).abandon_reason is AbandonReason.MAX_ATTEMPTS
    withheld = of(131049, attempts=limit, synchronous=False, knock=True)
    assert withheld.abandon_reason is AbandonReason.MAX_ATTEMPTS
    # What does not count never abandons, however many came before.
    assert of(131049, attempts=limit, synchronous=False).step is Step.RETRY
    assert of(130429, attempts=limit).step is Step.RETRY
    assert of(131047, attempts=limit).step is Step.KNOCK


def test_a_knock_failed_after_acceptance_waits_a_minute_and_counts() -> None:
    later = of(131000, attempts=1, synchronous=False, knock=True)
    assert (later.retry_after, later.counts_attempt) == (ASYNC_RETRY_SECONDS, True)
    at_once = of(131000, attempts=1, knock=True)
    assert 0.75 * 10 <= at_once.retry_after <= 1.25 * 10


def test_only_a_templated_kind_is_retried_when_the_window_is_closed() -> None:
    templated = [kind for kind in MessageKind if kind.templated]
    assert templated == [MessageKind.KNOCK, MessageKind.DOCUMENT_TEMPLATE]
    assert of(131047, knock=True).step is Step.RETRY
    assert of(131047).step is Step.KNOCK
    assert file_of(131047).step is Step.RETRY
    assert file_of(131047, MessageKind.DOCUMENT).step is Step.KNOCK


def file_of(
    code: int, kind: MessageKind = MessageKind.DOCUMENT_TEMPLATE, *, synchronous: bool = True
) -> Consequence:
    """The consequence of a file's send (delivery/as_file.py) refused with ``code``."""
    failure = Failure(
        classify(code),
        kind,
        document_id=7,
        person_id=3,
        attempts=1,
        synchronous=synchronous,
        template=("document_attached", "en") if kind.templated else None,
    )
    return consequence_of(failure, SETTINGS)


@pytest.mark.parametrize("synchronous", [True, False])
def test_a_document_templates_refusal_falls_over_to_the_next_at_once(synchronous: bool) -> None:
    consequence = file_of(132015, synchronous=synchronous)
    assert (consequence.step, consequence.scope) == (Step.NEXT_TEMPLATE, Scope.TEMPLATE)
    assert consequence.retry_after == 0 and not consequence.counts_attempt
    assert consequence.alert is not None
    assert consequence.alert.key == "document_template:document_attached:en:132015"


@pytest.mark.parametrize("kind", [MessageKind.DOCUMENT_TEMPLATE, MessageKind.DOCUMENT])
def test_a_refused_file_goes_without_it_and_a_part_retries(kind: MessageKind) -> None:
    consequence = file_of(131053, kind)
    assert consequence.step is Step.WITHOUT_FILE and not consequence.counts_attempt
    assert consequence.alert is not None and consequence.alert.key == "media_refused:131053"
    assert of(131053).step is Step.RETRY, "a text part has no file to go without"


def test_a_document_template_a_bsuid_cannot_take_goes_as_the_knock() -> None:
    assert file_of(131062).step is Step.WITHOUT_FILE


@pytest.mark.parametrize("synchronous", [True, False])
def test_a_knocks_refused_template_fails_over_at_once_and_is_avoided(synchronous: bool) -> None:
    consequence = of(132015, synchronous=synchronous, knock=True)
    assert (consequence.step, consequence.scope) == (Step.NEXT_TEMPLATE, Scope.TEMPLATE)
    assert consequence.retry_after == 0 and not consequence.counts_attempt
    assert not consequence.knock_spent, "the person's knock is theirs again"
    assert consequence.alert is not None
    assert consequence.alert.key == "knock_template:document_ready:en:132015"
    assert ("after accepting it" in consequence.alert.message) is not synchronous


def test_the_hold_of_a_refused_template_is_the_recheck_setting() -> None:
    settings = DeliverySettings(template_recheck_seconds=120)
    failure = Failure(classify(132001), MessageKind.CHUNK, 7, 3, 1, synchronous=True)
    consequence = consequence_of(failure, settings)
    assert consequence.retry_after == 120
    assert consequence.alert is not None and "every 2 min" in consequence.alert.message


@pytest.mark.parametrize("synchronous", [True, False])
def test_131062_waits_for_the_person_on_a_knock_and_abandons_a_text(synchronous: bool) -> None:
    knock = of(131062, synchronous=synchronous, knock=True)
    assert knock.step is Step.WAIT_FOR_PERSON and not knock.counts_attempt
    assert not knock.knock_spent, "no knock counted"
    assert knock.alert is not None and knock.alert.key == "bsuid_refused:3"
    text = of(131062, synchronous=synchronous)
    assert (text.step, text.abandon_reason) == (Step.ABANDON, AbandonReason.UNDELIVERABLE)
    assert text.alert is not None and text.alert.key == "bsuid_refused:3"
    assert not text.opts_out


def test_a_knock_stays_spent_when_the_answer_was_about_the_person() -> None:
    assert of(131026, synchronous=False, knock=True).knock_spent
    assert of(131049, synchronous=False, knock=True).knock_spent
    assert not of(131000, synchronous=False, knock=True).knock_spent
    assert not of(190, synchronous=False, knock=True).knock_spent


# ── the answer to a press (delivery/acknowledgement.py) ──────────────────

ANSWER = MessageKind.ACKNOWLEDGEMENT


def test_an_answer_is_tried_again_in_a_moment_a_few_times_then_given_up_quietly() -> None:
    below = of(131000, attempts=ACKNOWLEDGEMENT_ATTEMPTS - 1, kind=ANSWER)
    assert (below.step, below.counts_attempt) == (Step.RETRY, True)
    assert below.retry_after == ACKNOWLEDGEMENT_RETRY_SECONDS < SETTINGS.backoff_base_seconds
    last = of(131000, attempts=ACKNOWLEDGEMENT_ATTEMPTS, kind=ANSWER)
    assert (last.step, last.abandon_reason) == (Step.ABANDON, AbandonReason.MAX_ATTEMPTS)
    assert last.alert is None, "nothing waits on a lost answer: no alert"
    assert ANSWER.attempt_limit(SETTINGS) == ACKNOWLEDGEMENT_ATTEMPTS
    assert MessageKind.CHUNK.attempt_limit(SETTINGS) == SETTINGS.max_attempts


def test_a_refused_answer_means_for_the_sender_and_the_person_what_any_send_means() -> None:
    # One decision: the same error, the same step, whichever kind found it.
    for code in (190, 130429, 131056, 131049, 131047, 131050, 131026):
        assert of(code, kind=ANSWER).step is of(code).step, code
    assert of(131050, kind=ANSWER).opts_out
    assert of(130429, kind=ANSWER).slows_sender


def test_an_answer_refused_for_the_person_says_so_without_a_document() -> None:
    unreachable = of(131026, kind=ANSWER)
    assert unreachable.alert is not None and unreachable.alert.key == "recipient:3"
    assert "the answer to their reply is not sent" in unreachable.alert.message
    assert unreachable.alert.details["document_id"] is None
    bsuid = of(131062, kind=ANSWER)
    assert (bsuid.step, bsuid.abandon_reason) == (Step.ABANDON, AbandonReason.UNDELIVERABLE)
    assert bsuid.alert is not None and "the answer to their reply" in bsuid.alert.message
