/** `<ErrorBanner error={e} />`: any failure (a Connect error, an HTTP error, an Error) as its code,
 * message and reason, in an alert region screen readers announce. Renders nothing for null. */
import { errorInfo } from "../api";

export function ErrorBanner(props: { error: unknown; onDismiss?: () => void }) {
  if (props.error === null || props.error === undefined) return null;
  const info = errorInfo(props.error);
  return (
    <div class="error" role="alert">
      <strong>{info.code.replace(/_/g, " ")}</strong>
      {info.reason ? <code class="reason">{info.reason}</code> : null}
      <span class="message">{info.message}</span>
      {props.onDismiss ? (
        <button type="button" class="link" onClick={props.onDismiss}>
          Dismiss
        </button>
      ) : null}
    </div>
  );
}
