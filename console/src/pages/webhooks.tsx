/** The webhooks page (issue 34): routed at #/webhooks, to be built in this file. */
import { NotYet } from "../ui/placeholder";

export function WebhooksPage() {
  return <NotYet title="Webhooks" what="each webhook and its deliveries." />;
}
