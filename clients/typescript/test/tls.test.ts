// TLS and mutual TLS against a real ingest-api that requires client certificates, and TLS
// failures that say what failed (certificates made by the pytest, as in tests/clients/test_tls.py).
import assert from "node:assert/strict";
import { test } from "node:test";

import { Client, TLSError, type ClientOptions } from "@sluice/client";

import { collect, setting, stack } from "./helpers.js";

const tls = {
  get address() { return setting("SLUICE_TEST_TLS_INGEST"); },
  get ca() { return setting("SLUICE_TEST_TLS_CA"); },
  get otherCa() { return setting("SLUICE_TEST_TLS_OTHER_CA"); },
  get cert() { return setting("SLUICE_TEST_TLS_CLIENT_CERT"); },
  get key() { return setting("SLUICE_TEST_TLS_CLIENT_KEY"); },
  get rogueCert() { return setting("SLUICE_TEST_TLS_ROGUE_CERT"); },
  get rogueKey() { return setting("SLUICE_TEST_TLS_ROGUE_KEY"); },
};

async function names(options: ClientOptions): Promise<string[]> {
  const client = new Client({ apiKey: stack.apiKey, timeoutMs: 10_000, ...options });
  try {
    return (await collect(client.collections.list())).map((c) => c.name);
  } finally {
    client.close();
  }
}

async function refusal(options: ClientOptions): Promise<TLSError> {
  const error = await names(options).then(() => assert.fail("the call succeeded"), (e: unknown) => e);
  assert.ok(error instanceof TLSError, String(error));
  assert.equal(error.reason, "TLS_HANDSHAKE_FAILED");
  return error;
}

test("mutual TLS with the servers' CA and a client certificate it trusts", async () => {
  assert.ok(Array.isArray(await names({ address: tls.address, caFile: tls.ca, certFile: tls.cert, keyFile: tls.key })));
});

test("TLS failures say what failed, and are not retried", async () => {
  const untrusted = await refusal({ address: tls.address, caFile: tls.otherCa, certFile: tls.cert, keyFile: tls.key });
  assert.equal(untrusted.problem, "untrusted certificate");
  assert.match(untrusted.message, /is not signed by the CA given/);
  const plaintext = await refusal({ address: stack.ingest, caFile: tls.ca });
  assert.equal(plaintext.problem, "server does not speak TLS");
  for (const client of [{}, { certFile: tls.rogueCert, keyFile: tls.rogueKey }]) {
    const refused = await refusal({ address: tls.address, caFile: tls.ca, ...client });
    assert.equal(refused.problem, "client certificate refused", refused.message);
    assert.match(refused.message, /client certificate/);
  }
  await assert.rejects(names({ address: tls.address, caFile: tls.ca, certFile: tls.cert }),
    { name: "ConfigError", reason: "TLS_CONFIG_INVALID" });
});
