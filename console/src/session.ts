/**
 * The signed-in session: the API key and what the server says it may do (docs/console.md, "The key").
 *
 * The key lives in sessionStorage only: it lasts as long as the tab, is never put in a URL, a
 * cookie or a log, and sign-out removes it. Components read the session with `useSession()`
 * (ui/session.tsx); this module is the one place that touches the storage.
 */

/** What the key may do, as AdminService.GetCaller told it at sign-in (docs/console.md, "Roles"); a
 * write the server refuses with PERMISSION_DENIED still lowers the session to "reader" (a key's
 * role cannot change, but the server decides either way). */
export type Role = "admin" | "client" | "reader";

export interface Session {
  readonly key: string;
  readonly role: Role;
  /** The tenant an admin key acts for (X-Sluice-Tenant); empty for the key's own. */
  readonly tenant: string;
}

const KEY = "sluice.console.key";
const ROLE = "sluice.console.role";
const TENANT = "sluice.console.tenant";

type Listener = (session: Session | null) => void;
const listeners = new Set<Listener>();

function read(): Session | null {
  const key = sessionStorage.getItem(KEY);
  if (!key) return null;
  const role = sessionStorage.getItem(ROLE);
  return {
    key,
    role: role === "admin" || role === "reader" ? role : "client",
    tenant: sessionStorage.getItem(TENANT) ?? "",
  };
}

let current: Session | null = read();

function publish(): void {
  current = read();
  for (const listener of listeners) listener(current);
}

/** The session now, or null when signed out. */
export function session(): Session | null {
  return current;
}

export function signIn(key: string, role: Role): void {
  sessionStorage.setItem(KEY, key.trim());
  sessionStorage.setItem(ROLE, role);
  sessionStorage.removeItem(TENANT);
  publish();
}

export function signOut(): void {
  sessionStorage.removeItem(KEY);
  sessionStorage.removeItem(ROLE);
  sessionStorage.removeItem(TENANT);
  publish();
}

/** The server refused a write: this key only reads. */
export function lowerToReader(): void {
  if (current && current.role !== "reader") {
    sessionStorage.setItem(ROLE, "reader");
    publish();
  }
}

/** An admin key acting for another tenant (empty: its own). */
export function actAsTenant(tenant: string): void {
  if (tenant) sessionStorage.setItem(TENANT, tenant);
  else sessionStorage.removeItem(TENANT);
  publish();
}

export function subscribe(listener: Listener): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

/** The headers every call carries: the key, and the tenant an admin acts for. */
export function authHeaders(): Record<string, string> {
  const headers: Record<string, string> = {};
  if (current) {
    headers["Authorization"] = `Bearer ${current.key}`;
    if (current.tenant) headers["X-Sluice-Tenant"] = current.tenant;
  }
  return headers;
}
