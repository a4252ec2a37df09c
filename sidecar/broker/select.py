"""Which broker adapter the options name: `--broker`, else the management URL's scheme.

kombu's way: one module per broker, chosen from an alias map (`sidecar.broker.SCHEMES`).
`http(s)://` is RabbitMQ's management API (the default, so existing configurations keep
working), `amqp://` or `qpid://` a Qpid C++ broker's AMQP port (QMF over AMQP 1.0),
`broker-j+http(s)://` a Qpid Broker-J's REST management API.
"""

from __future__ import annotations

from sidecar.broker import BrokerAdapter, BrokerKind, kind_of_url
from sidecar.broker.broker_j import BrokerJAdapter
from sidecar.broker.qpid_cpp import QpidCppAdapter
from sidecar.broker.rabbitmq import RabbitMQAdapter
from sidecar.broker.rabbitmq_prometheus import PrometheusEndpoints, RabbitMQDepthSources
from sidecar.config import Settings


def broker_kind(settings: Settings) -> BrokerKind:
    """The broker `--broker` names, or the one the URL's scheme stands for (Settings
    refuses a URL whose scheme names none)."""
    if settings.broker != "auto":
        return settings.broker
    return kind_of_url(settings.management_url[0]) or "rabbitmq"


def adapter_for(settings: Settings) -> BrokerAdapter:
    """The broker adapter the options name, not connected yet."""
    kind = broker_kind(settings)
    user = settings.management_user
    password = settings.management_password.get_secret_value()
    if kind == "qpid-cpp":
        # qpidd started with --auth no takes anonymous connections: the default guest
        # credentials are only sent when the URL or the options name another user.
        named = user != "guest"
        return QpidCppAdapter(settings.management_url[0], user=user if named else None,
                              password=password if named else None,
                              timeout=settings.request_timeout,
                              defaults=settings.default_policy)
    if kind == "broker-j":
        return BrokerJAdapter(settings.management_url[0].removeprefix("broker-j+"), user,
                              password, timeout=settings.request_timeout)
    return RabbitMQDepthSources(
        RabbitMQAdapter(settings.management_url, user, password,
                        timeout=settings.request_timeout),
        PrometheusEndpoints(settings.prometheus_urls(), timeout=settings.request_timeout),
        settings.depth_source)
