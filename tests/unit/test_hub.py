"""ChangeHub: one change wakes every waiter of a queue, and waits that end leave nothing."""

from __future__ import annotations

import asyncio

from api.edge.direct_writes import DirectSwitch
from api.edge.stream_writes import StreamWrites
from api.routes.events import QueueFilter
from sidecar.model import Change
from sidecar.signals.change_fanout import ChangeHub, Stream

Q1, Q2 = ("/", "q1"), ("/", "q2")


def test_one_change_wakes_every_waiter_of_the_queue_and_no_other() -> None:
    async def scenario() -> tuple[list[bool], list[bool]]:
        hub = ChangeHub()
        woken = [asyncio.create_task(hub.wait([Q1], 5)) for _ in range(1000)]
        others = [asyncio.create_task(hub.wait([Q2], 0.2)) for _ in range(3)]
        await asyncio.sleep(0)
        hub.on_version(Q1)
        return await asyncio.gather(*woken), await asyncio.gather(*others)

    woken, others = asyncio.run(scenario())
    assert all(woken) and not any(others)


def test_waits_that_time_out_leave_no_waiter_behind() -> None:
    async def scenario() -> tuple[int, int]:
        hub = ChangeHub()
        short = [asyncio.create_task(hub.wait([Q1, Q2], 0.05)) for _ in range(10)]
        long = asyncio.create_task(hub.wait([Q1], 5))
        await asyncio.gather(*short)
        during = hub.waited_on  # the long wait still holds Q1
        hub.on_version(Q1)
        assert await long
        return during, hub.waited_on

    assert asyncio.run(scenario()) == (1, 0)


def test_a_wait_on_no_queue_just_sleeps() -> None:
    assert asyncio.run(ChangeHub().wait([], 0.01)) is False


def test_replay_after_an_id_of_this_run_and_a_snapshot_otherwise() -> None:
    async def scenario() -> None:
        hub = ChangeHub(replay=3)
        for version in range(1, 6):
            hub.on_change(Change("/", "q1", version, version % 2 == 1))
        every = lambda key: True
        missed = hub.missed(hub.event_id(3), every)
        assert [change.version for _, change in missed or []] == [4, 5]
        assert hub.missed(hub.event_id(1), every) is None  # older than the ring
        assert hub.missed("another-run-3", every) is None
        assert hub.missed(hub.event_id(9), every) is None  # from the future

    asyncio.run(scenario())


def test_a_change_is_encoded_once_for_every_stream() -> None:
    async def scenario() -> list[bytes]:
        hub = ChangeHub()
        streams = [hub.subscribe(lambda key: True) for _ in range(100)]
        hub.on_change(Change("/", "q1", 7, True, stopped_count=2))
        sent = []
        for stream in streams:
            item = stream.queue.get_nowait()
            assert item is not None
            sent.append(hub.frame(*item))
        return sent

    frames = asyncio.run(scenario())
    assert all(frame is frames[0] for frame in frames)  # the same bytes, not equal copies
    assert frames[0].startswith(b"id: ") and b"event: flow\ndata: {" in frames[0]
    assert b'"queue":"q1"' in frames[0] and frames[0].endswith(b"\n\n")


class Written:
    """A stream's direct writer that records what it is given; `around_loop` takes every
    other stream's events (as a socket would, or not: a buffer already queued)."""

    def __init__(self, around: bool, ok: bool = True) -> None:
        self.frames: list[bytes] = []
        self.around, self.ok = around, ok

    def __call__(self, frame: bytes) -> bool:
        if self.ok:
            self.frames.append(frame)
        return self.ok

    def around_loop(self, frame: bytes) -> bool:
        if self.around and self.ok:
            self.frames.append(frame)
            return True
        return False


def test_claimed_streams_get_every_event_in_order_and_one_that_cannot_take_it_ends() -> None:
    """The edge's writer (`api.edge.stream_writes`) takes the claimed streams' events, on
    two threads, the rest by the call: once each, in order; the others are queued."""
    async def scenario() -> tuple[list[list[bytes]], list[bool], object]:
        hub = ChangeHub()
        writes = StreamWrites(hub, DirectSwitch())
        writers = [Written(around=i % 2 == 0, ok=i != 5) for i in range(300)]  # 5: gone
        streams = [hub.subscribe(lambda key: key == Q1) for _ in writers]
        for writer, stream in zip(writers, streams, strict=True):
            writes.claim(stream, writer)  # type: ignore[arg-type]
        queued = hub.subscribe(lambda key: True)  # not caught up yet: queued as before
        for version in (1, 2, 3):
            hub.on_change(Change("/", "q1", version, version % 2 == 1))
        hub.on_change(Change("/", "q2", 9, True))  # no claimed stream wants it
        while writes.last_wakeup is None or any(len(w.frames) < 3 for i, w in
                                                enumerate(writers) if i != 5):
            await asyncio.sleep(0.001)
        ended = [s.overflowed for s in streams]
        return [w.frames for w in writers], ended, [queued.queue.get_nowait()
                                                    for _ in range(4)]

    written, ended, queued = asyncio.run(scenario())
    versions = [[int(f.split(b'"version":')[1].split(b",")[0]) for f in w] for w in written]
    assert all(v == [1, 2, 3] for i, v in enumerate(versions) if i != 5)
    assert versions[5] == []
    assert ended == [i == 5 for i in range(300)]
    assert [item[1].version for item in queued] == [1, 2, 3, 9]  # type: ignore[index]


def test_a_stream_that_names_its_queues_is_looked_at_only_for_changes_of_those() -> None:
    """`/events?queue=q1&vhost=a`: the hub keeps it under q1 and calls its matcher only
    for q1's changes (which still filters the vhost); a stream with a glob, or none, is
    looked at for every change; unsubscribing leaves no name behind."""
    async def scenario() -> tuple[list[list[str]], list[int], tuple[object, ...]]:
        hub = ChangeHub()
        asked: list[int] = [0, 0, 0]

        def counted(i: int, vhost: str | None, queues: list[str],
                    glob: str | None) -> Stream:
            matches = QueueFilter(vhost, frozenset(queues), glob)

            def count(key: tuple[str, str]) -> bool:
                asked[i] += 1
                return matches(key)
            return hub.subscribe(count, matches.named_only)

        streams = [counted(0, "a", ["q1"], None), counted(1, None, ["q1"], "x*"),
                   counted(2, None, [], None)]
        for vhost, queue in (("a", "q1"), ("b", "q1"), ("a", "q2"), ("a", "x9")):
            hub.on_change(Change(vhost, queue, 1, True))
        got: list[list[str]] = [[] for _ in streams]
        for seen, stream in zip(got, streams, strict=True):
            while not stream.queue.empty():
                item = stream.queue.get_nowait()
                assert item is not None
                seen.append(f"{item[1].vhost}/{item[1].queue}")
        for stream in streams:
            hub.unsubscribe(stream)
        return got, asked, (hub._streams, hub._names, hub._named, hub._unnamed)

    got, asked, left = asyncio.run(scenario())
    assert got == [["a/q1"], ["a/q1", "b/q1", "a/x9"], ["a/q1", "b/q1", "a/q2", "a/x9"]]
    assert asked == [2, 4, 4]  # the named stream: q1's two changes only
    assert left == ({}, {}, {}, set())


def test_streams_that_want_the_same_queues_share_one_question_a_change() -> None:
    """10,000 streams of `/events?name=orders*` are one filter: a change asks it once,
    and every one of them gets the change; the last to leave takes the filter away."""
    async def scenario() -> tuple[int, list[int], int]:
        hub = ChangeHub()
        asked = [0]

        class Counted(QueueFilter):
            def __call__(self, key: tuple[str, str]) -> bool:
                asked[0] += 1
                return super().__call__(key)

        streams = [hub.subscribe(Counted(None, frozenset(), "orders*")) for _ in range(1000)]
        hub.on_change(Change("/", "orders-1", 1, True))
        hub.on_change(Change("/", "other", 1, True))
        sizes = [s.queue.qsize() for s in streams]
        for stream in streams:
            hub.unsubscribe(stream)
        return asked[0], sizes, len(hub._streams) + len(hub._unnamed)

    asked, sizes, left = asyncio.run(scenario())
    assert asked == 2 and sizes == [1] * 1000 and left == 0
