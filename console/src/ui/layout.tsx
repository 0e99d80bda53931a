/** The frame of every signed-in page: a skip link, the navigation (every page), the session's
 * role and sign-out, then the page in <main>. */
import type { ComponentChildren } from "preact";
import { signOut } from "../session";
import { useSession } from "./session";

export const NAV: { path: string; label: string }[] = [
  { path: "/collections", label: "Collections" },
  { path: "/search", label: "Search" },
  { path: "/evaluation", label: "Evaluation" },
  { path: "/sources", label: "Sources" },
  { path: "/webhooks", label: "Webhooks" },
  { path: "/admin", label: "Tenants and keys" },
];

export function Layout(props: { path: string; children: ComponentChildren }) {
  const { session } = useSession();
  const section = "/" + (props.path.split("/")[1] || "collections");
  const active = section === "/documents" ? "/collections" : section;
  return (
    <>
      <a class="skip" href="#main" onClick={(event) => (event.preventDefault(), document.getElementById("main")?.focus())}>
        Skip to content
      </a>
      <header>
        <span class="brand">Sluice</span>
        <nav aria-label="Console">
          <ul>
            {NAV.map((item) => (
              <li key={item.path}>
                <a href={"#" + item.path} aria-current={item.path === active ? "page" : undefined}>
                  {item.label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <span class="who">
          {session ? <span class="role">{session.role === "reader" ? "read-only key" : `${session.role} key`}</span> : null}
          <button type="button" onClick={() => signOut()}>
            Sign out
          </button>
        </span>
      </header>
      <main id="main" tabIndex={-1}>
        {props.children}
      </main>
    </>
  );
}
