"""Who a message goes to, and what the platform's 131062 means for it.

A person is addressed by their number when we know it (``to``), else by their
business-scoped user id (``recipient``): people who use a WhatsApp username
may never share a number. Some message types may not go to a BSUID at all;
the platform then refuses with 131062. That says nothing about the person's
reachability by free-form text, nor about anybody else: its scope is the one
message type for the one person, never the fleet.

* A **knock** refused with 131062: this person cannot be knocked at their
  BSUID. The knock reservation is given back (no knock was sent), the
  document waits for the person's own next message (``awaiting_reply``, as
  after a knock), which opens the window and delivers it as text; ops is
  warned once per person (the alert's quiet period).
* A **chunk** refused with 131062 (text is what a BSUID takes, so this is the
  platform saying this person cannot take our documents): the document is
  abandoned ``undeliverable``, with a warning, exactly like 131026. The
  answer to a press refused so is not sent (its documents' own sends find out).

No attempt is burned and sending is never paused for it.
"""

from __future__ import annotations

from delivery_pipeline.watch.alerts import Alert, AlertSeverity
from delivery_pipeline.whatsapp.errors import CloudApiError

# "This message type cannot be sent to a business-scoped user id."
BSUID_UNSUPPORTED = 131062


def address(phone: str | None, user_id: str | None) -> str | None:
    """Where to send: the number when known, else the BSUID (``client.addressed``)."""
    return phone or user_id


def refused_for_bsuid(error: CloudApiError | None) -> bool:
    return error is not None and error.code == BSUID_UNSUPPORTED


def bsuid_alert(
    person_id: int, document_id: int | None, error: CloudApiError, *, knock: bool
) -> Alert:
    """The warning ops gets: once per person while it keeps happening (``document_id``
    None: the refused text was the answer to their reply)."""
    lost = (
        "the answer to their reply is not sent"
        if document_id is None
        else (f"document {document_id} abandoned")
    )
    if knock:
        what = (
            f"Person {person_id} cannot be knocked at their business-scoped user id ({error}); "
            f"document {document_id} waits for them to write first."
        )
    else:
        what = (
            f"Person {person_id} cannot receive our messages at their business-scoped user id "
            f"({error}); {lost}."
        )
    return Alert(
        f"bsuid_refused:{person_id}",
        AlertSeverity.WARNING,
        what,
        {"code": error.code, "document_id": document_id, "person_id": person_id},
    )
