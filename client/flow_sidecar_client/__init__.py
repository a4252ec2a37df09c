"""flow-sidecar's client distribution: producers that honour its flow control, and
`flow-config`. It imports nothing of the server (tests/unit/test_client_distribution.py)."""

from flow_sidecar_client.confirms import MessageNacked, MessageReturned, PublishError
from flow_sidecar_client.flow_wait import FlowControlTimeout, FlowStopped
from flow_sidecar_client.publisher import FlowControlledPublisher
from flow_sidecar_client.sidecar_url import DEFAULT_SIDECAR_URL, sidecar_url

__all__ = ["DEFAULT_SIDECAR_URL", "FlowControlTimeout", "FlowControlledPublisher", "FlowStopped",
           "MessageNacked", "MessageReturned", "PublishError", "sidecar_url"]
