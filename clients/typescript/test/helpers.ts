// What the Node tests share: where the real services are (tests/clients/test_typescript_sdk.py
// starts them and says so in SLUICE_TEST_* variables), and a TCP proxy that drops connections.
import assert from "node:assert/strict";
import { once } from "node:events";
import * as net from "node:net";

import { Client, type ClientOptions } from "@sluice/client";

/** A variable the pytest set; the tests fail (not skip) without it. */
export function setting(name: string): string {
  const value = process.env[name];
  assert.ok(value, `${name} is not set: run these tests through tests/clients/test_typescript_sdk.py`);
  return value;
}

export const stack = {
  get ingest() { return setting("SLUICE_TEST_INGEST"); },
  get search() { return setting("SLUICE_TEST_SEARCH"); },
  /** An ingest-api on the same database with a rate limit of 5 calls a second, in bursts of 2. */
  get limited() { return setting("SLUICE_TEST_LIMITED"); },
  /** An ingest-api on the same database that admits 2 upload streams at once (TOO_MANY_UPLOADS beyond). */
  get slots() { return setting("SLUICE_TEST_SLOTS"); },
  get apiKey() { return setting("SLUICE_TEST_API_KEY"); },
  get credentials() { return setting("SLUICE_TEST_CREDENTIALS"); },
  get root() { return setting("SLUICE_TEST_ROOT"); },
  /** A folder the ingest-api accepts as a local root of sources (folders and git repositories). */
  get sourceRoot() { return setting("SLUICE_TEST_SOURCE_ROOT"); },
};

export function client(options: ClientOptions = {}): Client {
  return new Client({ address: stack.ingest, searchAddress: stack.search, apiKey: stack.apiKey, ...options });
}

/** A port nothing listens on (just now). */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as net.AddressInfo;
  server.close();
  await once(server, "close");
  return port;
}

/** A TCP proxy in front of a real service: `drop()` cuts every connection (as a restart or a
 * network fault would), `block()` also refuses new ones until `unblock()`. */
export class Proxy {
  connections = 0;
  private blocked = false;
  private readonly sockets = new Set<net.Socket>();

  private constructor(private readonly server: net.Server, private readonly target: string) {}

  static async start(target: string, port = 0): Promise<Proxy> {
    const server = net.createServer();
    const proxy = new Proxy(server, target);
    server.on("connection", (socket) => proxy.accept(socket));
    server.listen(port, "127.0.0.1");
    await once(server, "listening");
    return proxy;
  }

  get address(): string {
    return `127.0.0.1:${(this.server.address() as net.AddressInfo).port}`;
  }

  private accept(socket: net.Socket): void {
    if (this.blocked) {
      socket.destroy();
      return;
    }
    this.connections += 1;
    const [host, port] = [this.target.slice(0, this.target.lastIndexOf(":")), Number(this.target.slice(this.target.lastIndexOf(":") + 1))];
    const upstream = net.connect(port, host);
    for (const [a, b] of [[socket, upstream], [upstream, socket]]) {
      this.sockets.add(a);
      a.on("error", () => b.destroy());
      a.on("close", () => { b.destroy(); this.sockets.delete(a); });
      a.pipe(b);
    }
  }

  drop(): void {
    for (const socket of this.sockets) socket.destroy();
  }

  block(): void {
    this.blocked = true;
    this.drop();
  }

  unblock(): void {
    this.blocked = false;
  }

  async close(): Promise<void> {
    this.drop();
    this.server.close();
    await once(this.server, "close");
  }
}

export async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const all: T[] = [];
  for await (const item of items) all.push(item);
  return all;
}
