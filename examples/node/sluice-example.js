#!/usr/bin/env node
// Sluice from Node.js with @grpc/grpc-js and the repository's .proto files (no code generation):
// create a collection, upload a file, watch it until READY, then search it.
//
//   npm install
//   node sluice-example.js FILE [--collection NAME] [--query TEXT] [--embedder hashing|local]
//
// Addresses come from SLUICE_INGEST_ADDRESS (default localhost:50051) and
// SLUICE_SEARCH_ADDRESS (default localhost:50052). Exit code 0 when the document became
// READY and the search answered, 1 otherwise.
'use strict';

const fs = require('fs');
const path = require('path');
const crypto = require('crypto');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const PROTO_ROOT = process.env.SLUICE_PROTO_ROOT || path.resolve(__dirname, '..', '..', 'protos');
const CHUNK_BYTES = 1024 * 1024;
const EMBEDDERS = {
  hashing: { provider: 'EMBEDDER_PROVIDER_HASHING', model: 'hashing', dimensions: 256 },
  local: { provider: 'EMBEDDER_PROVIDER_SENTENCE_TRANSFORMERS', model: 'all-MiniLM-L6-v2', dimensions: 384 },
};
const MIME_TYPES = { '.md': 'text/markdown', '.txt': 'text/plain', '.html': 'text/html', '.pdf': 'application/pdf' };

function parseArgs(argv) {
  const options = { collection: 'node-example', query: '', embedder: 'local', file: '' };
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i];
    if (arg === '--collection') options.collection = argv[++i];
    else if (arg === '--query') options.query = argv[++i];
    else if (arg === '--embedder') options.embedder = argv[++i];
    else if (!options.file) options.file = arg;
    else throw new Error(`unexpected argument ${arg}`);
  }
  if (!options.file) throw new Error('usage: node sluice-example.js FILE [--collection NAME] [--query TEXT] [--embedder hashing|local]');
  if (!EMBEDDERS[options.embedder]) throw new Error(`--embedder must be one of ${Object.keys(EMBEDDERS).join(', ')}`);
  return options;
}

function loadServices() {
  const definition = protoLoader.loadSync(
    ['sluice/v1/document_service.proto', 'sluice/v1/search_service.proto'],
    { includeDirs: [PROTO_ROOT], keepCase: true, longs: String, enums: String, defaults: true, oneofs: true },
  );
  const sluice = grpc.loadPackageDefinition(definition).sluice.v1;
  const credentials = grpc.credentials.createInsecure();
  return {
    documents: new sluice.DocumentService(process.env.SLUICE_INGEST_ADDRESS || 'localhost:50051', credentials),
    search: new sluice.SearchService(process.env.SLUICE_SEARCH_ADDRESS || 'localhost:50052', credentials),
  };
}

// Every call carries an API key: SLUICE_API_KEY, else the client key `make run` wrote to
// .sluice/credentials (or the file SLUICE_CREDENTIALS names).
function apiKey() {
  if (process.env.SLUICE_API_KEY) return process.env.SLUICE_API_KEY;
  const file = process.env.SLUICE_CREDENTIALS || path.join('.sluice', 'credentials');
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8')).keys.client;
  } catch (error) {
    throw new Error(`no API key: set SLUICE_API_KEY or SLUICE_CREDENTIALS (${file}: ${error.message})`);
  }
}

let cachedMetadata = null;
function auth() {
  if (!cachedMetadata) {
    cachedMetadata = new grpc.Metadata();
    cachedMetadata.set('authorization', `Bearer ${apiKey()}`);
  }
  return cachedMetadata;
}

// A unary call as a promise, with a deadline.
function unary(client, method, request, seconds = 30) {
  return new Promise((resolve, reject) => {
    client[method](request, auth(), { deadline: Date.now() + seconds * 1000 }, (error, response) => (error ? reject(error) : resolve(response)));
  });
}

async function ensureCollection(documents, name, embedder) {
  try {
    const created = await unary(documents, 'CreateCollection', { collection: { name, embedder: EMBEDDERS[embedder] } });
    console.log(`created collection ${created.name} (${created.embedder.model}, ${created.embedder.dimensions} dimensions)`);
  } catch (error) {
    if (error.code !== grpc.status.ALREADY_EXISTS) throw error;
    console.log(`collection ${name} exists already`);
  }
}

// UploadDocument is a client stream: the metadata first, then the bytes in 1 MiB pieces, then the
// trailer with the size and SHA-256 of what was sent. Without the trailer nothing is stored
// (UPLOAD_INCOMPLETE), so a stream cut short never becomes a truncated document.
function upload(documents, collection, file) {
  const content = fs.readFileSync(file);
  const sha256 = crypto.createHash('sha256').update(content).digest('hex');
  return new Promise((resolve, reject) => {
    const call = documents.UploadDocument(auth(), { deadline: Date.now() + 120 * 1000 }, (error, document) => (error ? reject(error) : resolve(document)));
    call.write({
      metadata: {
        collection,
        filename: path.basename(file),
        mime_type: MIME_TYPES[path.extname(file).toLowerCase()] || '',
        metadata: { source: 'node-example' },
        // Same collection, file and content: the same document back (idempotent retries).
        request_id: `node-${crypto.createHash('sha256').update(`${collection}\0${path.resolve(file)}\0${sha256}`).digest('hex').slice(0, 40)}`,
      },
    });
    // Hash what is actually streamed: the trailer confirms these bytes, not the ones read above.
    const streamed = crypto.createHash('sha256');
    let sent = 0;
    for (let offset = 0; offset < content.length; offset += CHUNK_BYTES) {
      const piece = content.subarray(offset, offset + CHUNK_BYTES);
      streamed.update(piece);
      sent += piece.length;
      call.write({ data: piece });
    }
    call.write({ trailer: { size_bytes: sent, sha256: streamed.digest('hex') } });
    call.end();
  });
}

// WatchDocument is a server stream: the current state at once, then every change until READY or FAILED.
function watch(documents, id) {
  return new Promise((resolve, reject) => {
    const call = documents.WatchDocument({ id }, auth());
    let last = null;
    call.on('data', (event) => {
      const doc = event.document;
      last = doc;
      const progress = doc.progress && doc.progress.total !== '0' ? ` ${doc.progress.done}/${doc.progress.total} ${doc.progress.unit}` : '';
      console.log(`  ${doc.status.replace('DOCUMENT_STATUS_', '')}${progress}`);
      if (doc.status === 'DOCUMENT_STATUS_READY' || doc.status === 'DOCUMENT_STATUS_FAILED') call.cancel();
    });
    call.on('error', (error) => (error.code === grpc.status.CANCELLED && last ? resolve(last) : reject(error)));
    call.on('end', () => resolve(last));
  });
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  const { documents, search } = loadServices();
  await ensureCollection(documents, options.collection, options.embedder);

  const uploaded = await upload(documents, options.collection, options.file);
  console.log(`uploaded ${uploaded.filename} as ${uploaded.id} (${uploaded.status})`);

  const final = await watch(documents, uploaded.id);
  if (final.status !== 'DOCUMENT_STATUS_READY') {
    console.error(`document ${final.id} ${final.status}: ${final.error_message}`);
    return 1;
  }
  console.log(`READY with ${final.chunk_count} chunks`);

  const query = options.query || fs.readFileSync(options.file, 'utf8').split(/\s+/).filter((w) => w.length > 4).slice(0, 4).join(' ');
  const response = await unary(search, 'Search', { collection: options.collection, query, top_k: 3, mode: 'SEARCH_MODE_HYBRID' });
  console.log(`search "${query}": ${response.hits.length} hit(s)`);
  response.hits.forEach((hit, rank) => {
    const page = hit.page_number ? ` page ${hit.page_number}` : '';
    console.log(`${rank + 1}. ${hit.filename}${page} score ${Number(hit.score).toFixed(4)}: ${hit.text.replace(/\s+/g, ' ').slice(0, 120)}`);
  });
  documents.close();
  search.close();
  return response.hits.length > 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (error) => {
    const reason = error.code !== undefined ? ` [${grpc.status[error.code] || error.code}]` : '';
    console.error(`error: ${error.details || error.message}${reason}`);
    process.exit(error.code === grpc.status.UNAVAILABLE ? 4 : 1);
  },
);
