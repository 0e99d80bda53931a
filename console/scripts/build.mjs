// Builds the console into dist/ (docs/console.md, "How it is built"):
//   dist/index.html            no-cache, names the hashed entry script and stylesheet
//   dist/assets/*-HASH.{js,css,mjs}  served by the gateway under /console/assets/, cached for a year
// The entry is ES modules with code splitting, so pdf.js is a chunk of its own, loaded when a PDF
// is opened; its worker is copied beside it under a hashed name. Fails when the first load's
// JavaScript and CSS, gzipped, exceed the budget.
import { createHash } from "node:crypto";
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { basename, dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import * as esbuild from "esbuild";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const dist = join(root, "dist");
const assets = join(dist, "assets");
const PUBLIC_PATH = "/console/assets/";
// The budget of the first load (entry script, its static imports, the stylesheet), gzipped.
const FIRST_LOAD_BUDGET_BYTES = 100 * 1024;

rmSync(dist, { recursive: true, force: true });
mkdirSync(assets, { recursive: true });

function hashed(path) {
  const bytes = readFileSync(path);
  const hash = createHash("sha256").update(bytes).digest("hex").slice(0, 10).toUpperCase();
  return `${basename(path).replace(/\.(m?js)$/, "")}-${hash}.${path.endsWith(".mjs") ? "mjs" : "js"}`;
}

// pdf.js's worker: copied as is, under a hashed name the bundle is told about.
const workerSource = join(root, "node_modules/pdfjs-dist/build/pdf.worker.min.mjs");
const workerName = hashed(workerSource);
copyFileSync(workerSource, join(assets, workerName));

// The SDK's generated code (../clients/typescript/src/gen) imports @bufbuild/protobuf: resolve it
// from the console's node_modules so that one copy of the runtime is bundled, the one connect uses.
const oneProtobuf = {
  name: "one-protobuf",
  setup(build) {
    build.onResolve({ filter: /^@bufbuild\/protobuf(\/.*)?$/ }, async (args) => {
      if (args.pluginData?.fromConsole) return undefined;
      return build.resolve(args.path, { kind: args.kind, resolveDir: root, pluginData: { fromConsole: true } });
    });
  },
};

const result = await esbuild.build({
  entryPoints: { main: join(root, "src/main.tsx") },
  bundle: true,
  splitting: true,
  format: "esm",
  target: ["chrome110", "firefox115", "safari16"],
  outdir: assets,
  publicPath: PUBLIC_PATH,
  entryNames: "[name]-[hash]",
  chunkNames: "[name]-[hash]",
  assetNames: "[name]-[hash]",
  minify: true,
  legalComments: "none",
  metafile: true,
  jsx: "automatic",
  jsxImportSource: "preact",
  tsconfig: join(root, "tsconfig.json"),
  define: { __PDF_WORKER_URL__: JSON.stringify(PUBLIC_PATH + workerName) },
  plugins: [oneProtobuf],
  logLevel: "warning",
});

const outputs = result.metafile.outputs;
const entry = Object.keys(outputs).find((path) => outputs[path].entryPoint?.endsWith("src/main.tsx"));
const css = outputs[entry].cssBundle;
const url = (path) => PUBLIC_PATH + relative(assets, join(process.cwd(), path));

// The first load: the entry, the chunks it imports statically, the stylesheet.
const firstLoad = new Set([entry, css]);
const pending = [entry];
while (pending.length) {
  for (const imported of outputs[pending.pop()].imports) {
    if (imported.kind === "import-statement" && !firstLoad.has(imported.path)) {
      firstLoad.add(imported.path);
      pending.push(imported.path);
    }
  }
}

// index.html names the entry and preloads the chunks it imports, so they load side by side.
const preloads = [...firstLoad]
  .filter((path) => path !== entry && path !== css)
  .map((path) => `<link rel="modulepreload" href="${url(path)}">`)
  .join("\n");
const template = readFileSync(join(root, "src/index.html"), "utf8");
writeFileSync(
  join(dist, "index.html"),
  template.replace("%STYLESHEET%", url(css)).replace("%SCRIPT%", url(entry)).replace("%PRELOADS%", preloads),
);
const gz = (path) => gzipSync(readFileSync(join(process.cwd(), path))).length;
let total = 0;
const rows = [];
for (const path of Object.keys(outputs).filter((p) => !p.endsWith(".map"))) {
  const size = gz(path);
  if (firstLoad.has(path)) total += size;
  rows.push(`  ${firstLoad.has(path) ? "first load" : "lazy      "}  ${(size / 1024).toFixed(1).padStart(7)} KiB gz  ${basename(path)}`);
}
rows.push(`  lazy (worker) ${(gzipSync(readFileSync(join(assets, workerName))).length / 1024).toFixed(1).padStart(7)} KiB gz  ${workerName}`);
console.log(rows.join("\n"));
console.log(`console: first load ${(total / 1024).toFixed(1)} KiB gzipped (budget ${FIRST_LOAD_BUDGET_BYTES / 1024} KiB)`);
writeFileSync(join(dist, "budget.json"), JSON.stringify({ firstLoadGzipBytes: total, budgetBytes: FIRST_LOAD_BUDGET_BYTES }));
if (total > FIRST_LOAD_BUDGET_BYTES) {
  console.error("console: the first load is over its budget (docs/console.md#the-size-budget)");
  process.exit(1);
}
