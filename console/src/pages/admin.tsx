/**
 * Tenants and keys (#/admin): admin keys only (AdminService; any other key sees a note saying so).
 * Every tenant with its usage and quotas; a new tenant; a tenant's API keys (never a secret);
 * a new key, whose secret is shown once in a dialog with a copy button and then forgotten (it
 * lives in this component's state until the dialog closes: never in storage, a URL or a log);
 * revoking a key. An admin may also act for a tenant (X-Sluice-Tenant on every call).
 */
import { ApiKeyRole, type ApiKey, type Tenant } from "@gen/admin_service_pb.js";
import { useEffect, useRef, useState } from "preact/hooks";
import { admin } from "../api";
import { actAsTenant } from "../session";
import { ErrorBanner } from "../ui/error";
import { bytes, enumName, time } from "../ui/format";
import { useSession } from "../ui/session";
import { Table } from "../ui/table";

const ROLES: [ApiKeyRole, string][] = [
  [ApiKeyRole.CLIENT, "client: read and write the tenant's collections"],
  [ApiKeyRole.READER, "reader: search and read only"],
  [ApiKeyRole.ADMIN, "admin: tenants, keys and every tenant's data"],
  [ApiKeyRole.WORKER, "worker: processing jobs only"],
];

function roleName(role: ApiKeyRole): string {
  return enumName(ApiKeyRole as unknown as Record<number, string>, role, "");
}

function quota(n: bigint | number, format: (n: bigint | number) => string = String): string {
  return Number(n) ? format(n) : "unlimited";
}

/** The dialog that shows a new key's secret, once. Closing it (button or Escape) forgets it. */
function SecretDialog(props: { apiKey: ApiKey; secret: string; onClose: () => void }) {
  const dialog = useRef<HTMLDialogElement>(null);
  const field = useRef<HTMLInputElement>(null);
  const [copied, setCopied] = useState("");
  useEffect(() => {
    dialog.current?.showModal();
    field.current?.select();
  }, []);
  async function copy() {
    try {
      await navigator.clipboard.writeText(props.secret);
      setCopied("Copied to the clipboard.");
    } catch {
      field.current?.select();
      setCopied(document.execCommand("copy") ? "Copied to the clipboard." : "Select the key and copy it (Ctrl+C).");
    }
  }
  return (
    <dialog ref={dialog} class="secret" aria-labelledby="secret-title" aria-describedby="secret-warning" onClose={props.onClose}>
      <h2 id="secret-title">New {roleName(props.apiKey.role).toLowerCase()} key for {props.apiKey.tenant}</h2>
      <p id="secret-warning" class="warning">
        Copy this key now. It is shown this once: Sluice keeps only its hash, and the console forgets it when this dialog closes.
      </p>
      <label for="secret-value">API key {props.apiKey.name ? `“${props.apiKey.name}”` : ""}</label>
      <input id="secret-value" ref={field} readOnly value={props.secret} spellcheck={false} autoComplete="off" onFocus={(e) => e.currentTarget.select()} />
      <p class="hint">Send it as <code>Authorization: Bearer …</code>. Its public prefix is {props.apiKey.prefix}.</p>
      <p aria-live="polite" class="ok">
        {copied}
      </p>
      <div class="actions">
        <button type="button" class="primary" onClick={() => void copy()}>
          Copy
        </button>
        <button type="button" onClick={() => dialog.current?.close()}>
          I have copied it, close
        </button>
      </div>
    </dialog>
  );
}

function Keys(props: { tenant: string; onError: (err: unknown) => void }) {
  const { session } = useSession();
  const [keys, setKeys] = useState<ApiKey[] | null>(null);
  const [role, setRole] = useState(ApiKeyRole.CLIENT);
  const [label, setLabel] = useState("");
  const [busy, setBusy] = useState(false);
  const [created, setCreated] = useState<{ apiKey: ApiKey; secret: string } | null>(null);

  const load = async () => {
    try {
      setKeys((await admin.listApiKeys({ tenant: props.tenant })).apiKeys);
    } catch (err) {
      setKeys([]);
      props.onError(err);
    }
  };
  useEffect(() => {
    setKeys(null);
    void load();
  }, [props.tenant]);

  async function create(event: Event) {
    event.preventDefault();
    setBusy(true);
    try {
      const answer = await admin.createApiKey({ tenant: props.tenant, role, name: label.trim() });
      if (answer.apiKey) setCreated({ apiKey: answer.apiKey, secret: answer.secret });
      setLabel("");
      await load();
    } catch (err) {
      props.onError(err);
    } finally {
      setBusy(false);
    }
  }

  async function revoke(key: ApiKey) {
    const own = session?.key.startsWith(key.prefix);
    const question = own
      ? `Revoke ${key.prefix}…? It is the key this console is signed in with: every call after this one will be refused.`
      : `Revoke ${key.prefix}… (${roleName(key.role).toLowerCase()}${key.name ? `, ${key.name}` : ""})? Every Sluice process refuses it within a second.`;
    if (!confirm(question)) return;
    try {
      await admin.revokeApiKey({ id: key.id });
      await load();
    } catch (err) {
      props.onError(err);
    }
  }

  return (
    <section aria-labelledby="keys-title">
      <h2 id="keys-title">Keys of {props.tenant}</h2>
      <form class="inline" onSubmit={create}>
        <label for="key-role">New key's role</label>
        <select id="key-role" value={role} onChange={(e) => setRole(Number(e.currentTarget.value))}>
          {ROLES.map(([r, text]) => (
            <option key={r} value={r}>
              {text}
            </option>
          ))}
        </select>
        <label for="key-name">Label</label>
        <input id="key-name" value={label} maxLength={200} onInput={(e) => setLabel(e.currentTarget.value)} placeholder="who holds it" />
        <button type="submit" class="primary" disabled={busy}>
          Create key
        </button>
      </form>
      {keys === null ? (
        <p aria-live="polite">Loading…</p>
      ) : (
        <Table
          caption={`API keys of ${props.tenant}`}
          rows={keys}
          rowKey={(k) => k.id}
          empty="No key."
          columns={[
            { header: "Prefix", cell: (k) => <code>{k.prefix}</code> },
            { header: "Role", cell: (k) => roleName(k.role) },
            { header: "Label", cell: (k) => k.name },
            { header: "Created", cell: (k) => time(k.createTime) },
            { header: "Revoked", cell: (k) => (k.revokeTime ? <span class="bad">{time(k.revokeTime)}</span> : "") },
            {
              header: "Actions",
              cell: (k) =>
                k.revokeTime ? (
                  ""
                ) : (
                  <button type="button" class="danger" onClick={() => void revoke(k)} aria-label={`Revoke ${k.prefix}`}>
                    Revoke
                  </button>
                ),
            },
          ]}
        />
      )}
      {created ? <SecretDialog apiKey={created.apiKey} secret={created.secret} onClose={() => setCreated(null)} /> : null}
    </section>
  );
}

export function AdminPage() {
  const { session, isAdmin } = useSession();
  const [error, setError] = useState<unknown>(null);
  const [tenants, setTenants] = useState<Tenant[] | null>(null);
  const [selected, setSelected] = useState("");
  const [name, setName] = useState("");
  const [maxDocuments, setMaxDocuments] = useState("");
  const [maxBytes, setMaxBytes] = useState("");
  const [maxCollections, setMaxCollections] = useState("");
  const [creating, setCreating] = useState(false);

  const load = async () => {
    try {
      const list = (await admin.listTenants({})).tenants;
      setTenants(list);
      setSelected((s) => s || (list.find((t) => t.name === "default") ?? list[0])?.name || "");
    } catch (err) {
      setTenants([]);
      setError(err);
    }
  };
  useEffect(() => {
    if (isAdmin) void load();
  }, [isAdmin]);

  if (!isAdmin) {
    return (
      <section>
        <h1>Tenants and keys</h1>
        <p class="note" role="note">
          This page needs an admin key. You are signed in with a {session?.role === "reader" ? "read-only" : "client"} key; sign out and sign in with an admin key (and say so) to manage tenants and API keys.
        </p>
      </section>
    );
  }

  async function create(event: Event) {
    event.preventDefault();
    const whole = (text: string, what: string): number => {
      const n = text.trim() === "" ? 0 : Number(text);
      if (!Number.isInteger(n) || n < 0) throw new Error(`${what} must be a whole number (empty or 0: unlimited)`);
      return n;
    };
    setCreating(true);
    try {
      const quotaInit = {
        maxDocuments: BigInt(whole(maxDocuments, "Most documents")),
        maxStoredBytes: BigInt(whole(maxBytes, "Most stored bytes")),
        maxCollections: whole(maxCollections, "Most collections"),
      };
      const tenant = await admin.createTenant({ tenant: { name: name.trim(), quota: quotaInit } });
      setName("");
      setMaxDocuments("");
      setMaxBytes("");
      setMaxCollections("");
      await load();
      setSelected(tenant.name);
    } catch (err) {
      setError(err);
    } finally {
      setCreating(false);
    }
  }

  return (
    <section>
      <h1>Tenants and keys</h1>
      <ErrorBanner error={error} onDismiss={() => setError(null)} />
      {session?.tenant ? (
        <p class="note">
          Acting for tenant <strong>{session.tenant}</strong>: the other pages show its collections.{" "}
          <button type="button" class="link" onClick={() => actAsTenant("")}>
            Act for the key's own tenant again
          </button>
        </p>
      ) : null}
      <form class="inline" onSubmit={create}>
        <label for="tenant-name">New tenant</label>
        <input id="tenant-name" value={name} onInput={(e) => setName(e.currentTarget.value)} pattern="[a-z0-9][a-z0-9_\-]{0,62}" required placeholder="name" />
        <label for="tenant-docs">Most documents</label>
        <input id="tenant-docs" value={maxDocuments} inputMode="numeric" size={8} onInput={(e) => setMaxDocuments(e.currentTarget.value)} placeholder="unlimited" />
        <label for="tenant-bytes">Most stored bytes</label>
        <input id="tenant-bytes" value={maxBytes} inputMode="numeric" size={12} onInput={(e) => setMaxBytes(e.currentTarget.value)} placeholder="unlimited" />
        <label for="tenant-collections">Most collections</label>
        <input id="tenant-collections" value={maxCollections} inputMode="numeric" size={6} onInput={(e) => setMaxCollections(e.currentTarget.value)} placeholder="unlimited" />
        <button type="submit" class="primary" disabled={creating}>
          Create tenant
        </button>
      </form>
      {tenants === null ? (
        <p aria-live="polite">Loading…</p>
      ) : (
        <Table
          caption="Tenants"
          rows={tenants}
          rowKey={(t) => t.name}
          rowClass={(t) => (t.name === selected ? "selected" : "")}
          empty="No tenant."
          columns={[
            { header: "Tenant", cell: (t) => t.name },
            { header: "Documents", numeric: true, cell: (t) => `${t.usage?.documents ?? 0n} of ${quota(t.quota?.maxDocuments ?? 0)}` },
            { header: "Stored", numeric: true, cell: (t) => `${bytes(t.usage?.storedBytes ?? 0n)} of ${quota(t.quota?.maxStoredBytes ?? 0, bytes)}` },
            { header: "Collections", numeric: true, cell: (t) => `${t.usage?.collections ?? 0} of ${quota(t.quota?.maxCollections ?? 0)}` },
            { header: "Created", cell: (t) => time(t.createTime) },
            {
              header: "Actions",
              cell: (t) => (
                <span class="actions">
                  <button type="button" onClick={() => setSelected(t.name)} aria-pressed={t.name === selected} aria-label={`Keys of ${t.name}`}>
                    Keys
                  </button>
                  <button type="button" onClick={() => actAsTenant(t.name)} disabled={session?.tenant === t.name} aria-label={`Act for ${t.name}`}>
                    Act for
                  </button>
                </span>
              ),
            },
          ]}
        />
      )}
      {selected ? <Keys key={selected} tenant={selected} onError={setError} /> : null}
    </section>
  );
}
