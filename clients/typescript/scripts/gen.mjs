// Generate the TypeScript of protos/sluice/v1 (public services), google/api/field_behavior and google/rpc/error_details
// into src/gen with buf and protoc-gen-es (buf.gen.yaml). `--check` generates into a temporary
// directory and exits 1 when the committed code differs (like clients/python/gen_stubs.py --check).
// buf is the repository's (tools/: `cd tools && npm ci`), or one on PATH.
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(dirname(fileURLToPath(import.meta.url)));
const generated = join(here, "src", "gen");
const toolsBuf = join(here, "..", "..", "tools", "node_modules", ".bin", "buf");
const buf = existsSync(toolsBuf) ? toolsBuf : "buf";
const env = { ...process.env, PATH: `${join(here, "node_modules", ".bin")}:${process.env.PATH ?? ""}` };

function generate(into) {
  rmSync(into, { recursive: true, force: true });
  const base = mkdtempSync(join(tmpdir(), "sluice-ts-gen-"));
  try {
    execFileSync(buf, ["generate", "--template", "buf.gen.yaml", "-o", base], { cwd: here, env, stdio: "inherit" });
    cpSync(join(base, "src", "gen"), into, { recursive: true });
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
}

function files(root) {
  const found = new Map();
  const walk = (dir) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else found.set(relative(root, path), readFileSync(path, "utf8"));
    }
  };
  if (existsSync(root)) walk(root);
  return found;
}

if (process.argv.includes("--check")) {
  const scratch = mkdtempSync(join(tmpdir(), "sluice-ts-check-"));
  try {
    generate(join(scratch, "gen"));
    const want = files(join(scratch, "gen"));
    const have = files(generated);
    const stale = [...new Set([...want.keys(), ...have.keys()])].filter((f) => want.get(f) !== have.get(f)).sort();
    if (stale.length) {
      console.error("the TypeScript SDK's generated code is stale; run `npm run generate` in clients/typescript:");
      for (const f of stale) console.error(`  ${f}`);
      process.exit(1);
    }
    console.log("the TypeScript SDK's generated code is up to date");
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
} else {
  generate(generated);
}
