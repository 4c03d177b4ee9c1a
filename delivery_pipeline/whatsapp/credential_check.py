"""Does the Cloud API (or the sandbox) accept the identity we would send with?

Asked before anything is sent, with one authenticated read of each business
number's own record (``GET /{version}/{phone_number_id}``): a 190 or a 100
here is the same refusal a send would get, told at start-up in one line that
names the variable to fix, instead of in the middle of a sweep after sending
was already marked paused for everybody.
"""

from __future__ import annotations

from dataclasses import dataclass

from delivery_pipeline.settings import WhatsAppSettings
from delivery_pipeline.settings.urls import without_password
from delivery_pipeline.whatsapp.client import CloudApiClient
from delivery_pipeline.whatsapp.errors import ApiUnreachable, CloudApiError, GlobalSendError, remedy


@dataclass(frozen=True)
class IdentityProblem:
    """Why sending cannot work with this configuration, as one line."""

    message: str
    refused: bool  # the API answered no (else it did not answer at all)


async def check_identity(
    client: CloudApiClient, whatsapp: WhatsAppSettings, number: str | None = None
) -> IdentityProblem | None:
    """None when the API accepts our token for every business number we send from
    (``number``: for that one alone), or answered with something that is no verdict
    on them (throttling, a 5xx). The first number it refuses is the problem: a
    token refused (190) is refused for all of them; a number the token may not
    use (100) only pauses that number's sends, yet it is a configuration to fix."""
    where = without_password(whatsapp.api_base_url)
    ids = [number] if number is not None else [n.id for n in whatsapp.business_numbers]
    for phone_number_id in ids:
        try:
            await client.phone_number(phone_number_id)
        except ApiUnreachable as exc:
            return IdentityProblem(
                f"no WhatsApp API answers at {where} ({exc}): is the sandbox running "
                "(`delivery-pipeline sandbox`, `./dev up`)? Else check WHATSAPP_API_BASE_URL",
                refused=False,
            )
        except GlobalSendError as exc:
            variable = (
                "WHATSAPP_PHONE_NUMBER_ID"
                if phone_number_id == whatsapp.phone_number_id
                else "WHATSAPP_NUMBERS"
            )
            hint = remedy(exc.code) or f"check WHATSAPP_ACCESS_TOKEN and {variable}"
            if not where.startswith("https://graph.facebook.com"):
                hint += (
                    "; a sandbox accepts only the WHATSAPP_ACCESS_TOKEN and the numbers "
                    "of its own environment (its development identity when unset)"
                )
            return IdentityProblem(
                f"WhatsApp at {where} refused our identity (phone number id "
                f"{phone_number_id}): ({exc.code}) {exc.message}; {hint}",
                refused=True,
            )
        except CloudApiError:
            continue
    return None
