// The README's TypeScript example (examples/readme.ts), compiled and run as written: its Client()
// takes the addresses from SLUICE_INGEST_ADDRESS / SLUICE_SEARCH_ADDRESS and the key from the
// credentials file (SLUICE_CREDENTIALS), as `make run`'s users get them from the defaults.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { stack } from "./helpers.js";

const compiled = join(dirname(dirname(fileURLToPath(import.meta.url))), "examples", "readme.js");
const source = join(dirname(dirname(dirname(fileURLToPath(import.meta.url)))), "examples", "readme.ts");

test("the README example is at most 15 lines and runs as written", async () => {
  const lines = readFileSync(source, "utf8").split("\n").filter((line) => line.trim());
  assert.ok(lines.length <= 15, `${lines.length} lines`);
  const env: NodeJS.ProcessEnv = { ...process.env, SLUICE_INGEST_ADDRESS: stack.ingest, SLUICE_SEARCH_ADDRESS: stack.search,
    SLUICE_CREDENTIALS: stack.credentials };
  delete env.SLUICE_API_KEY;
  const { stdout } = await promisify(execFile)(process.execPath, [compiled], { cwd: stack.root, env, timeout: 300_000 });
  const hits = stdout.trim().split("\n");
  assert.ok(hits.length >= 1 && hits.every((line) => /^\d\.\d{3} \S+: /.test(line)), stdout);
  assert.match(hits[0], /scaling-workers\.md/);
});
