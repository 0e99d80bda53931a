/** A document (#/documents/{id}). */
import { useEffect, useState } from "preact/hooks";
import type { Document } from "@gen/document_pb.js";
import { documents } from "../api";
import { ErrorBanner } from "../ui/error";
import { statusName } from "../ui/format";

export function DocumentPage(props: { id: string }) {
  const [doc, setDoc] = useState<Document | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    documents.getDocument({ id: props.id }).then(setDoc).catch(setError);
  }, [props.id]);
  return (
    <section>
      <h1>{doc ? doc.filename : "Document"}</h1>
      <ErrorBanner error={error} />
      {doc ? <p>{statusName(doc.status)}</p> : null}
    </section>
  );
}
