/** The sources page (issue 34): routed at #/sources, to be built in this file. */
import { NotYet } from "../ui/placeholder";

export function SourcesPage() {
  return <NotYet title="Sources" what="each source, sync now, its runs with their counts." />;
}
