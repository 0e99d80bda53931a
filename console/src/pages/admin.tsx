/** The tenants and keys page (issue 34): routed at #/admin, to be built in this file. */
import { NotYet } from "../ui/placeholder";

export function AdminPage() {
  return <NotYet title="Tenants and keys" what="tenants and API keys (admin keys only; a new key is shown once)." />;
}
