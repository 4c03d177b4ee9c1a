"""Send payload validation and the Meta-shaped error body every refusal answers with."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from delivery_pipeline.model import bsuid, e164
from delivery_pipeline.sandbox.config import SandboxConfig, Template
from delivery_pipeline.sandbox.documents import (
    Attachment,
    document_header,
    document_message,
    named_values,
)
from delivery_pipeline.sandbox.refusals import Refusal

TEXT_BODY_MAX = 4096
CALLBACK_DATA_MAX = 512

REENGAGEMENT_DETAILS = (
    "Message failed to send because more than 24 hours have passed since the customer "
    "last replied to this number."
)

UNREACHABLE_DETAILS = "Message Undeliverable."
BSUID_UNSUPPORTED_DETAILS = (
    "This message type cannot be sent to a business-scoped user ID; send it to the "
    "user's phone number."
)

DETAILS: dict[int, str] = {
    131047: REENGAGEMENT_DETAILS,
    131026: UNREACHABLE_DETAILS,
    131053: "Downloading media from weblink failed: the sandbox fetches no URL; upload the "
    "file and send its id.",
}


def details(code: int) -> str:
    return DETAILS.get(code, f"The sandbox was told to answer {code}.")


@dataclass(frozen=True)
class Outgoing:
    """A send request that passed validation."""

    to: str  # an E.164 number (``to``) or a business-scoped user id (``recipient``)
    type: str
    body: str | None = None
    template: Template | None = None
    parameters: list[str] = field(default_factory=list)
    callback_data: str | None = None
    # A quick reply's payload by button index, as the send gave it (else its text comes back).
    button_payloads: dict[int, str] = field(default_factory=dict)
    # The business number it was sent from (the path's; "" before it is known).
    phone_number_id: str = ""
    # The file it carries: a template's DOCUMENT header, or a document message's.
    attachment: Attachment | None = None

    @property
    def by_user_id(self) -> bool:
        return not self.to.startswith("+")

    @property
    def wa_id(self) -> str | None:
        return None if self.by_user_id else self.to[1:]


def validate_send(payload: Any, config: SandboxConfig) -> Outgoing:
    """The parsed message, or a ``Refusal`` naming the first thing wrong with it."""
    if not isinstance(payload, dict):
        raise Refusal(100, "The request body must be a JSON object.")
    if payload.get("messaging_product") != "whatsapp":
        raise Refusal(100, "messaging_product is required and must be 'whatsapp'.")
    if payload.get("recipient_type", "individual") != "individual":
        raise Refusal(100, "recipient_type must be 'individual'.")
    to = payload.get("to")
    recipient = payload.get("recipient")
    if to is None and recipient is not None:
        # A person who uses a username: their business-scoped user id.
        if not isinstance(recipient, str) or bsuid(recipient) != recipient:
            raise Refusal(
                131009, f"'recipient' must be a business-scoped user id, got {recipient!r}."
            )
        to = recipient
    elif not isinstance(to, str) or e164(to) != to:
        raise Refusal(131009, f"'to' must be an E.164 number with a leading '+', got {to!r}.")
    callback_data = payload.get("biz_opaque_callback_data")
    if callback_data is not None and not isinstance(callback_data, str):
        raise Refusal(100, "biz_opaque_callback_data must be a string.")
    if callback_data is not None and len(callback_data) > CALLBACK_DATA_MAX:
        raise Refusal(
            100, f"biz_opaque_callback_data must be at most {CALLBACK_DATA_MAX} characters long."
        )
    kind = payload.get("type", "text")
    if kind == "text":
        return Outgoing(to, "text", body=_text_body(payload), callback_data=callback_data)
    if kind == "template":
        template, parameters = _template(payload, config)
        components = payload["template"].get("components")
        return Outgoing(
            to,
            "template",
            template=template,
            parameters=parameters,
            callback_data=callback_data,
            button_payloads=_button_payloads(components, template),
            attachment=document_header(components, template),
        )
    if kind == "document":
        attachment = document_message(payload)
        return Outgoing(to, "document", callback_data=callback_data, attachment=attachment)
    raise Refusal(131051, f"Message type {kind!r} is not supported by the sandbox.")


def _text_body(payload: dict[str, Any]) -> str:
    text = payload.get("text")
    body = text.get("body") if isinstance(text, dict) else None
    if not isinstance(body, str) or not body:
        raise Refusal(100, "text['body'] is required and must be a non-empty string.")
    if len(body) > TEXT_BODY_MAX:
        raise Refusal(100, f"Param text['body'] must be at most {TEXT_BODY_MAX} characters long.")
    return body


def _template(payload: dict[str, Any], config: SandboxConfig) -> tuple[Template, list[str]]:
    spec = payload.get("template")
    if not isinstance(spec, dict):
        raise Refusal(100, "template is required for type 'template'.")
    name = spec.get("name")
    language = spec.get("language")
    code = language.get("code") if isinstance(language, dict) else None
    if not isinstance(name, str) or not isinstance(code, str):
        raise Refusal(100, "template.name and template.language.code are required.")
    template = config.template(name, code)
    if template is None:
        raise Refusal(132001, f"template name ({name}) does not exist in {code}")
    parameters = _body_parameters(spec.get("components"), template)
    if len(parameters) != template.param_count:
        raise Refusal(
            132000,
            f"body: number of localizable_params ({len(parameters)}) does not match the "
            f"expected number of params ({template.param_count})",
        )
    for value in parameters:
        if "\n" in value or "\r" in value or "\t" in value or "     " in value:
            raise Refusal(
                132018,
                "Param text cannot have new-line/tab characters or more than 4 consecutive spaces",
            )
    return template, parameters


def _body_parameters(components: Any, template: Template) -> list[str]:
    if components is None:
        return []
    if not isinstance(components, list):
        raise Refusal(100, "template.components must be a list.")
    values: list[str] = []
    names: list[str | None] = []
    for component in components:
        if not isinstance(component, dict):
            raise Refusal(100, "Each template component must be an object.")
        parameters = component.get("parameters") or []
        if component.get("type") == "button":
            continue  # _button_payloads reads (and checks) them
        if component.get("type") == "header" and template.header is not None:
            continue  # documents.document_header reads (and checks) it
        if component.get("type") != "body":
            if parameters:
                raise Refusal(
                    132000,
                    f"{component.get('type')}: number of localizable_params "
                    f"({len(parameters)}) does not match the expected number of params (0)",
                )
            continue
        for parameter in parameters:
            if not isinstance(parameter, dict):
                raise Refusal(100, "Each template parameter must be an object.")
            text = parameter.get("text")
            if parameter.get("type") != "text" or not isinstance(text, str):
                raise Refusal(132012, "Body parameters must be of type 'text' with a string text.")
            values.append(text)
            names.append(parameter.get("parameter_name"))
    if template.parameter_names:
        return named_values(names, values, template)
    return values


def _button_payloads(components: Any, template: Template) -> dict[int, str]:
    """The payload given for each quick reply, by index; the platform refuses a
    button component the template does not have."""
    payloads: dict[int, str] = {}
    for component in components or []:
        if component.get("type") != "button":
            continue
        index = component.get("index")
        try:
            position = int(index)
        except (TypeError, ValueError):
            raise Refusal(100, "button.index must be a number.") from None
        if component.get("sub_type") != "quick_reply" or not 0 <= position < len(template.buttons):
            raise Refusal(
                132000,
                f"button at index {index}: the template has no such quick-reply button",
            )
        for parameter in component.get("parameters") or []:
            value = parameter.get("payload") if isinstance(parameter, dict) else None
            if not isinstance(parameter, dict) or parameter.get("type") != "payload":
                raise Refusal(132012, "Quick-reply button parameters must be of type 'payload'.")
            if not isinstance(value, str) or not value:
                raise Refusal(100, "button payload must be a non-empty string.")
            payloads[position] = value
    return payloads
