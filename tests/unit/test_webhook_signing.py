"""Signatures as Standard Webhooks define them: the published test vector must reproduce."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from sidecar.signals.webhook_signing import secret_key, sign, signature_headers

# From the Standard Webhooks specification and its reference libraries.
VECTOR_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
VECTOR_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
VECTOR_TS = 1614265330
VECTOR_BODY = b'{"test": 2432232314}'
VECTOR_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_published_vector_reproduces() -> None:
    assert sign(VECTOR_SECRET, VECTOR_ID, VECTOR_TS, VECTOR_BODY) == VECTOR_SIGNATURE


def test_whsec_secret_is_base64_after_the_prefix() -> None:
    assert secret_key(VECTOR_SECRET) == base64.b64decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")


def test_other_secrets_are_their_utf8_bytes() -> None:
    secret = "pässphrase without prefix"
    expected = base64.b64encode(hmac.new(secret.encode(), b"id.7.{}", hashlib.sha256)
                                .digest()).decode()
    assert secret_key(secret) == secret.encode()
    assert sign(secret, "id", 7, b"{}") == "v1," + expected


def test_bad_whsec_secret_is_refused() -> None:
    with pytest.raises(ValueError, match="base64"):
        secret_key("whsec_not base64!")


def test_headers_carry_id_timestamp_and_signature() -> None:
    headers = signature_headers(VECTOR_SECRET, VECTOR_ID, VECTOR_TS, VECTOR_BODY)
    assert headers == {"webhook-id": VECTOR_ID, "webhook-timestamp": str(VECTOR_TS),
                       "webhook-signature": VECTOR_SIGNATURE}
