/** Sign in with an API key (docs/console.md, "The key"): the server says whose it is and what it
 * may do (AdminService.GetCaller) before it is kept in sessionStorage for the tab. */
import { useState } from "preact/hooks";
import { errorInfo, HttpError } from "../api";
import { createClient } from "@connectrpc/connect";
import { AdminService, ApiKeyRole } from "@gen/admin_service_pb.js";
import { createConnectTransport } from "@connectrpc/connect-web";
import { signIn, type Role } from "../session";
import { ErrorBanner } from "../ui/error";

const ROLES: Partial<Record<ApiKeyRole, Role>> = {
  [ApiKeyRole.ADMIN]: "admin",
  [ApiKeyRole.CLIENT]: "client",
  [ApiKeyRole.READER]: "reader",
};

/** The key's role, from the server; refused keys throw (401), and so does a worker key, which
 * has nothing to do here. */
async function roleOf(key: string): Promise<Role> {
  // A transport of its own: the key is not the session's until it has been accepted.
  const transport = createConnectTransport({
    baseUrl: location.origin,
    interceptors: [(next) => (req) => (req.header.set("Authorization", `Bearer ${key}`), next(req))],
  });
  const caller = await createClient(AdminService, transport).getCaller({});
  const role = ROLES[caller.role];
  if (role === undefined) {
    throw new HttpError(403, { code: "permission_denied", message: "a worker key serves workers only: sign in with a client, reader or admin key", reason: "ROLE_NOT_ALLOWED" });
  }
  return role;
}

export function SignInPage() {
  const [key, setKey] = useState("");
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
      signIn(key.trim(), await roleOf(key.trim()));
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
        <p class="hint">The key stays in this tab only (sessionStorage) and is sent as a header, never in a URL. The server says what it may do, and checks every call.</p>
        <button type="submit" disabled={busy}>
          {busy ? "Checking…" : "Sign in"}
        </button>
      </form>
      <ErrorBanner error={error} />
    </main>
  );
}
