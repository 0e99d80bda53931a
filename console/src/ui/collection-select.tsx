/** The collections of the session's tenant, for the pages that work on one (search, evaluation,
 * sources, webhooks): `useCollectionNames()` and `<CollectionSelect />`. */
import { useEffect, useState } from "preact/hooks";
import { documents } from "../api";

/** Every collection's name (all pages of ListCollections), or null while loading. */
export function useCollectionNames(onError: (err: unknown) => void): string[] | null {
  const [names, setNames] = useState<string[] | null>(null);
  useEffect(() => {
    let live = true;
    (async () => {
      const all: string[] = [];
      let pageToken = "";
      do {
        const page = await documents.listCollections({ pageSize: 1000, pageToken });
        all.push(...page.collections.map((c) => c.name));
        pageToken = page.nextPageToken;
      } while (pageToken);
      if (live) setNames(all);
    })().catch((err) => {
      if (live) {
        setNames([]);
        onError(err);
      }
    });
    return () => {
      live = false;
    };
  }, []);
  return names;
}

export function CollectionSelect(props: {
  id: string;
  names: string[] | null;
  value: string;
  onChange: (name: string) => void;
  /** A first option for "every collection", with this label. */
  any?: string;
  label?: string;
}) {
  return (
    <>
      <label for={props.id}>{props.label ?? "Collection"}</label>
      <select id={props.id} value={props.value} onChange={(e) => props.onChange(e.currentTarget.value)} disabled={props.names === null}>
        {props.any !== undefined ? <option value="">{props.any}</option> : null}
        {props.names === null ? <option value="">loading…</option> : null}
        {props.names !== null && props.names.length === 0 && props.any === undefined ? <option value="">no collection</option> : null}
        {(props.names ?? []).map((name) => (
          <option key={name} value={name}>
            {name}
          </option>
        ))}
      </select>
    </>
  );
}
