"""Bookkeeping of publisher confirms: the window of unconfirmed messages and its failures.

This is the seed's sender "capacity": a producer keeps at most `capacity` messages that
the broker has not confirmed yet. RabbitMQ confirms asynchronously, so a refusal (a nack,
or a `mandatory` message returned as unroutable) arrives while later messages are being
sent; it is kept here and raised by the publisher's next call. Pure: no I/O, no pika.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class PublishError(Exception):
    """A message was not accepted, or cannot be sent, by the broker."""


class MessageNacked(PublishError):
    """The broker nacked messages: it could not take responsibility for them."""


class MessageReturned(PublishError):
    """The broker returned a `mandatory` message: no queue matched its routing."""


@dataclass(frozen=True)
class Returned:
    """A Basic.Return: why the broker handed a message back."""

    reply_code: int
    reply_text: str
    exchange: str
    routing_key: str


@dataclass
class ConfirmWindow:
    """Delivery tags sent and not yet confirmed, plus the refusals not yet reported."""

    capacity: int
    last_tag: int = 0
    unconfirmed: set[int] = field(default_factory=set)
    nacked: list[int] = field(default_factory=list)
    returned: list[Returned] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.capacity < 1:
            raise ValueError(f"capacity must be at least 1, not {self.capacity}")

    @property
    def full(self) -> bool:
        return len(self.unconfirmed) >= self.capacity

    def sent(self) -> int:
        """Note one more message sent; its delivery tag (the channel counts from 1)."""
        self.last_tag += 1
        self.unconfirmed.add(self.last_tag)
        return self.last_tag

    def on_return(self, returned: Returned) -> None:
        """RabbitMQ sends Basic.Return just before the ack of the same message."""
        self.returned.append(returned)

    def on_confirm(self, tag: int, multiple: bool, ack: bool) -> None:
        """A Basic.Ack or Basic.Nack for `tag`, or for every tag up to it when `multiple`."""
        done = {t for t in self.unconfirmed if t <= tag} if multiple else {tag}
        self.unconfirmed -= done
        if not ack:
            self.nacked.extend(sorted(done))

    def take_error(self) -> PublishError | None:
        """The refusals seen since the last call, as one error (None if there were none);
        a nack outranks a return, but the message names both."""
        parts = []
        if self.nacked:
            parts.append(f"the broker nacked {len(self.nacked)} message(s) (delivery tags "
                         f"{_tags(self.nacked)}); they may not be enqueued, send them again")
        if self.returned:
            first = self.returned[0]
            parts.append(f"the broker returned {len(self.returned)} message(s) published "
                         f"to exchange {first.exchange!r} with routing key "
                         f"{first.routing_key!r}: {first.reply_code} {first.reply_text} "
                         "(no queue is bound for them)")
        kind = MessageNacked if self.nacked else MessageReturned
        self.nacked.clear()
        self.returned.clear()
        return kind("; ".join(parts)) if parts else None


def _tags(tags: list[int], shown: int = 5) -> str:
    head = ", ".join(map(str, tags[:shown]))
    return head + (f", ... ({len(tags) - shown} more)" if len(tags) > shown else "")
