"""Our Standard Webhooks signatures, checked against the specification's reference library."""

from __future__ import annotations

import base64
import json
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from delivery_pipeline.client.webhooks import InvalidSignature, secret_key, signed_headers, verify

SECRET = "whsec_" + base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()
NEXT_SECRET = "whsec_" + base64.b64encode(b"another key, the one coming next").decode()


@given(
    event_id=st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1),
    data=st.dictionaries(st.text(), st.text() | st.integers() | st.none()),
)
def test_the_reference_library_verifies_what_we_sign(event_id, data):
    body = json.dumps({"type": "document.delivered", "data": data}).encode()
    headers = signed_headers([secret_key(SECRET)], event_id, int(time.time()), body)
    assert Webhook(SECRET).verify(body, headers)["data"] == data


def test_while_a_secret_is_replaced_each_verifies():
    body = b'{"type":"document.delivered"}'
    keys = [secret_key(SECRET), secret_key(NEXT_SECRET)]
    headers = signed_headers(keys, "evt_1", int(time.time()), body)
    assert len(headers["webhook-signature"].split()) == 2
    for secret in (SECRET, NEXT_SECRET):
        Webhook(secret).verify(body, headers)
        assert verify(secret, body, headers) == {"type": "document.delivered"}


def test_verify_refuses_a_changed_body_a_wrong_secret_and_an_old_timestamp():
    body = b'{"type":"document.read"}'
    now = int(time.time())
    headers = signed_headers([secret_key(SECRET)], "evt_2", now, body)
    with pytest.raises(InvalidSignature):
        verify(SECRET, body + b" ", headers)
    with pytest.raises(InvalidSignature):
        verify(NEXT_SECRET, body, headers)
    with pytest.raises(InvalidSignature):
        verify(SECRET, body, headers, now=now + 301)
    with pytest.raises(InvalidSignature):
        verify(SECRET, body, {**headers, "webhook-id": "evt_3"})
    with pytest.raises(WebhookVerificationError):
        Webhook(SECRET).verify(body, {**headers, "webhook-id": "evt_3"})
    assert (
        verify(SECRET, body, {k.upper(): v for k, v in headers.items()})["type"] == "document.read"
    )
