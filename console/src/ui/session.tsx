/** `useSession()`: the signed-in session (key, role, tenant) and whether it may write. */
import { useEffect, useState } from "preact/hooks";
import { session, subscribe, type Session } from "../session";

export interface Principal {
  session: Session | null;
  /** Whether write actions are shown: admin and client keys (the server decides anyway). */
  canWrite: boolean;
  isAdmin: boolean;
}

export function useSession(): Principal {
  const [value, setValue] = useState(session);
  useEffect(() => subscribe(setValue), []);
  return { session: value, canWrite: value !== null && value.role !== "reader", isAdmin: value?.role === "admin" };
}
