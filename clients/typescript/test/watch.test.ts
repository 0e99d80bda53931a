// Watches resume: a collection watch reconnects after its last cursor when the connection drops
// (missing nothing, seeing nothing twice), and a document watch reopens its stream.
import assert from "node:assert/strict";
import { after, test } from "node:test";

import { Document, DocumentStatus, WaitTimeout, type CollectionEvent } from "@sluice/client";

import { client as makeClient, Proxy, stack } from "./helpers.js";

const direct = makeClient();
after(() => direct.close());

test("a collection watch resumes after its cursor when the connection drops", async () => {
  await direct.collections.create("ts-watch", { embedder: "hashing" });
  const proxy = await Proxy.start(stack.ingest);
  const watching = makeClient({ address: proxy.address });
  const reconnects: string[] = [];
  const watch = watching.collections.watch("ts-watch", { onReconnect: (cursor) => reconnects.push(cursor) });
  const events: CollectionEvent[] = [];
  const readyIds = new Set<string>();
  let seen!: () => void;
  let target = "";
  let arrived = new Promise<void>((resolve) => { seen = resolve; });
  const following = (async () => {
    for await (const event of watch) {
      events.push(event);
      if (event.document?.ready) readyIds.add(event.document.id);
      if (target && readyIds.has(target)) seen();
    }
  })();
  // The events of `target` until READY, unless the watch fails first.
  const until = (promise: Promise<void>) => Promise.race([promise, following.then(() => assert.fail("the watch ended"))]);
  try {
    // The watch is open once the server has answered (a heartbeat or an event gives the cursor).
    const first = await direct.documents.upload("ts-watch", Buffer.from("first document"), { filename: "a.txt" });
    target = first.id;
    if (readyIds.has(target)) seen();
    await until(arrived);
    const cursorBefore = watch.cursor;
    assert.ok(cursorBefore);
    // The connection drops and stays down while a second document is uploaded and processed.
    proxy.block();
    const second = await direct.documents.upload("ts-watch", Buffer.from("second document"), { filename: "b.txt" });
    assert.ok((await direct.documents.wait(second.id, { timeoutMs: 60_000 })).ready);
    arrived = new Promise<void>((resolve) => { seen = resolve; });
    target = second.id;
    proxy.unblock();
    await until(arrived); // its events arrive although they happened while the watch was away
    assert.ok(proxy.connections >= 2, `connections: ${proxy.connections}`);
    assert.ok(reconnects.length >= 1 && reconnects[0] === cursorBefore);
    const ids = events.map((e) => e.eventId);
    assert.deepEqual(ids, [...new Set(ids)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)), "every event once, in order");
    const secondStates = events.filter((e) => e.document?.id === second.id).map((e) => e.document!.status);
    assert.equal(secondStates[0], DocumentStatus.PENDING);
    assert.equal(secondStates[secondStates.length - 1], DocumentStatus.READY);
    assert.ok(events.every((e) => e.kind === "CHANGED" && typeof e.eventId === "bigint"));
  } finally {
    watch.close();
    await following.catch(() => undefined);
    watching.close();
    await proxy.close();
  }
});

test("a document watch reopens its stream when the connection drops, and ends at READY", async () => {
  await direct.collections.create("ts-watch-doc", { embedder: "hashing" });
  const proxy = await Proxy.start(stack.ingest);
  const watching = makeClient({ address: proxy.address });
  try {
    const doc = await direct.documents.upload("ts-watch-doc", Buffer.from("a document to follow"), { filename: "f.txt" });
    const states: DocumentStatus[] = [];
    for await (const state of watching.documents.watch(doc.id, { timeoutMs: 60_000 })) {
      if (states.length === 0) proxy.drop(); // cut the stream after its first message
      states.push(state.status);
    }
    assert.equal(states[states.length - 1], DocumentStatus.READY);
    assert.ok(proxy.connections >= 2, `connections: ${proxy.connections}`);
    for (let n = 1; n < states.length; n += 1) assert.ok(states[n] >= states[n - 1], `states go forward: ${states}`);
  } finally {
    watching.close();
    await proxy.close();
  }
});

test("a wait that times out says so, with the document's last state; a missing document is NOT_FOUND", async () => {
  await direct.collections.create("ts-wait", { embedder: "hashing" });
  const doc = await direct.documents.upload("ts-wait", Buffer.from("waits, briefly"), { filename: "w.txt" });
  await assert.rejects(direct.documents.wait(doc.id, { timeoutMs: 1 }), (error: unknown) => {
    assert.ok(error instanceof WaitTimeout);
    assert.equal(error.reason, "TIMEOUT");
    assert.match(error.message, /^timed out waiting for /);
    assert.equal((error.documents[0] as Document).id, doc.id);
    return true;
  });
  assert.ok((await direct.documents.wait(doc.id, { timeoutMs: 60_000 })).ready); // it went on processing meanwhile
  await assert.rejects(direct.documents.wait("00000000-0000-0000-0000-000000000000", { timeoutMs: 5_000 }),
    { name: "NotFound", reason: "DOCUMENT_NOT_FOUND" });
});
