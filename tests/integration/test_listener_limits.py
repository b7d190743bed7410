"""The listener's limits over real sockets: back-pressure on clients that do not read,
a bound on what all connections hold, frame and TLS handshake deadlines.

The handler answers each request on a later turn of the listener's loop, as the
daemon's shards do, with a reply of as many bytes as the request's body asks for.
Memory is measured on the loop from the transports and frame readers themselves,
not from the listener's own bookkeeping.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
import trustme

from kafkacoord.wire import Listener, ListenerLimits, ServerConnection, server_context
from kafkacoord.wire.frames import RequestHeader, encode_request, encode_response
from tests.pki import write_pki
from tests.rawwire import closed_by_peer, connect, read_response

pytestmark = pytest.mark.integration

T = TypeVar("T")
KIB = 1024
REPLY = 64 * KIB
# What one read may bring in before reading stops (uvloop and asyncio read 256 KiB).
READ_CHUNK = 256 * KIB


class Sized:
    """Answers every request with a body of the size its own body names (``b"65536"``);
    ``b"park"`` is held until :meth:`release`."""

    def __init__(self) -> None:
        self.seen: dict[int, int] = {}
        self.parked: list[tuple[ServerConnection, int]] = []

    def __call__(self, frames: list[tuple[RequestHeader, bytes]], conn: ServerConnection) -> None:
        self.seen[conn.id] = self.seen.get(conn.id, 0) + len(frames)
        replies = []
        for header, body in frames:
            if body == b"park":
                self.parked.append((conn, header.correlation_id))
                continue
            replies.append(encode_response(header.correlation_id, 0, None, b"x" * int(body)))
        if replies:
            loop = conn.listener.loop
            assert loop is not None
            loop.call_soon(conn.send, b"".join(replies), len(replies))

    def release(self) -> None:
        parked, self.parked = self.parked, []
        for conn, correlation_id in parked:
            conn.send(encode_response(correlation_id, 0, None, b"parked"), 1)

    def total(self) -> int:
        return sum(self.seen.values())


Listen = Callable[..., tuple[Listener, Sized]]


@pytest.fixture
def listen() -> Iterator[Listen]:
    listeners: list[Listener] = []

    def start(limits: ListenerLimits, tls: ssl.SSLContext | None = None) -> tuple[Listener, Sized]:
        handler = Sized()
        listener = Listener("127.0.0.1", 0, handler, limits=limits, ssl_context=tls).start()
        listeners.append(listener)
        return listener, handler

    yield start
    for listener in listeners:
        listener.close()


def on_loop(listener: Listener, fn: Callable[[], T]) -> T:
    """``fn()`` run on the listener's loop thread."""
    done: concurrent.futures.Future[T] = concurrent.futures.Future()

    def run() -> None:
        try:
            done.set_result(fn())
        except BaseException as exc:  # surfaced in the test thread
            done.set_exception(exc)

    assert listener.loop is not None
    listener.loop.call_soon_threadsafe(run)
    return done.result(10)


def held(listener: Listener) -> int:
    """Bytes the listener holds now: unsent replies, unread and unhandled request bytes."""

    def measure() -> int:
        total = 0
        for conn in list(listener._connections.values()):
            transport = conn._transport
            if transport is not None and not transport.is_closing():
                total += transport.get_write_buffer_size()
            total += conn._reader.pending  # the backlog, uncut, and a partial frame
        return total

    return on_loop(listener, measure)


def frame(cid: int, body: bytes) -> bytes:
    return encode_request(RequestHeader(1, 0, cid, -1, "limits-test"), body)


def greedy(endpoint: str, count: int, reply: int = REPLY) -> tuple[socket.socket, threading.Thread]:
    """A client that pipelines ``count`` requests for ``reply``-byte answers and does not
    read (its receive buffer is small, so the daemon's kernel buffers fill soon)."""
    host, _, port = endpoint.rpartition(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    blob = b"".join(frame(i, b"%d" % reply) for i in range(count))
    # Blocks once the listener stops reading; it ends when the client reads or closes.
    sender = threading.Thread(target=_send_all, args=(sock, blob), daemon=True)
    sender.start()
    return sock, sender


def _send_all(sock: socket.socket, data: bytes) -> None:
    with contextlib.suppress(OSError):  # closed by the test
        sock.sendall(data)


def read_replies(sock: socket.socket, count: int, size: int, timeout_s: float = 60) -> list[int]:
    """Correlation ids of ``count`` replies, each checked to carry ``size`` bytes."""
    sock.settimeout(timeout_s)
    ids = []
    for _ in range(count):
        response = read_response(sock)
        assert len(response.body) == size
        ids.append(response.correlation_id)
    return ids


def wait_for(check: Callable[[], bool], timeout_s: float = 20, what: str = "") -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def settled(read: Callable[[], int], quiet_s: float = 0.3, timeout_s: float = 10) -> int:
    """``read()`` once it has stopped changing for ``quiet_s``."""
    deadline = time.monotonic() + timeout_s
    last = read()
    while time.monotonic() < deadline:
        time.sleep(quiet_s)
        now = read()
        if now == last:
            return now
        last = now
    raise AssertionError(f"still changing after {timeout_s}s: {last}")


def peak_held(listener: Listener, seconds: float) -> int:
    """The most :func:`held` saw, sampled for ``seconds``."""
    peak = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        peak = max(peak, held(listener))
        time.sleep(0.02)
    return peak


def test_a_client_that_never_reads_stops_being_read_and_resumes_when_it_reads(
    listen: Listen,
) -> None:
    inflight, high, count = 16, 256 * KIB, 2000
    listener, handler = listen(
        ListenerLimits(max_inflight_per_connection=inflight, write_buffer_high_bytes=high)
    )
    # Buffered past the high-water mark, in-flight replies still arrive; one read of
    # requests may wait in the backlog. Without back-pressure it would be count x REPLY.
    bound = high + inflight * REPLY + READ_CHUNK + 64 * KIB
    assert bound * 50 < count * REPLY
    sock, sender = greedy(listener.endpoint, count)
    with sock:
        wait_for(lambda: listener.stats.paused.get("write buffer", 0) >= 1, what="a pause")
        peak = peak_held(listener, 1.5)
        seen = handler.total()
        time.sleep(0.5)
        assert handler.total() == seen < count  # not read any further
        assert listener.stats.reading_paused == 1
        assert 0 < peak <= bound
        assert listener.stats.buffered_bytes <= bound
        # It reads: every request is answered, none dropped, in order.
        assert read_replies(sock, count, REPLY) == list(range(count))
        sender.join(10)
    assert handler.total() == count
    wait_for(lambda: listener.stats.connections == 0, what="the connection to close")
    assert (listener.stats.reading_paused, listener.stats.buffered_bytes) == (0, 0)


def test_a_well_behaved_client_is_served_promptly_while_a_greedy_one_is_paused(
    listen: Listen,
) -> None:
    listener, handler = listen(
        ListenerLimits(max_inflight_per_connection=16, write_buffer_high_bytes=256 * KIB)
    )
    bad, _ = greedy(listener.endpoint, 2000)
    with bad, connect(listener.endpoint) as good:
        # Paused for its unread replies, not just at its in-flight limit (which lifts as
        # those replies are written): from then on nothing more of it is read.
        wait_for(lambda: listener.stats.paused.get("write buffer", 0) >= 1,
                 what="the greedy client paused")  # fmt: skip
        greedy_seen = settled(handler.total)
        latencies = []
        for i in range(200):
            started = time.monotonic()
            good.sendall(frame(i, b"100"))
            response = read_response(good)
            latencies.append(time.monotonic() - started)
            assert (response.correlation_id, len(response.body)) == (i, 100)
        assert handler.total() == greedy_seen + 200  # the greedy one got nothing read
        assert listener.stats.reading_paused == 1
    latencies.sort()
    assert latencies[int(len(latencies) * 0.99)] < 1.0  # generous: about 100 µs here


def test_pushes_to_a_client_not_reading_are_dropped_but_owed_replies_are_not(
    listen: Listen,
) -> None:
    listener, handler = listen(
        ListenerLimits(max_inflight_per_connection=16, write_buffer_high_bytes=256 * KIB)
    )
    host, _, port = listener.endpoint.rpartition(":")
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect((host, int(port)))
        sock.sendall(frame(0, b"park"))
        wait_for(lambda: len(handler.parked) == 1, what="the parked request")
        conn = handler.parked[0][0]
        count = 200
        sender = threading.Thread(
            target=_send_all,
            args=(sock, b"".join(frame(1 + i, b"%d" % REPLY) for i in range(count))),
            daemon=True,
        )
        sender.start()
        wait_for(lambda: listener.stats.paused.get("write buffer", 0) >= 1, what="a pause")
        conn.send(encode_response(-1, 0, None, b"hint"), 0)  # a push: answers nothing
        handler.release()  # the parked request's reply: owed
        wait_for(lambda: listener.stats.pushes_dropped == 1, what="the push dropped")
        sock.settimeout(60)
        replies = [read_response(sock) for _ in range(count + 1)]
        sender.join(10)
    assert sorted(r.correlation_id for r in replies) == list(range(count + 1))
    assert [r.body for r in replies if r.correlation_id == 0] == [b"parked"]


def test_all_connections_together_stay_within_max_buffered_bytes(listen: Listen) -> None:
    inflight, budget, clients, count = 8, 2 * 1024 * KIB, 4, 400
    listener, handler = listen(ListenerLimits(
        max_inflight_per_connection=inflight, write_buffer_high_bytes=64 * 1024 * KIB,
        max_buffered_bytes=budget,
    ))  # fmt: skip
    # Each connection held back may still get its in-flight replies and one read.
    bound = budget + clients * (inflight * REPLY + READ_CHUNK + 64 * KIB)
    assert bound * 5 < clients * count * REPLY
    greedy_ones = [greedy(listener.endpoint, count) for _ in range(clients)]
    try:
        wait_for(lambda: listener.stats.paused.get("memory", 0) >= 1, what="a memory pause")
        peak = peak_held(listener, 1.5)
        assert listener.stats.paused.get("write buffer", 0) == 0  # the budget did it
        assert 0 < peak <= bound
        with connect(listener.endpoint) as good:  # holds nothing: served on
            for i in range(20):
                good.sendall(frame(i, b"10"))
                assert read_response(good).correlation_id == i
        for sock, _ in greedy_ones:  # they read: all answered, none dropped
            assert read_replies(sock, count, REPLY) == list(range(count))
    finally:
        for sock, sender in greedy_ones:
            sock.close()
            sender.join(10)
    assert handler.total() == clients * count + 20
    wait_for(lambda: listener.stats.connections == 0, what="the connections to close")
    assert (listener.stats.reading_paused, listener.stats.buffered_bytes) == (0, 0)


def test_a_frame_trickled_byte_by_byte_is_closed_at_its_deadline(listen: Listen) -> None:
    listener, handler = listen(ListenerLimits(request_read_timeout_ms=500))
    whole = frame(1, b"100" + b" " * 40)
    sent = 0
    started = time.monotonic()
    with connect(listener.endpoint) as sock:
        sock.settimeout(0.1)
        closed = False
        while sent < len(whole) and time.monotonic() - started < 10:
            try:
                if sock.recv(1) == b"":
                    closed = True
                    break
            except TimeoutError:  # one byte every 100 ms
                pass
            except ConnectionResetError:
                closed = True
                break
            sock.send(whole[sent : sent + 1])
            sent += 1
    assert closed and sent < len(whole)
    assert 0.5 <= time.monotonic() - started < 5
    assert listener.stats.frames_timed_out == 1
    assert handler.total() == 0
    assert "closed mid-frame" not in listener.stats.bad_frames  # counted as what it was


def test_a_frame_sent_slowly_within_its_deadline_is_served(listen: Listen) -> None:
    listener, _ = listen(ListenerLimits(request_read_timeout_ms=3000))
    whole = frame(7, b"100" + b" " * 400)
    with connect(listener.endpoint) as sock:
        for i in range(0, len(whole), 100):  # five pieces, 200 ms apart
            sock.sendall(whole[i : i + 100])
            time.sleep(0.2)
        response = read_response(sock)
    assert (response.correlation_id, len(response.body)) == (7, 100)
    assert listener.stats.frames_timed_out == 0


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("tls-limits")
    ca = trustme.CA()
    files = write_pki(root, ca, {"server": ca.issue_cert("127.0.0.1")})
    return files["ca"], files["server"], files["server-key"]


def test_a_tls_handshake_that_never_completes_is_closed_and_counted_meanwhile(
    listen: Listen, tls_files: tuple[Path, Path, Path]
) -> None:
    ca, cert, key = tls_files
    listener, handler = listen(
        ListenerLimits(tls_handshake_timeout_ms=500, max_connections=1),
        tls=server_context(cert, key),
    )
    with connect(listener.endpoint) as silent:
        wait_for(lambda: listener.stats.connections == 1, what="the silent one admitted")
        # Its handshake holds a connection slot: max_connections counts it.
        with connect(listener.endpoint) as refused:
            assert closed_by_peer(refused)
        assert listener.stats.refused == 1
        started = time.monotonic()
        assert closed_by_peer(silent, timeout_s=10)
        assert time.monotonic() - started < 5
    # asyncio closes the socket before it hands the handshake's error over.
    wait_for(lambda: listener.stats.handshakes_timed_out == 1, what="the timeout counted")
    wait_for(lambda: listener.stats.connections == 0, what="the slot freed")
    client = ssl.create_default_context(cafile=str(ca))
    with client.wrap_socket(connect(listener.endpoint), server_hostname="127.0.0.1") as good:
        good.sendall(frame(3, b"10"))
        assert read_response(good).correlation_id == 3
    wait_for(lambda: listener.stats.connections == 0, what="the slot freed again")
    with connect(listener.endpoint) as plain:  # a client that does not speak TLS
        plain.sendall(frame(4, b"10"))
        assert closed_by_peer(plain)
    wait_for(lambda: listener.stats.handshakes_failed == 1, what="the failure counted")
    assert (listener.stats.handshakes_timed_out, listener.stats.refused) == (1, 1)
    assert handler.total() == 1


def test_reads_that_bring_more_frames_than_may_be_in_flight_do_not_stall(
    listen: Listen,
) -> None:
    """Answers given at once, inside the hand-over, must let the rest of a read in."""
    listener, _ = listen(ListenerLimits(max_inflight_per_connection=4))
    answered: list[int] = []

    def at_once(frames: list[tuple[RequestHeader, bytes]], conn: ServerConnection) -> None:
        for header, _ in frames:
            answered.append(header.correlation_id)
            conn.send(encode_response(header.correlation_id, 0, None, b""), 1)

    listener.handler = at_once
    with connect(listener.endpoint) as sock:
        sock.sendall(b"".join(frame(i, b"0") for i in range(50)))
        assert [read_response(sock).correlation_id for _ in range(50)] == list(range(50))
    assert answered == list(range(50))


def test_oversize_frame_error_still_reaches_a_reading_client(listen: Listen) -> None:
    listener, _ = listen(ListenerLimits(max_frame_bytes=1024))
    with connect(listener.endpoint) as sock:
        sock.sendall(struct.pack(">i", 4096) + frame(9, b"")[4:])
        response = read_response(sock)
        assert response.correlation_id == 9 and "exceeds max_frame_bytes" in (
            response.message or ""
        )
        assert closed_by_peer(sock)
