"""Hypothesis strategies for frames a daemon must survive, and what it must answer them.

Bodies are built by walking each request model's fields (hypothesis's own
``from_type`` does not honour ``Annotated`` bounds well): every int, string, bytes,
list and map is drawn in range, at its bounds, just past them, at Kafka's type limits,
or as junk of another type. The APIs with binary bodies (version 1) are also sent
those, whole or broken. Frames around them may name unknown APIs or versions, the
wrong shard, or be cut short.

The oracle is the daemon's own edge, run in this process: :func:`expected` feeds the
frame to a :class:`RequestDispatcher` on a fake connection and reports what it refuses
with, and whether it closes the connection. The live daemon must answer the same.
"""

from __future__ import annotations

import base64
import enum
import json
import types
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types as at
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from kafkacoord.coordinator.groups.partitioning import partition_for
from kafkacoord.coordinator.protocol import ALL_APIS, APIS_BY_KEY, CONTROLLER_APIS, ErrorCode
from kafkacoord.coordinator.protocol.binary import encode_request_body
from kafkacoord.server.services.dispatch import RequestDispatcher
from kafkacoord.wire.frames import DEFAULT_MAX_FRAME_BYTES, SIZE, RequestHeader, encode_request

# Kafka's type limits and one past each, whatever the field's own bound.
EXTREME_INTS = sorted(
    {v for b in (15, 31, 63) for v in (2**b - 1, 2**b, -(2**b), -(2**b) - 1)}
    | {0, 1, -1, -2, 2**64, 10**30, -(10**30)}
)
ODD_TEXT = ["", " ", "\x00", "a b", "..", "\u202eevil", "😀" * 3, "é" * 5, "\ufffd", "\\", '"']
# A list or map repeated this often when drawn "huge" (past a bound of 1,000,000 it
# would be a frame over max_frame_bytes, which has a case of its own).
HUGE_AT_MOST = 20_000
# What a list item or map entry may weigh to be repeated that often.
HUGE_ITEM_BYTES = 48


def _constraints(extras: tuple[Any, ...]) -> list[Any]:
    out: list[Any] = []
    for e in extras:
        out.extend(e.metadata if isinstance(e, FieldInfo) else [e])
    return out


def _unwrapped(tp: Any, meta: list[Any]) -> tuple[Any, list[Any], bool]:
    """The type under Annotated and ``| None``, its constraints, and whether None is allowed."""
    nullable = False
    while True:
        origin = get_origin(tp)
        if origin is Annotated:
            tp, *extras = get_args(tp)
            meta = [*meta, *_constraints(tuple(extras))]
        elif origin is Union or origin is types.UnionType:
            options = [a for a in get_args(tp) if a is not type(None)]
            nullable = nullable or len(options) < len(get_args(tp))
            tp = options[0]
        else:
            return tp, meta, nullable


def _bound(meta: list[Any], kind: type, attr: str) -> Any:
    return next((getattr(m, attr) for m in meta if isinstance(m, kind)), None)


def weighted(*options: tuple[int, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """One of ``options``, each drawn in proportion to its weight (``one_of`` draws its
    options evenly: extremes everywhere would leave few bodies a shard ever sees)."""
    total = sum(w for w, _ in options)

    @st.composite
    def draw_one(draw: st.DrawFn) -> Any:
        roll = draw(st.integers(0, total - 1))
        for weight, strategy in options:
            if roll < weight:
                return draw(strategy)
            roll -= weight
        raise AssertionError("unreachable")

    return draw_one()


def junk() -> st.SearchStrategy[Any]:
    """A JSON value of the wrong type (NaN and infinities are not JSON at all)."""
    return st.one_of(
        st.none(), st.booleans(), st.floats(), st.text(max_size=5), st.just([]), st.just({})
    )


def ints(meta: list[Any]) -> st.SearchStrategy[int]:
    low = _bound(meta, at.Ge, "ge")
    high = _bound(meta, at.Le, "le")
    edges = [v for b in (low, high) if b is not None for v in (b - 1, b, b + 1)]
    return weighted(
        (6, st.integers(low, high)), (2, st.sampled_from(sorted({*EXTREME_INTS, *edges})))
    )


def texts(meta: list[Any]) -> st.SearchStrategy[str]:
    longest = _bound(meta, at.MaxLen, "max_length") or 64
    return weighted(
        (6, st.from_regex(r"[a-zA-Z0-9._-]{1,12}", fullmatch=True)),
        (3, st.text(max_size=24)),  # any code point but lone surrogates
        (2, st.sampled_from(ODD_TEXT)),
        # Lone surrogates: json.dumps escapes them, and no UTF-8 holds them.
        (1, st.sampled_from(["\ud800", "x\udfff"])),
        (1, st.sampled_from([longest, longest + 1]).map(lambda n: "x" * n)),
    )


def byte_strings(meta: list[Any]) -> st.SearchStrategy[str]:
    return weighted(
        (6, st.binary(max_size=64).map(lambda b: base64.b64encode(b).decode())),
        (1, st.sampled_from(["!!!", "=", "QQ", "not base64 at all"])),
    )


def _times(item: Any, huge: int) -> int:
    return huge if len(json.dumps(item)) <= HUGE_ITEM_BYTES else 2


def values(tp: Any, meta: list[Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """JSON values for a field of type ``tp`` with constraints ``meta``."""
    tp, meta, nullable = _unwrapped(tp, meta)
    return weighted((40, _typed(tp, meta, depth)), (1, junk()), (2 if nullable else 0, st.none()))


def _typed(tp: Any, meta: list[Any], depth: int) -> st.SearchStrategy[Any]:
    origin = get_origin(tp)
    if tp is bool:
        return st.booleans()
    if origin is Literal:
        return st.one_of(st.sampled_from(get_args(tp)), st.text(max_size=8))
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return st.sampled_from([e.value for e in tp])
    if tp is int:
        return ints(meta)
    if tp is str:
        return texts(meta)
    if tp is bytes:
        return byte_strings(meta)
    longest = _bound(meta, at.MaxLen, "max_length")
    shortest = _bound(meta, at.MinLen, "min_length") or 0
    huge = min(longest + 1, HUGE_AT_MOST) if longest is not None else HUGE_AT_MOST
    if origin is list:
        item = values(get_args(tp)[0], [], depth + 1)
        return weighted(
            (8, st.lists(item, min_size=shortest, max_size=3 if depth < 2 else 1)),
            (1, st.just([])),
            (1, item.map(lambda i: [i] * _times(i, huge))),
        )
    if origin is dict:
        key_type, value_type = get_args(tp)
        keys = values(key_type, [], depth + 1).map(
            lambda k: k if isinstance(k, str) else json.dumps(k)
        )
        entries = st.dictionaries(keys, values(value_type, [], depth + 1), max_size=3)
        many = st.tuples(keys, values(value_type, [], depth + 1)).map(
            lambda kv: {f"{kv[0]}{i}": kv[1] for i in range(_times(kv, huge))}
        )
        return weighted((8, entries), (1, many))
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return bodies(tp, depth + 1)
    raise AssertionError(f"no strategy for {tp!r}")


def bodies(model: type[BaseModel], depth: int = 0) -> st.SearchStrategy[dict[str, Any]]:
    """JSON objects for ``model``: its fields drawn by :func:`values`, a required one
    sometimes left out, and sometimes a field it does not have."""
    fields = {
        name: values(f.annotation, list(f.metadata), depth)
        for name, f in model.model_fields.items()
    }
    required = {n for n, f in model.model_fields.items() if f.is_required()}

    @st.composite
    def draw_body(draw: st.DrawFn) -> dict[str, Any]:
        body: dict[str, Any] = {}
        for name, strategy in fields.items():
            keep = draw(st.integers(0, 59))
            if name in required and keep == 30:
                continue  # missing: a malformed body
            if name not in required and keep < 15:
                continue  # the default
            body[name] = draw(strategy)
        if depth == 0 and draw(st.integers(0, 59)) == 30:
            body["not_a_field"] = 1
        return body

    return draw_body()


# -- frames ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One frame to send on a connection of its own."""

    kind: str
    data: bytes
    header: RequestHeader | None = None
    body: bytes = b""
    complete: bool = True
    """False: the frame is cut short and the connection then closed by the client."""
    shard: int = 0
    """The group shard whose canary runs after this case."""
    controller: bool = False
    notes: dict[str, Any] = field(default_factory=dict, compare=False)

    def __repr__(self) -> str:  # what hypothesis prints of a failing case
        head = self.header
        api = None if head is None else APIS_BY_KEY.get(head.api_key)
        name = head and (api.name if api else f"key {head.api_key}")
        shown = self.data if len(self.data) <= 600 else self.data[:600] + b"..."
        return f"Case({self.kind}, {name}, shard={self.shard}, {len(self.data)} bytes: {shown!r})"


def _owner(body: dict[str, Any], partitions: int) -> int:
    for key in ("group_id", "groups", "group_ids"):
        value = body.get(key)
        if isinstance(value, list) and value:
            value = value[0]
        if isinstance(value, str):
            return partition_for(value, partitions)
    return 0


def _tame(api: str, body: dict[str, Any], daemon: int) -> dict[str, Any]:
    """Keep a valid admin call from taking the fuzz's own daemon out of service: it is
    the only node, and an unauthenticated cluster lets any client fence it or register
    a coordinator that shards would move to (admin_principals guards that in
    production). Neither is what the fuzz is after."""
    if body.get("node_id") == daemon:
        body["node_id"] = daemon + 1
    if api == "RegisterNode" and isinstance(body.get("roles"), list):
        body["roles"] = [r for r in body["roles"] if r != "coordinator"]
    return body


def api_cases(partitions: int, daemon: int) -> st.SearchStrategy[Case]:
    """A known API at version 0 around a drawn body, sent to the shard of its group
    (or, a quarter of the time, to any shard)."""

    @st.composite
    def draw_case(draw: st.DrawFn) -> Case:
        api = draw(st.sampled_from(sorted(ALL_APIS)))
        body = _tame(api, draw(bodies(ALL_APIS[api].request)), daemon)
        data = json.dumps(body).encode()  # lone surrogates stay escaped: not UTF-8
        controller = api in CONTROLLER_APIS
        owner = _owner(body, partitions)
        if controller:
            shard = draw(st.sampled_from([-1, -1, 0, 2**31 - 1]))
        elif draw(st.integers(0, 3)) == 0:
            shard = draw(st.one_of(st.integers(-1, partitions), st.sampled_from(EXTREME_INTS)
                                   .filter(lambda s: -(2**31) <= s < 2**31)))  # fmt: skip
        else:
            shard = owner
        header = RequestHeader(ALL_APIS[api].key, 0, 7, shard, "fuzz")
        canary = shard if 0 <= shard < partitions else owner
        return Case("api", encode_request(header, data), header, data, shard=canary,
                    controller=controller)  # fmt: skip

    return draw_case()


BINARY_APIS = sorted(name for name, spec in ALL_APIS.items() if spec.max_version >= 1)


def binary_cases(partitions: int) -> st.SearchStrategy[Case]:
    """A binary body (version 1) of an API that has one: a drawn request that its model
    takes, encoded, then (three times in four) with a byte changed, cut short or with
    bytes after it. A request no binary body can hold is random bytes instead."""

    @st.composite
    def draw_case(draw: st.DrawFn) -> Case:
        api = draw(st.sampled_from(BINARY_APIS))
        spec = ALL_APIS[api]
        drawn = draw(bodies(spec.request))
        try:
            data = encode_request_body(1, spec.request.model_validate(drawn))
        except (ValidationError, ValueError):
            data = draw(st.binary(max_size=200))
        how = draw(st.sampled_from(["whole", "flipped", "cut", "longer"]))
        if how == "flipped" and data:
            at_ = draw(st.integers(0, len(data) - 1))
            data = data[:at_] + bytes([draw(st.integers(0, 255))]) + data[at_ + 1 :]
        elif how == "cut" and data:
            data = data[: draw(st.integers(0, len(data) - 1))]
        elif how == "longer":
            data += draw(st.binary(min_size=1, max_size=8))
        shard = _owner(drawn, partitions) if isinstance(drawn, dict) else 0
        header = RequestHeader(spec.key, 1, 8, shard, "fuzz")
        return Case(f"binary {how}", encode_request(header, data), header, data, shard=shard)

    return draw_case()


def frame_cases(partitions: int) -> st.SearchStrategy[Case]:
    """Frames around bodies that are not the API's: unknown keys and versions, random
    bytes, frames cut short, a frame over max_frame_bytes."""

    @st.composite
    def draw_case(draw: st.DrawFn) -> Case:
        kind = draw(st.sampled_from(["unknown api", "version", "bytes", "cut", "oversize"]))
        api = draw(st.sampled_from(sorted(ALL_APIS)))
        key = ALL_APIS[api].key
        version = 0
        body = draw(st.one_of(st.binary(max_size=200), st.just(b"{}")))
        if kind == "unknown api":
            key = draw(st.integers(-(2**15), 2**15 - 1).filter(lambda k: k not in APIS_BY_KEY))
        elif kind == "version":
            version = draw(st.integers(-(2**15), 2**15 - 1).filter(lambda v: v != 0))
        shard = draw(st.integers(0, partitions - 1))
        header = RequestHeader(key, version, 9, shard, draw(st.text(max_size=30)))
        data = encode_request(header, body)
        if kind == "cut":
            cut = draw(st.integers(0, len(data) - 1))
            return Case(kind, data[:cut], header, body, complete=False, shard=shard)
        if kind == "oversize":
            size = draw(st.integers(DEFAULT_MAX_FRAME_BYTES + 1, 2**31 - 1))
            return Case(kind, SIZE.pack(size) + data[SIZE.size :], header, body, shard=shard)
        return Case(kind, data, header, body, shard=shard)

    return draw_case()


def cases(partitions: int, daemon: int) -> st.SearchStrategy[Case]:
    return st.one_of(api_cases(partitions, daemon), api_cases(partitions, daemon),
                     api_cases(partitions, daemon), binary_cases(partitions),
                     frame_cases(partitions))  # fmt: skip


# -- the oracle --------------------------------------------------------------------------------


@dataclass
class Expected:
    """What the daemon's edge does with a frame: refuse it (with ``code``, closing the
    connection or not), or hand it to a shard (``code`` None: any answer, or none yet)."""

    code: ErrorCode | None
    closes: bool
    message: str = ""


@dataclass
class _Conn:
    principal: str | None = None
    peer: str = "oracle"
    attachment: Any = None
    closed: bool = False
    answers: list[tuple[ErrorCode, str]] = field(default_factory=list)

    def reject(self, header: RequestHeader, code: int, message: str, *, close: bool) -> None:
        self.answers.append((ErrorCode(code), message))
        self.closed = self.closed or close


def expected(case: Case, partitions: int) -> Expected | None:
    """None: the frame cannot be read (cut short), so there is nothing to answer."""
    if not case.complete:
        return None
    assert case.header is not None
    (size,) = SIZE.unpack_from(case.data)
    if size > DEFAULT_MAX_FRAME_BYTES:  # told by its size, not by the bytes sent
        return Expected(ErrorCode.INVALID_REQUEST, closes=True, message="exceeds max_frame_bytes")
    conn = _Conn()
    dispatcher = RequestDispatcher(lambda r: None, lambda rs: None, offsets_partitions=partitions)
    dispatcher([(case.header, case.body)], conn)  # type: ignore[arg-type]
    if not conn.answers:
        return Expected(None, closes=False)
    [(code, message)] = conn.answers
    return Expected(code, conn.closed, message)
