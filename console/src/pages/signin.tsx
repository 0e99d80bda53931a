/** Sign in with an API key (docs/console.md, "The key"): checked with one read (ListCollections)
 * before it is kept in sessionStorage for the tab. */
import { useState } from "preact/hooks";
import { errorInfo, HttpError } from "../api";
import { createClient } from "@connectrpc/connect";
import { DocumentService } from "@gen/document_service_pb.js";
import { createConnectTransport } from "@connectrpc/connect-web";
import { signIn, type Role } from "../session";
import { ErrorBanner } from "../ui/error";

async function check(key: string): Promise<void> {
  // A transport of its own: the key is not the session's until it has been accepted.
  const transport = createConnectTransport({
    baseUrl: location.origin,
    interceptors: [(next) => (req) => (req.header.set("Authorization", `Bearer ${key}`), next(req))],
  });
  await createClient(DocumentService, transport).listCollections({ pageSize: 1 });
}

export function SignInPage() {
  const [key, setKey] = useState("");
  const [role, setRole] = useState<Role>("client");
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);

  async function submit(event: Event) {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      if (!/^slk_[a-z0-9]{12}_[A-Za-z0-9_-]{43}$/.test(key.trim())) {
        throw new HttpError(0, { code: "invalid_argument", message: "a Sluice API key looks like slk_<12 characters>_<43 characters>", reason: "" });
      }
      await check(key.trim());
      signIn(key.trim(), role);
      if (!location.hash || location.hash === "#/") location.hash = "#/collections";
    } catch (err) {
      setError(errorInfo(err).code === "unauthenticated" ? new HttpError(401, { ...errorInfo(err), message: "this key was refused: " + errorInfo(err).message }) : err);
    } finally {
      setBusy(false);
    }
  }

  return (
    <main id="main" class="signin">
      <h1>Sluice console</h1>
      <form onSubmit={submit}>
        <label for="api-key">API key</label>
        <input id="api-key" name="api-key" type="password" autoComplete="off" spellcheck={false} value={key} onInput={(e) => setKey(e.currentTarget.value)} required />
        <fieldset>
          <legend>What this key may do</legend>
          <label>
            <input type="radio" name="role" value="client" checked={role === "client"} onChange={() => setRole("client")} /> read and write (client)
          </label>
          <label>
            <input type="radio" name="role" value="reader" checked={role === "reader"} onChange={() => setRole("reader")} /> read only (reader)
          </label>
          <label>
            <input type="radio" name="role" value="admin" checked={role === "admin"} onChange={() => setRole("admin")} /> everything, every tenant (admin)
          </label>
        </fieldset>
        <p class="hint">The key stays in this tab only (sessionStorage) and is sent as a header, never in a URL. The server checks every call, whatever you choose here.</p>
        <button type="submit" disabled={busy}>
          {busy ? "Checking…" : "Sign in"}
        </button>
      </form>
      <ErrorBanner error={error} />
    </main>
  );
}
