import { Client } from "@sluice/client";

const client = new Client(); // localhost:50051 and :50052, with the key that `make run` wrote to .sluice/credentials
await client.collections.create("notes", { existOk: true });
let doc = await client.documents.upload("notes", "examples/docs/scaling-workers.md");
doc = await client.documents.wait(doc.id); // PENDING … READY
for (const hit of await client.search("notes", "how do I scale workers", { topK: 3 })) {
  console.log(`${hit.score.toFixed(3)} ${hit.filename}: ${hit.text.slice(0, 80)}`);
}
