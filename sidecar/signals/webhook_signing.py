"""Standard Webhooks signatures, so receivers can verify events with an off-the-shelf library.

The signed content is `{webhook-id}.{webhook-timestamp}.{body}` and the signature is the
base64 HMAC-SHA256 of it, sent as `webhook-signature: v1,<base64>`. The key follows the
Standard Webhooks libraries: a secret starting `whsec_` is the base64 of the key bytes
(what `standardwebhooks`/`svix` generate); any other secret is used as its UTF-8 bytes, so
an operator can type a passphrase and verify it with five lines of `hmac`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac

SECRET_PREFIX = "whsec_"


def secret_key(secret: str) -> bytes:
    """The HMAC key of a subscription secret (see the module docstring)."""
    if secret.startswith(SECRET_PREFIX):
        try:
            return base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
        except binascii.Error:
            raise ValueError("a secret starting 'whsec_' must be base64 after the prefix") \
                from None
    return secret.encode()


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """The `webhook-signature` value for one delivery attempt."""
    content = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret_key(secret), content, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def signature_headers(secret: str, msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three Standard Webhooks headers; the id stays the same across retries, the
    timestamp (and so the signature) is the attempt's."""
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(secret, msg_id, timestamp, body),
    }
