"""The knock's sending: the locale's template chosen with failover, the send, its record.

A document outside the window knocks once, and its person at most once per
24 h (the reservation, ``reserve_knock``); a knock delivered and not answered
is followed by one reminder. The knock goes on the locale's first healthy
template (``knock.pick_template``); one the platform refuses is avoided
fleet-wide (the completer's ``Step.NEXT_TEMPLATE``) and the next is tried at
once, under a new reservation. With none left the document is held for a
template, with an alert. What a knock says is ``knock.py``'s; what its status
webhooks do is ``knock_status.py``'s.
"""

from __future__ import annotations

import datetime as dt
import enum
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from delivery_pipeline.delivery.addressing import address
from delivery_pipeline.delivery.as_file import Sender
from delivery_pipeline.delivery.callback import knock_callback
from delivery_pipeline.delivery.knock import (
    TemplateChoice,
    knock_choices,
    knock_with,
    pick_template,
)
from delivery_pipeline.delivery.outcomes import MessageKind, Step
from delivery_pipeline.delivery.progress import Event
from delivery_pipeline.delivery.statements import Claim, KnockReservation
from delivery_pipeline.store.rows.templates import OpenedKnock, TemplateHealth
from delivery_pipeline.watch.alerts import Alert, AlertSeverity
from delivery_pipeline.whatsapp.errors import (
    CloudApiError,
    SendNotAttempted,
    SendOutcomeUnknown,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Knocked:
    """The knock left: its message id, or None when its outcome is unknown (counted
    as sent rather than risk a second knock)."""

    message_id: str | None


class NotKnocked(enum.Enum):
    """What a knock's send came to when no knock left."""

    # Someone else took the person's knock meanwhile, or the person cannot be
    # knocked at their BSUID: the document waits for their reply all the same.
    WAITS = "waits"
    # Held, retried, abandoned or lost: the claim is given back already.
    HANDLED = "handled"


@dataclass(frozen=True)
class TemplateRefused:
    """The platform refused the knock's template (avoided fleet-wide now): the next
    one of the locale is tried, under a new reservation."""


class KnockSender(Sender, Protocol):
    """What the knock uses of the delivery whose claims it sends
    (``document.DocumentDelivery``): the steps every send shares, and the
    business numbers' templates. Named here so this module does not import the
    one that holds it."""

    # Each configured business number's knock templates, by locale.
    @property
    def numbers(self) -> Mapping[str, dict[str, list[tuple[str, str]]]]: ...

    def _given_back(self, claim: Claim, answer: bool | None, kept: Event) -> None: ...


class KnockDelivery:
    """The knock for the documents one ``DocumentDelivery`` claimed."""

    def __init__(self, delivery: KnockSender) -> None:
        self.delivery = delivery

    async def knock(self, claim: Claim) -> None:
        """Window closed: knock once per document, at most once per person per 24 h."""
        to = address(claim.phone, claim.user_id)
        assert to is not None  # a person with neither number nor BSUID is abandon_unreachable
        reservation = None
        # Knocked once per document, and reminded once when that knock was
        # delivered and not answered (woken by ``wake_for_reminders``).
        if claim.knock_sent_at is None or claim.remind:
            reservation = await self.delivery.store.reserve_knock(claim.person_id)
        wamid: str | None = None
        if reservation is not None:
            allowed = await self.delivery.store.may_send(claim)
            if not allowed.allowed:
                # A knock has no fence: the pause is read before it instead.
                await self.delivery.store.unreserve_knock(claim.person_id, reservation)
                await self.delivery.store.release(claim)
                self.delivery.sweep.note(Event.RELEASED, claim.document_id)
                self.delivery.sweep.maybe_paused = True
                if allowed.every:
                    await self.delivery._stop_paused()
                return
        knocked = False
        if reservation is not None:
            sent = await self._send_knock(claim, to, reservation)
            if sent is NotKnocked.HANDLED:
                return
            if isinstance(sent, Knocked):
                knocked, wamid = True, sent.message_id
        waiting = await self.delivery.store.await_reply(
            claim, knocked=knocked, knock_message_id=wamid
        )
        self.delivery._given_back(claim, waiting, Event.AWAITING_REPLY)

    async def _send_knock(
        self, claim: Claim, to: str, reservation: KnockReservation
    ) -> Knocked | NotKnocked:
        """Send the knock on the locale's first healthy template, failing over to the
        next when the platform refuses a template."""
        choices = knock_choices(
            claim.locale,
            self.delivery.numbers.get(claim.phone_number_id)
            or self.delivery.settings.knock_template_choices,
        )
        tried: set[tuple[str, str]] = set()
        while True:
            health = await self.delivery.store.template_health(choices)
            choice = pick_template(
                [TemplateChoice(h.name, h.language, h.problem, h.sendable) for h in health],
                tried,
            )
            if choice is None:
                await self.delivery.store.unreserve_knock(claim.person_id, reservation)
                await self._hold_knock(claim, health)
                return NotKnocked.HANDLED
            tried.add((choice.name, choice.language))
            opened = await self.delivery.store.open_knock(
                claim, choice.name, choice.language, reservation, reminder=claim.remind
            )
            if opened is None:
                await self.delivery.store.unreserve_knock(claim.person_id, reservation)
                self.delivery.sweep.note(Event.LOST_CLAIM, claim.document_id)
                return NotKnocked.HANDLED
            sent = await self._knock_on(claim, to, choice, opened)
            if not isinstance(sent, TemplateRefused):
                return sent
            again = await self.delivery.store.reserve_knock(claim.person_id)
            if again is None:
                return NotKnocked.WAITS
            reservation = again

    async def _knock_on(
        self, claim: Claim, to: str, choice: TemplateChoice, opened: OpenedKnock
    ) -> Knocked | NotKnocked | TemplateRefused:
        """Send the knock recorded as ``opened`` on one template, and record what came
        of it."""
        # One knock for everything of theirs that waits: a template with
        # buttons says how many (the reply delivers them all, in turn).
        knock = knock_with(
            choice.name,
            choice.language,
            claim.locale,
            claim.name,
            self.delivery.settings.knock_param_max,
            with_buttons=choice.name in self.delivery.settings.knock_button_template_set,
            waiting=opened.documents,
        )
        # Its deadline: undelivered after the template's time to live, the
        # platform drops it without a word (expire_dropped_knocks).
        ttl = self.delivery.settings.template_ttl_seconds(knock.template, knock.language)
        ready = await self.delivery.pacers.of(claim.phone_number_id).acquire()
        started_at = dt.datetime.now(dt.UTC)
        try:
            wamid = await self.delivery.client.send_template(
                to,
                knock.template,
                knock.language,
                knock.parameters,
                callback_data=knock_callback(opened.id),
                button_payloads=knock.buttons,
                number=claim.phone_number_id,
                ready=ready,
            )
        except SendOutcomeUnknown as exc:
            # It may have reached the person: count it as sent rather
            # than risk a second knock.
            self.delivery._send_failed(claim, exc)
            await self.delivery.store.knock_accepted(opened.id, None, ttl)
            self.delivery.sweep.note(Event.KNOCK_SENT, claim.document_id)
            return Knocked(None)
        except SendNotAttempted as exc:
            self.delivery._send_failed(claim, exc)
            await self.delivery.store.knock_refused(opened.id, None, f"not sent: {exc}")
            await self.delivery._retry(
                claim, delay=self.delivery._backoff(claim), reason=f"knock not sent: {exc}"
            )
            return NotKnocked.HANDLED
        except CloudApiError as exc:
            self.delivery._send_failed(claim, exc)
            # Gives the person's knock reservation back: this knock never left.
            await self.delivery.store.knock_refused(opened.id, exc.code, str(exc))
            return await self._knock_refused(claim, exc, (knock.template, knock.language))
        await self.delivery.store.knock_accepted(opened.id, wamid, ttl)
        self.delivery.sweep.note(Event.KNOCK_SENT, claim.document_id)
        await self.delivery._sent_ok(claim, started_at)
        return Knocked(wamid)

    async def _knock_refused(
        self, claim: Claim, exc: CloudApiError, template: tuple[str, str]
    ) -> NotKnocked | TemplateRefused:
        """The platform refused the knock: the completer carries out what that means;
        the next template is tried, or the document waits for the person."""
        completed = await self.delivery._failed(claim, exc, MessageKind.KNOCK, template)
        step = completed.consequence.step
        if step is Step.WAIT_FOR_PERSON:
            # Not knockable at their BSUID: the document waits for them
            # to write (delivery/addressing.py), no knock counted.
            return NotKnocked.WAITS
        if step is Step.NEXT_TEMPLATE:
            log.warning(
                "document %s: knock template %s:%s refused (%s); trying the next",
                claim.document_id,
                *template,
                exc.code,
            )
            return TemplateRefused()
        return NotKnocked.HANDLED

    async def _hold_knock(self, claim: Claim, health: list[TemplateHealth]) -> None:
        """No template of the locale can knock: the document waits for one (owner: the
        template), due again at the recheck or when a pause ends, whichever is first;
        a lifecycle webhook that makes a template healthy wakes it at once."""
        now = dt.datetime.now(dt.UTC)
        delay = self.delivery.settings.template_recheck_seconds
        for h in health:
            for until in (h.paused_until, h.refused_until):
                if until is not None and until > now:
                    delay = min(delay, (until - now).total_seconds())
        delay = max(delay, 1.0)
        problems = ", ".join(
            f"{h.name}:{h.language} {h.problem}"
            + (f" ({h.refused_code})" if h.problem == "refused" and h.refused_code else "")
            for h in health
        )
        reason = f"no knock template can be used ({problems})"
        if not await self.delivery.store.hold_knock(claim, delay, reason):
            self.delivery.sweep.note(Event.LOST_CLAIM, claim.document_id)
            return
        await self.delivery.store.record_alert(
            Alert(
                f"knock_held:{claim.locale}",
                AlertSeverity.ERROR,
                f"Knocks for locale {claim.locale!r} wait: {reason}. They go out when a "
                "template recovers (a lifecycle webhook, or the pause ending); add a "
                "fallback to DELIVERY_KNOCK_TEMPLATES (name:language|fallback:language).",
                {
                    "locale": claim.locale,
                    "document_id": claim.document_id,
                    "templates": [f"{h.name}:{h.language}" for h in health],
                },
            )
        )
        self.delivery.sweep.note(
            Event.RETRY_SCHEDULED, claim.document_id, detail=reason, after_seconds=delay
        )
