"""The list reads that check their parent first (ListSourceRuns, ListWebhookDeliveries,
ListDocuments and ListWebhooks of one collection) answer from one snapshot, as GetCollection and
GetDocument do (docs/contributing.md, Code: "A read answered from several statements sees one
snapshot"). Each looked its parent up in one READ COMMITTED statement and listed its children in
the next, so a commit removing the parent between the two answered OK with what no moment held:
a source or a webhook that had a run or a delivery all its life listed none, a collection's
documents came back under another collection's name, its webhooks as an empty list.

A thread makes the parent (with its children) come and go, each change one commit, as fast as
PostgreSQL commits, while READS calls read: every answer must be NOT_FOUND or the whole list."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Sequence

import auth_keys
import grpc
import psycopg
import pytest
from helpers import reads_beside
from sluice.v1 import document_service_pb2 as ds
from sluice.v1 import source_service_pb2 as src
from sluice.v1 import source_service_pb2_grpc, webhook_service_pb2_grpc
from sluice.v1 import webhook_service_pb2 as wh

from .helpers import Clients

READS = 400


def race(database_url: str, changes: list[str], params: dict, read: Callable[[], str | None]) -> None:
    """Run `changes` in turn, each in a transaction of its own, while `read` is called (READS
    times at least); `read` returns None for a consistent answer, else what it saw."""
    stop = threading.Event()
    commits = [0]
    errors: list[BaseException] = []

    def change() -> None:
        try:
            with psycopg.connect(database_url, autocommit=True) as conn:
                while not stop.is_set():
                    with conn.transaction():
                        for statement in changes[commits[0] % len(changes)].split(";"):
                            if statement.strip():
                                conn.execute(statement, params)
                    commits[0] += 1
        except BaseException as exc:  # the reads' assertion names it
            errors.append(exc)

    changer = threading.Thread(target=change, daemon=True)
    changer.start()
    answers = {"missing": 0, "whole": 0}
    mixed = []
    try:
        for _ in reads_beside(commits, READS):
            try:
                seen = read()
            except grpc.RpcError as err:
                if err.code() != grpc.StatusCode.NOT_FOUND:
                    raise
                answers["missing"] += 1
                continue
            if seen is None:
                answers["whole"] += 1
            else:
                mixed.append(seen)
    finally:
        stop.set()
        changer.join(30)
    assert errors == []
    assert commits[0] > READS // 4, "the changes must run beside the reads"
    assert mixed == [], (
        f"{len(mixed)} of {sum(answers.values()) + len(mixed)} answers mixed two commits ({answers}), e.g. {mixed[:3]}"
    )
    assert answers["missing"] and answers["whole"], answers


def collection_ids(database_url: str, name: str) -> dict:
    with psycopg.connect(database_url) as conn:
        tenant_id, collection_id = conn.execute("SELECT tenant_id, id FROM collections WHERE name = %s", (name,)).fetchone()
    return {"tenant": tenant_id, "collection": collection_id}


WEBHOOK = (
    "INSERT INTO webhook_subscriptions (id, tenant_id, collection_id, url, event_types, secret, cursor_txid,"
    " cursor_event_id) VALUES (%(parent)s, %(tenant)s, %(collection)s, 'https://example.com/hook',"
    " '{document.ready}', 'secret', 0, 0)"
)

# A parent made with one child and deleted, in turn: (the two changes, its children read through the API).
PARENTS: dict[str, tuple[list[str], Callable[[grpc.Channel, str], Sequence[object]]]] = {
    "source runs": (
        [
            "INSERT INTO sources (id, tenant_id, collection_id, kind, spec, max_delete_share)"
            " VALUES (%(parent)s, %(tenant)s, %(collection)s, 'LOCAL_FOLDER', '{}', 0.2);"
            "INSERT INTO source_runs (source_id, max_attempts) VALUES (%(parent)s, 3)",
            "DELETE FROM sources WHERE id = %(parent)s",
        ],
        lambda channel, source: (
            source_service_pb2_grpc.SourceServiceStub(channel).ListSourceRuns(src.ListSourceRunsRequest(name=source)).runs
        ),
    ),
    "webhook deliveries": (
        [
            WEBHOOK + ";"
            "INSERT INTO webhook_deliveries (subscription_id, event_id, event_txid, document_id, event_type, payload,"
            " event_time) VALUES (%(parent)s, 1, 1, gen_random_uuid(), 'document.ready', '{}', now())",
            "DELETE FROM webhook_subscriptions WHERE id = %(parent)s",
        ],
        lambda channel, webhook: (
            webhook_service_pb2_grpc.WebhookServiceStub(channel)
            .ListWebhookDeliveries(wh.ListWebhookDeliveriesRequest(webhook_id=webhook))
            .deliveries
        ),
    ),
}


@pytest.mark.parametrize("children", PARENTS)
def test_a_list_of_children_never_lists_none_of_a_parent_that_always_had_one(children, ingest_api, database_url):
    """ListSourceRuns of a source with one run, ListWebhookDeliveries of a webhook with one delivery."""
    changes, listing = PARENTS[children]
    Clients(ingest_api.address).create_collection("docs")
    channel = auth_keys.channel(ingest_api.address)
    params = {**collection_ids(database_url, "docs"), "parent": uuid.uuid4()}

    def read() -> str | None:
        listed = listing(channel, str(params["parent"]))
        return None if len(listed) == 1 else f"{len(listed)} {children}"

    race(database_url, changes, params, read)


# A rename in SQL stands for a deletion and a new collection of the same name (the API has no
# rename): the name "docs" comes and goes, a commit each, while its lists are read.
AWAY = "UPDATE collections SET name = 'docs-away' WHERE id = %(collection)s"
BACK = "UPDATE collections SET name = 'docs' WHERE id = %(collection)s"


def test_list_webhooks_of_a_collection_never_lists_none_while_it_has_one(ingest_api, database_url):
    c = Clients(ingest_api.address)
    c.create_collection("docs")
    hooks = webhook_service_pb2_grpc.WebhookServiceStub(auth_keys.channel(ingest_api.address))
    params = {**collection_ids(database_url, "docs"), "parent": uuid.uuid4()}
    with psycopg.connect(database_url) as conn:
        conn.execute(WEBHOOK, params)

    def read() -> str | None:
        listed = hooks.ListWebhooks(wh.ListWebhooksRequest(collection="docs")).webhooks
        seen = [(w.id, w.collection) for w in listed]
        return None if seen == [(str(params["parent"]), "docs")] else f"webhooks {seen}"

    race(database_url, [AWAY, BACK], params, read)


def test_list_documents_of_a_collection_never_lists_another_collections(ingest_api, database_url):
    c = Clients(ingest_api.address)
    c.create_collection("docs")
    document = c.upload("docs", b"text", "a.txt")
    params = collection_ids(database_url, "docs")

    def read() -> str | None:
        listed = c.docs.ListDocuments(ds.ListDocumentsRequest(collection="docs")).documents
        seen = [(d.id, d.collection) for d in listed]
        return None if seen == [(document.id, "docs")] else f"documents {seen}"

    race(database_url, [AWAY, BACK], params, read)
