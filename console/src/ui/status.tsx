/** `<StatusBadge status={doc.status} />`: a document's status as a labelled badge. */
import { DocumentStatus } from "@gen/document_pb.js";
import { statusName } from "./format";

export function StatusBadge(props: { status: DocumentStatus }) {
  const name = statusName(props.status);
  const kind = props.status === DocumentStatus.READY || props.status === DocumentStatus.FAILED ? name : "busy";
  return <span class={`status ${kind}`}>{name}</span>;
}
