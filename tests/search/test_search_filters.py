"""Typed metadata filters over gRPC against a real PostgreSQL: every operator on every type,
all_of / any_of, time ranges, the old filter fields beside them, every mode, the refusals, and
random filter trees checked against a reference evaluator written in Python."""

from __future__ import annotations

import datetime as dt
import random

import auth_keys
import grpc
import numpy as np
import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from sluice.v1 import document_pb2, search_service_pb2_grpc
from sluice.v1 import search_service_pb2 as pb
from sluice_common import metadata as md
from sluice_common.embedders import get_embedder
from sluice_common.errors import error_info
from sluice_search.main import create_server

DIM = 64
VECTOR, KEYWORD, HYBRID = pb.SEARCH_MODE_VECTOR, pb.SEARCH_MODE_KEYWORD, pb.SEARCH_MODE_HYBRID
OP = {
    name: getattr(pb, f"FILTER_OPERATOR_{name}")
    for name in ("EQ", "NE", "IN", "NOT_IN", "GT", "GTE", "LT", "LTE", "EXISTS", "NOT_EXISTS")
}


def embed(texts):
    embedder = get_embedder("hashing", "hashing-v1", DIM)
    return [embedder.embed_one(t) for t in texts]


def ts(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC)


def stamp(moment: dt.datetime) -> Timestamp:
    value = Timestamp()
    value.FromDatetime(moment)
    return value


def stored(value):
    """A Python value as uploads store it (sluice_common.metadata)."""
    if isinstance(value, dt.datetime):
        return {md.TIMESTAMP_TAG: md.timestamp_text(value)}
    if isinstance(value, float):
        return md.number(value)
    return value


def mv(value) -> document_pb2.MetadataValue:
    if isinstance(value, bool):
        return document_pb2.MetadataValue(bool_value=value)
    if isinstance(value, int | float):
        return document_pb2.MetadataValue(number_value=float(value))
    if isinstance(value, dt.datetime):
        return document_pb2.MetadataValue(timestamp_value=stamp(value))
    if isinstance(value, list):
        return document_pb2.MetadataValue(string_list_value=document_pb2.StringList(values=value))
    return document_pb2.MetadataValue(string_value=value)


def cond(key, op, value=None, values=None) -> pb.MetadataFilter:
    condition = pb.MetadataCondition(key=key, op=OP[op] if isinstance(op, str) else op)
    if value is not None:
        condition.value.CopyFrom(mv(value))
    for v in values or ():
        condition.values.append(mv(v))
    return pb.MetadataFilter(condition=condition)


def all_of(*filters):
    return pb.MetadataFilter(all_of=pb.MetadataFilterList(filters=list(filters)))


def any_of(*filters):
    return pb.MetadataFilter(any_of=pb.MetadataFilterList(filters=list(filters)))


DOCUMENTS = {
    "a.txt": {
        "year": 2021,
        "lang": "en",
        "draft": False,
        "tags": ["db", "search"],
        "score": 0.5,
        "published": ts("2021-03-01T09:00:00"),
    },
    "b.txt": {
        "year": 2023,
        "lang": "de",
        "draft": True,
        "tags": ["search"],
        "score": 1.25,
        "published": ts("2023-07-15T12:30:00.250000"),
    },
    "c.txt": {"year": 2024, "lang": "en", "tags": ["geo"], "published": ts("2024-01-01T00:00:00")},
    "d.txt": {"year": "2024", "lang": "zh", "draft": False},  # year as a string: another type
    "e.txt": {},
}


@pytest.fixture
def typed(seed):
    cid = seed.collection("typed", DIM)
    ids = {}
    for i, (filename, meta) in enumerate(DOCUMENTS.items()):
        doc = seed.document(cid, filename, metadata={k: stored(v) for k, v in meta.items()})
        text = f"river report {filename} number {i}"
        seed.chunks(cid, doc, [text], embed([text]))
        ids[filename] = doc
    # Upload times one day apart, last changes one hour after the upload.
    for i, doc in enumerate(ids.values()):
        seed.conn.execute(
            "UPDATE documents SET created_at = %s, updated_at = %s WHERE id = %s",
            (ts("2025-01-01T00:00:00") + dt.timedelta(days=i), ts("2025-01-01T01:00:00") + dt.timedelta(days=i), doc),
        )
    return ids


async def names(stub, where=None, mode=VECTOR, **filter_fields):
    search_filter = pb.SearchFilter(**filter_fields)
    if where is not None:
        search_filter.where.CopyFrom(where)
    response = await stub.Search(
        pb.SearchRequest(collection="typed", query="river report", mode=mode, top_k=100, filter=search_filter)
    )
    return {hit.filename for hit in response.hits}


EVERYTHING = set(DOCUMENTS)


@pytest.mark.parametrize(
    "where, expected",
    [
        (cond("lang", "EQ", "en"), {"a.txt", "c.txt"}),
        (cond("year", "EQ", 2024), {"c.txt"}),  # not d.txt: its "2024" is a string
        (cond("year", "EQ", "2024"), {"d.txt"}),
        (cond("score", "EQ", 1.25), {"b.txt"}),
        (cond("year", "EQ", 2021.0), {"a.txt"}),
        (cond("draft", "EQ", False), {"a.txt", "d.txt"}),
        (cond("tags", "EQ", "search"), {"a.txt", "b.txt"}),  # a list holds it
        (cond("published", "EQ", ts("2023-07-15T12:30:00.250000")), {"b.txt"}),
        (cond("lang", "NE", "en"), {"b.txt", "d.txt", "e.txt"}),  # e.txt has no lang
        (cond("year", "NE", 2024), EVERYTHING - {"c.txt"}),
        (cond("tags", "NE", "search"), {"c.txt", "d.txt", "e.txt"}),
        (cond("lang", "IN", values=["de", "zh"]), {"b.txt", "d.txt"}),
        (cond("tags", "IN", values=["geo", "db"]), {"a.txt", "c.txt"}),
        (cond("year", "IN", values=[2021, 2023]), {"a.txt", "b.txt"}),
        (cond("lang", "NOT_IN", values=["de", "zh"]), {"a.txt", "c.txt", "e.txt"}),
        (cond("year", "GT", 2021), {"b.txt", "c.txt"}),
        (cond("year", "GTE", 2021), {"a.txt", "b.txt", "c.txt"}),
        (cond("year", "LT", 2024), {"a.txt", "b.txt"}),
        (cond("year", "LTE", 2024), {"a.txt", "b.txt", "c.txt"}),
        (cond("score", "GT", 0.75), {"b.txt"}),
        (cond("year", "GTE", "2024"), {"d.txt"}),  # strings compare with strings only
        (cond("lang", "LT", "en"), {"b.txt"}),  # "de" < "en" < "zh", code point order
        (cond("published", "GTE", ts("2023-07-15T12:30:00.250000")), {"b.txt", "c.txt"}),
        (cond("published", "GT", ts("2023-07-15T12:30:00.250000")), {"c.txt"}),
        (cond("published", "LT", ts("2022-01-01T00:00:00")), {"a.txt"}),
        (cond("draft", "EXISTS"), {"a.txt", "b.txt", "d.txt"}),
        (cond("draft", "NOT_EXISTS"), {"c.txt", "e.txt"}),
        (all_of(cond("lang", "EQ", "en"), cond("year", "GT", 2022)), {"c.txt"}),
        (any_of(cond("lang", "EQ", "de"), cond("tags", "EQ", "geo")), {"b.txt", "c.txt"}),
        (
            all_of(
                any_of(cond("lang", "EQ", "en"), cond("lang", "EQ", "zh")),
                any_of(cond("draft", "EQ", False), cond("draft", "NOT_EXISTS")),
            ),
            {"a.txt", "c.txt", "d.txt"},
        ),
        (cond("nothing", "EQ", "x"), set()),
    ],
)
async def test_operators(search_stub, typed, where, expected):
    assert await names(search_stub, where) == expected


async def test_every_mode_applies_the_filter(search_stub, typed):
    where = cond("year", "GTE", 2023)
    for mode in (VECTOR, KEYWORD, HYBRID):
        assert await names(search_stub, where, mode=mode) == {"b.txt", "c.txt"}, mode


async def test_time_ranges_and_the_old_fields_combine(search_stub, typed):
    def day(n, hour=0):
        return stamp(ts("2025-01-01T00:00:00") + dt.timedelta(days=n, hours=hour))

    assert await names(search_stub, create_time=pb.TimeRange(start_time=day(1), end_time=day(3))) == {"b.txt", "c.txt"}
    assert await names(search_stub, create_time=pb.TimeRange(start_time=day(3))) == {"d.txt", "e.txt"}
    assert await names(search_stub, create_time=pb.TimeRange(end_time=day(1))) == {"a.txt"}
    assert await names(search_stub, update_time=pb.TimeRange(start_time=day(1, 1), end_time=day(2, 1))) == {"b.txt"}
    # Every field must match: the string map, file names, where and a range together.
    assert await names(search_stub, cond("year", "LT", 2024), metadata={"lang": "en"}) == {"a.txt"}
    assert await names(search_stub, cond("lang", "EXISTS"), filenames=["b.txt", "e.txt"]) == {"b.txt"}
    assert await names(
        search_stub, cond("lang", "EXISTS"), document_ids=[typed["c.txt"]], create_time=pb.TimeRange(start_time=day(2))
    ) == {"c.txt"}
    # The old map matches a list holding the value, as EQ does.
    assert await names(search_stub, metadata={"tags": "geo"}) == {"c.txt"}


async def test_hits_carry_typed_and_text_metadata(search_stub, typed):
    response = await search_stub.Search(
        pb.SearchRequest(collection="typed", query="river", mode=VECTOR, top_k=10, filter=pb.SearchFilter(filenames=["b.txt"]))
    )
    (hit,) = response.hits
    assert dict(hit.metadata) == {
        "year": "2023",
        "lang": "de",
        "draft": "true",
        "tags": '["search"]',
        "score": "1.25",
        "published": "2023-07-15T12:30:00.25Z",
    }
    typed_values = hit.typed_metadata
    assert typed_values["year"].number_value == 2023 and typed_values["draft"].bool_value is True
    assert list(typed_values["tags"].string_list_value.values) == ["search"]
    assert typed_values["published"].timestamp_value.ToDatetime(dt.UTC) == ts("2023-07-15T12:30:00.250000")
    assert typed_values["lang"].string_value == "de"


def _deep(levels):
    node = cond("lang", "EQ", "en")
    for _ in range(levels - 1):
        node = all_of(node)
    return node


@pytest.mark.parametrize(
    "where, words",
    [
        (cond("lang", 99, "en"), "unknown operator 99"),
        (cond("lang", pb.FILTER_OPERATOR_UNSPECIFIED, "en"), "op is required"),
        (cond("draft", "GT", True), "type mismatch: GT needs a number, timestamp or string value, not a boolean"),
        (cond("year", "IN", values=[2021, "2021"]), "type mismatch: the values of IN must have one type"),
        (cond("tags", "EQ", ["a"]), "type mismatch: a string list cannot be compared"),
        (cond("year", "EQ"), "EQ needs a value"),
        (cond("year", "IN", 2021), "IN takes `values`"),
        (cond("year", "EQ", values=[1, 2]), "EQ takes `value`, not `values`"),
        (cond("year", "EXISTS", 2021), "EXISTS takes no value"),
        (cond("year", "IN", values=list(range(101))), "IN has 101 values; at most 100"),
        (cond("year", "GT", float("nan")), "finite"),
        (cond("", "EQ", "x"), "metadata keys must be 1 to 64 characters"),
        (cond("x" * 65, "EQ", "x"), "metadata keys must be 1 to 64 characters"),
        (_deep(5), "nested more than 4 levels deep"),
        (all_of(*[cond(f"k{i}", "EXISTS") for i in range(33)]), "more than 32 conditions"),
        (all_of(), "filter.where.all_of: needs at least one filter"),
        (all_of(cond("a", "EXISTS"), pb.MetadataFilter()), "filter.where.all_of[1]: an empty filter"),
        (any_of(cond("a", "EXISTS"), all_of(cond("b", "GT", True))), "filter.where.any_of[1].all_of[0].condition: type mismatch"),
    ],
)
async def test_bad_filters_are_refused_with_a_reason(search_stub, typed, where, words):
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await names(search_stub, where)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_info(err.value).reason == "INVALID_FILTER"
    assert words in err.value.details(), err.value.details()


async def test_bad_time_range_is_refused(search_stub, typed):
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await names(
            search_stub,
            create_time=pb.TimeRange(start_time=stamp(ts("2025-01-02T00:00:00")), end_time=stamp(ts("2025-01-01T00:00:00"))),
        )
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "filter.create_time" in err.value.details()


async def test_depth_four_and_32_conditions_are_allowed(search_stub, typed):
    assert await names(search_stub, _deep(4)) == {"a.txt", "c.txt"}
    assert await names(search_stub, all_of(*[cond("lang", "EXISTS") for _ in range(32)])) == EVERYTHING - {"e.txt"}


HOSTILE = ["'; DROP TABLE chunks; --", "x') OR 1=1 --", "%(f_1)s", "$1", '" OR ""="', "{}", "$timestamp"]


@pytest.mark.parametrize("hostile", HOSTILE)
async def test_injection_through_where_is_harmless(search_stub, typed, database_url, hostile):
    for where in (
        cond(hostile, "EQ", "en"),
        cond("lang", "EQ", hostile),
        cond(hostile, "EXISTS"),
        cond("lang", "GT", hostile),
        cond(hostile, "IN", values=[hostile, "x"]),
    ):
        assert await names(search_stub, where) <= EVERYTHING
    assert await names(search_stub, cond("lang", "EQ", hostile)) == set()
    assert await names(search_stub, cond("lang", "NE", hostile)) == EVERYTHING


# ------------------------------------------------------------------ random trees vs a reference


def reference(meta: dict, node: pb.MetadataFilter) -> bool:
    """What a filter means, in Python (docs/search.md, "Filters")."""
    kind = node.WhichOneof("node")
    if kind == "all_of":
        return all(reference(meta, child) for child in node.all_of.filters)
    if kind == "any_of":
        return any(reference(meta, child) for child in node.any_of.filters)
    c = node.condition
    op = pb.FilterOperator.Name(c.op).removeprefix("FILTER_OPERATOR_")
    if op == "EXISTS":
        return c.key in meta
    if op == "NOT_EXISTS":
        return c.key not in meta
    values = [c.value] if c.HasField("value") else list(c.values)
    wanted = [python_value(v) for v in values]
    have = meta.get(c.key, _MISSING)

    def equal(w):
        if isinstance(have, list):
            return isinstance(w, str) and w in have
        return same_type(have, w) and have == w

    if op in ("EQ", "IN"):
        return any(equal(w) for w in wanted)
    if op in ("NE", "NOT_IN"):
        return not any(equal(w) for w in wanted)
    (w,) = wanted
    if not same_type(have, w) or isinstance(have, list):
        return False
    return {"GT": have > w, "GTE": have >= w, "LT": have < w, "LTE": have <= w}[op]


_MISSING = object()


def same_type(a, b):
    kind = lambda v: "bool" if isinstance(v, bool) else "number" if isinstance(v, int | float) else type(v).__name__  # noqa: E731
    return kind(a) == kind(b)


def python_value(value: document_pb2.MetadataValue):
    kind = value.WhichOneof("kind")
    if kind == "timestamp_value":
        return value.timestamp_value.ToDatetime(dt.UTC)
    if kind == "number_value":
        return value.number_value
    return getattr(value, kind)


def random_value(rng: random.Random, kind: str):
    if kind == "number":
        return rng.choice([1, 2, 3, 2.5, -1])
    if kind == "string":
        return rng.choice(["a", "b", "B", "é", "ab"])
    if kind == "bool":
        return rng.choice([True, False])
    return ts("2024-01-01T00:00:00") + dt.timedelta(hours=rng.choice([0, 1, 2, 36]))


def random_meta(rng: random.Random) -> dict:
    meta = {}
    for key in ("n", "s", "b", "t", "l", "x"):
        if rng.random() < 0.25:
            continue
        kind = {"n": "number", "s": "string", "b": "bool", "t": "timestamp"}.get(key) or rng.choice(["number", "string"])
        if key == "l":
            meta[key] = rng.sample(["a", "b", "c"], rng.randint(0, 2))
        else:
            meta[key] = random_value(rng, kind)
    return meta


def random_filter(rng: random.Random, depth: int = 1) -> pb.MetadataFilter:
    if depth < 3 and rng.random() < 0.35:
        children = [random_filter(rng, depth + 1) for _ in range(rng.randint(1, 3))]
        return all_of(*children) if rng.random() < 0.5 else any_of(*children)
    key = rng.choice(["n", "s", "b", "t", "l", "x"])
    op = rng.choice(list(OP))
    if op in ("EXISTS", "NOT_EXISTS"):
        return cond(key, op)
    kinds = ["number", "string", "timestamp"] if op in ("GT", "GTE", "LT", "LTE") else ["number", "string", "bool", "timestamp"]
    kind = rng.choice(kinds)
    if op in ("IN", "NOT_IN"):
        return cond(key, op, values=[random_value(rng, kind) for _ in range(rng.randint(1, 3))])
    return cond(key, op, random_value(rng, kind))


@pytest.fixture
async def stub_with(search_settings):
    """Search servers with other settings (for the two plans of a filtered VECTOR search)."""
    servers, channels = [], []

    async def start(**overrides):
        server = await create_server(search_settings.model_copy(update=overrides))
        await server.start()
        servers.append(server)
        channels.append(auth_keys.aio_channel(f"127.0.0.1:{server.port}"))
        return search_service_pb2_grpc.SearchServiceStub(channels[-1])

    yield start
    for channel in channels:
        await channel.close()
    for server in servers:
        await server.stop(0)


@pytest.mark.parametrize("exact_filter_max_chunks", [0, 2000], ids=["graph", "exact-when-selective"])
async def test_random_filters_match_the_reference(stub_with, seed, exact_filter_max_chunks):
    """Both plans of a filtered VECTOR search (the HNSW walk, and the exact scan of a selective
    filter's documents) and KEYWORD agree with the reference on random trees."""
    stub = await stub_with(search_exact_filter_max_chunks=exact_filter_max_chunks)
    rng = random.Random(18)
    cid = seed.collection("typed", DIM)
    metas = {}
    for i in range(40):
        meta = random_meta(rng)
        name = f"doc-{i}.txt"
        doc = seed.document(cid, name, metadata={k: stored(v) for k, v in meta.items()})
        seed.chunks(
            cid, doc, [f"river report {i}", f"second river part {i}"], embed([f"river report {i}", f"second river part {i}"])
        )
        metas[name] = meta
    checked = 0
    for n in range(60):
        where = random_filter(rng)
        expected = {name for name, meta in metas.items() if reference(meta, where)}
        mode = KEYWORD if n % 4 == 3 else VECTOR
        assert await names(stub, where, mode=mode) == expected, where
        checked += bool(expected) and expected != set(metas)
    assert checked > 20  # most trees select something, but not everything


async def test_selective_and_broad_filters_return_the_exact_top_k(stub_with, seed):
    """Around the threshold: a filter whose documents hold at most exact_filter_max_chunks chunks
    is answered exactly from them; a broader one walks the graph; both give the true top_k."""
    stub = await stub_with(search_exact_filter_max_chunks=30, search_exact_filter_walk_cost=0.0)  # the floor alone
    cid = seed.collection("typed", DIM)
    texts = {}
    for d in range(20):
        doc = seed.document(cid, f"doc-{d}.txt", metadata={"group": "few" if d < 3 else "many", "d": d})
        chunk_texts = [f"river {d} part {i} report {(d * 7 + i) % 13}" for i in range(10)]
        seed.chunks(cid, doc, chunk_texts, embed(chunk_texts))
        texts[doc] = chunk_texts
    query = "river report 5"
    q = np.asarray(embed([query])[0])

    def truth(doc_numbers, k):
        scored = [
            (float(q @ np.asarray(v)), t)
            for d, chunk_texts in enumerate(texts.values())
            if d in doc_numbers
            for t, v in zip(chunk_texts, embed(chunk_texts))
        ]
        return sorted(scored, key=lambda x: -x[0])[:k]

    for where, docs, exact in (
        (cond("group", "EQ", "few"), range(3), True),  # 30 chunks: exact
        (cond("d", "LT", 4), range(4), False),  # 40 chunks: the graph
        (cond("group", "EQ", "many"), range(3, 20), False),
    ):
        response = await stub.Search(
            pb.SearchRequest(collection="typed", query=query, mode=VECTOR, top_k=12, filter=pb.SearchFilter(where=where))
        )
        expected = truth(set(docs), 12)
        assert len(response.hits) == 12
        assert {h.filename for h in response.hits} <= {f"doc-{d}.txt" for d in docs}
        if exact:
            assert [round(h.score, 5) for h in response.hits] == [round(score, 5) for score, _ in expected]
        else:  # an approximate walk: nearly all as close as the true 12th (scores tie often here)
            assert sum(h.score >= expected[-1][0] - 1e-6 for h in response.hits) >= 10


def plans_taken() -> dict[str, float]:
    from prometheus_client import REGISTRY

    return {
        plan: REGISTRY.get_sample_value("sluice_search_filter_plans_total", {"plan": plan}) or 0.0 for plan in ("exact", "graph")
    }


async def test_the_exact_plan_grows_with_the_generation(stub_with, seed):
    """Past the floor, a filter is scored exactly while its chunks number at most
    sqrt(walk_cost x ef_search x the generation's chunks): here sqrt(1 x 40 x 200) = 89, so a filter
    of 40 chunks is exact and one of 120 walks the graph; with walk_cost 0 the floor (5) alone
    decides and the 40 chunks walk too. The plan is read from sluice_search_filter_plans_total."""
    scaled = await stub_with(search_exact_filter_max_chunks=5, search_exact_filter_walk_cost=1.0, search_hnsw_ef_search=40)
    floor_only = await stub_with(search_exact_filter_max_chunks=5, search_exact_filter_walk_cost=0.0, search_hnsw_ef_search=40)
    cid = seed.collection("typed", DIM)
    for d in range(20):
        doc = seed.document(cid, f"doc-{d}.txt", metadata={"d": d})
        chunk_texts = [f"river {d} part {i} report {(d * 7 + i) % 13}" for i in range(10)]
        seed.chunks(cid, doc, chunk_texts, embed(chunk_texts))

    async def plan(stub, bound):
        before = plans_taken()
        response = await stub.Search(
            pb.SearchRequest(
                collection="typed",
                query="river report 5",
                mode=VECTOR,
                top_k=5,
                filter=pb.SearchFilter(where=cond("d", "LT", bound)),
            )
        )
        assert len(response.hits) == 5
        assert {h.filename for h in response.hits} <= {f"doc-{d}.txt" for d in range(bound)}
        after = plans_taken()
        (taken,) = [p for p in after if after[p] > before[p]]
        return taken

    assert await plan(scaled, 4) == "exact"  # 40 chunks <= 89
    assert await plan(scaled, 12) == "graph"  # 120 chunks > 89
    assert await plan(floor_only, 4) == "graph"  # 40 chunks > 5
    assert await plan(floor_only, 1) == "graph"  # 10 chunks > 5
