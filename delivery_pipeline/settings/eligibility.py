"""The parameters the database's eligibility functions take, as the settings hand them over.

Typed here, not in ``store/``: the settings build them and sit below the store.
"""

import datetime as dt
from typing import TypedDict


class Eligibility(TypedDict):
    """The parameters of ``eligible_documents()`` (sql/migrations/013), as every query calling it
    takes them: the claim lease, the service window, the default quiet hours."""

    lease: dt.timedelta
    service_window: dt.timedelta
    quiet_hours: str | None


class Guard(Eligibility):
    """The guard's and the claim's: ``eligible_documents()``'s, and the number of a
    person bound to none (sql/migrations/027)."""

    default_number: str
