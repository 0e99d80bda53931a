/**
 * Hash routing: the console's pages live in the URL's fragment (#/collections/docs), so the gateway
 * serves one page at `/` and no console path can collide with an RPC path (`/{service}/{method}`).
 *
 * `useRoute()` gives the current path split into segments; `navigate(path)` goes there;
 * `<Link to="/collections/docs">` is an ordinary link (Tab and Enter work).
 */
import type { ComponentChildren } from "preact";
import { useEffect, useState } from "preact/hooks";

export interface Route {
  /** The path after "#", e.g. "/collections/docs". */
  path: string;
  /** Its segments, decoded: ["collections", "docs"]. */
  segments: string[];
}

function current(): Route {
  const path = location.hash.replace(/^#/, "") || "/";
  const segments = path
    .split("/")
    .filter(Boolean)
    .map((part) => {
      try {
        return decodeURIComponent(part);
      } catch {
        return part;
      }
    });
  return { path, segments };
}

export function useRoute(): Route {
  const [route, setRoute] = useState(current);
  useEffect(() => {
    const onChange = () => setRoute(current());
    addEventListener("hashchange", onChange);
    return () => removeEventListener("hashchange", onChange);
  }, []);
  return route;
}

/** The href of a console path; each segment is encoded, so data cannot change the route's shape. */
export function href(...segments: string[]): string {
  return "#/" + segments.map(encodeURIComponent).join("/");
}

export function navigate(hrefValue: string): void {
  location.hash = hrefValue.replace(/^#/, "");
}

export function Link(props: { to: string; children: ComponentChildren; class?: string; "aria-current"?: "page" | undefined }) {
  return (
    <a href={props.to} class={props.class} aria-current={props["aria-current"]}>
      {props.children}
    </a>
  );
}
