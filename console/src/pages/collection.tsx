/** A collection's documents (#/collections/{name}). */
import { useEffect, useState } from "preact/hooks";
import type { Document } from "@gen/document_pb.js";
import { documents } from "../api";
import { href } from "../router";
import { ErrorBanner } from "../ui/error";
import { statusName } from "../ui/format";
import { Table } from "../ui/table";

export function CollectionPage(props: { name: string }) {
  const [rows, setRows] = useState<Document[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    documents
      .listDocuments({ collection: props.name, pageSize: 100 })
      .then((page) => setRows(page.documents))
      .catch(setError);
  }, [props.name]);
  return (
    <section>
      <h1>{props.name}</h1>
      <ErrorBanner error={error} />
      {rows ? (
        <Table
          caption={`Documents of ${props.name}`}
          rows={rows}
          rowKey={(d) => d.id}
          columns={[
            { header: "File", cell: (d) => <a href={href("documents", d.id)}>{d.filename}</a> },
            { header: "Status", cell: (d) => statusName(d.status) },
          ]}
        />
      ) : (
        <p>Loading…</p>
      )}
    </section>
  );
}
