/** The search page (issue 34): routed at #/search, to be built in this file. */
import { NotYet } from "../ui/placeholder";

export function SearchPage() {
  return <NotYet title="Search" what="the search playground (query, mode, filters, reranking, top k; hits with the explain breakdown; two settings side by side)." />;
}
