"""What a sweep claims: the whole queue, one person's documents, or one document.

One value from where the wish to sweep is born to the claim that honours it:
a webhook's reply wakes a person (``inbound.answer_inbound``), a status or a
template's lifecycle gives documents back due (``service.ingest`` gathers them
in ``WebhookOutcome.to_sweep``), the generator's poke and the API name one
document; the service sweeps each target detached from the response
(``Service.sweep_later``), the engine hands it to ``Sweep`` and the claim reads
it (``DeliveryStore.claim``). The command line's ``--person`` and ``--document``
are one target too (both given: that document, if it is that person's).

An id that cannot name a row (not a positive bigint) is refused where the
target is made, with the field it came in, never at the claim.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

BIGINT_MAX = 2**63 - 1  # ids are Postgres bigints


@dataclass(frozen=True, slots=True)
class SweepTarget:
    """Both None: every document due (``EVERYTHING``); else only those named."""

    person_id: int | None = None
    document_id: int | None = None

    def __post_init__(self) -> None:
        for name, value in (("person_id", self.person_id), ("document_id", self.document_id)):
            if value is None:
                continue
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"{name} must be an integer")
            if not 0 < value <= BIGINT_MAX:
                raise ValueError(f"{name} must be a positive id of at most {BIGINT_MAX}")

    @classmethod
    def person(cls, person_id: int) -> SweepTarget:
        return cls(person_id=person_id)

    @classmethod
    def document(cls, document_id: int) -> SweepTarget:
        return cls(document_id=document_id)

    @classmethod
    def documents(cls, document_ids: Iterable[int]) -> frozenset[SweepTarget]:
        return frozenset(cls(document_id=d) for d in document_ids)

    @property
    def whole_queue(self) -> bool:
        return self.person_id is None and self.document_id is None

    @property
    def named(self) -> dict[str, int]:
        """The ids it names, as logs and the poke's answer show them."""
        return {
            k: v
            for k, v in (("person_id", self.person_id), ("document_id", self.document_id))
            if v is not None
        }

    def order(self) -> tuple[int, int]:
        """Sweeping order: a person who just wrote first (their documents wait on
        them, an answer may be owed), then documents, each by id."""
        if self.person_id is not None:
            return (0, self.person_id)
        return (1, self.document_id or 0)


EVERYTHING = SweepTarget()
