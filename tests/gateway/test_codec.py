"""The gateway's JSON encoder (sluice_gateway/codec.py) gives exactly json_format.MessageToDict's
answer, for every request and response type of every RPC the gateway serves, filled with values
of every kind: negative and large int64, unknown enum numbers, NaN and infinities, float32 that
need their shortest form, bytes, maps with int and bool keys, well-known types, nested messages,
oneofs, and fields left at their defaults."""

from __future__ import annotations

import math
import random

import pytest
from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor as FD
from sluice_gateway.codec import loads, to_json
from sluice_gateway.methods import all_methods

FLOATS = [0.1, -2.5, 1e-7, 3.4e38, math.inf, -math.inf, math.nan, 0.0, 1 / 3]
INTS = [0, 1, -1, 2**31 - 1, -(2**31)]
INT64S = [0, 1, -1, 2**53 + 1, -(2**63), 2**63 - 1]
UINT64S = [0, 1, 2**64 - 1]


def scalar(field, rng: random.Random):
    kind = field.type
    if kind in (FD.TYPE_DOUBLE, FD.TYPE_FLOAT):
        return rng.choice(FLOATS)
    if kind in (FD.TYPE_INT64, FD.TYPE_SINT64, FD.TYPE_SFIXED64):
        return rng.choice(INT64S)
    if kind in (FD.TYPE_UINT64, FD.TYPE_FIXED64):
        return rng.choice(UINT64S)
    if kind in (FD.TYPE_INT32, FD.TYPE_SINT32, FD.TYPE_SFIXED32):
        return rng.choice(INTS)
    if kind in (FD.TYPE_UINT32, FD.TYPE_FIXED32):
        return rng.choice([0, 1, 2**32 - 1])
    if kind == FD.TYPE_BOOL:
        return rng.choice([True, False])
    if kind == FD.TYPE_STRING:
        return rng.choice(["", "plain", "ünïcødé ✓", 'quotes " and \\ and \n'])
    if kind == FD.TYPE_BYTES:
        return rng.choice([b"", b"\x00\xff bytes", bytes(range(40))])
    if kind == FD.TYPE_ENUM:
        numbers = [v.number for v in field.enum_type.values] + [999]  # 999: unknown to an open enum
        return rng.choice(numbers)
    raise AssertionError(kind)


def fill(msg, rng: random.Random, depth: int = 0) -> None:
    if msg.DESCRIPTOR.full_name == "google.protobuf.Timestamp":
        msg.seconds, msg.nanos = rng.choice([0, 1_700_000_000]), rng.choice([0, 5_000_000])
        return
    if msg.DESCRIPTOR.full_name.startswith("google.protobuf."):
        if msg.DESCRIPTOR.full_name == "google.protobuf.Struct":
            msg.update({"a": 1, "b": [True, "x", None]})
        return
    for field in msg.DESCRIPTOR.fields:
        if rng.random() < 0.2:
            continue  # some fields stay at their default
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            fill_map(getattr(msg, field.name), field, rng, depth)
        elif field.message_type is not None:
            if depth >= 3:
                continue
            if field.is_repeated:
                for _ in range(rng.randint(0, 3)):
                    fill(getattr(msg, field.name).add(), rng, depth + 1)
            else:
                fill(getattr(msg, field.name), rng, depth + 1)
                if not getattr(msg, field.name).ListFields() and rng.random() < 0.5:
                    getattr(msg, field.name).SetInParent()  # an empty message that is set
        elif field.is_repeated:
            getattr(msg, field.name).extend(scalar(field, rng) for _ in range(rng.randint(0, 4)))
        else:
            setattr(msg, field.name, scalar(field, rng))


def fill_map(target, field, rng: random.Random, depth: int) -> None:
    key, value = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
    for _ in range(rng.randint(0, 3)):
        k = scalar(key, rng)
        if value.message_type is None:
            target[k] = scalar(value, rng)
        elif depth < 3:
            fill(target[k], rng, depth + 1)


def same(a, b) -> bool:
    """Equal, NaN being equal to NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


MESSAGES = sorted({cls.DESCRIPTOR.full_name: cls for m in all_methods() for cls in (m.request_class, m.response_class)}.items())


@pytest.mark.parametrize(("name", "cls"), MESSAGES, ids=[name for name, _ in MESSAGES])
def test_to_json_is_message_to_dict(name, cls):
    rng = random.Random(name)
    for _ in range(60):
        msg = cls()
        fill(msg, rng)
        expected = json_format.MessageToDict(msg)
        assert same(to_json(msg), expected), (msg, to_json(msg), expected)


def test_loads_reads_what_json_reads():
    assert loads(b'{"queryVector": [0.5, 1, -2e-3], "topK": 5, "q": "\\u00fc"}') == {
        "queryVector": [0.5, 1, -2e-3],
        "topK": 5,
        "q": "ü",
    }
    with pytest.raises(ValueError):
        loads(b"{not json")
