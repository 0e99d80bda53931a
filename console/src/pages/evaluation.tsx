/** The evaluation page (issue 34): routed at #/evaluation, to be built in this file. */
import { NotYet } from "../ui/placeholder";

export function EvaluationPage() {
  return <NotYet title="Evaluation" what="load an eval file, run it, a table and a chart per mode, the history across generations." />;
}
