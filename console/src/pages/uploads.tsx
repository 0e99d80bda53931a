/**
 * Uploads into a collection: drop files or a folder on the zone, or choose them with the two
 * pickers (keyboard: Tab to a picker, Enter). Each file goes by itself through the gateway's
 * upload route with its progress; once stored, its status follows the collection's stream.
 */
import { useRef, useState } from "preact/hooks";
import { DocumentStatus } from "@gen/document_pb.js";
import { errorInfo, uploadFile } from "../api";
import { href } from "../router";
import { StatusBadge } from "../ui/status";
import type { LiveState } from "./collection";

/** Files uploaded at once; the rest wait their turn. */
const PARALLEL_UPLOADS = 3;

interface Upload {
  key: number;
  name: string;
  size: number;
  sent: number;
  documentId: string;
  /** The status the upload's answer gave, until the stream says more (a duplicate sends no event). */
  storedStatus: DocumentStatus;
  error: string;
}

/** Walks a dropped folder (webkitGetAsEntry), reading every level of its entries. */
async function filesOf(entry: FileSystemEntry, found: { file: File; name: string }[]): Promise<void> {
  if (entry.name.startsWith(".")) return; // hidden files and folders, as `sluice upload` skips them
  if (entry.isFile) {
    const file = await new Promise<File>((resolve, reject) => (entry as FileSystemFileEntry).file(resolve, reject));
    found.push({ file, name: entry.fullPath.replace(/^\//, "") });
  } else if (entry.isDirectory) {
    const reader = (entry as FileSystemDirectoryEntry).createReader();
    for (;;) {
      const batch = await new Promise<FileSystemEntry[]>((resolve, reject) => reader.readEntries(resolve, reject));
      if (!batch.length) break;
      for (const child of batch) await filesOf(child, found);
    }
  }
}

export function Uploads(props: { collection: string; live: LiveState }) {
  const [uploads, setUploads] = useState<Upload[]>([]);
  const [over, setOver] = useState(false);
  const nextKey = useRef(0);
  const queue = useRef<{ upload: Upload; file: File }[]>([]);
  const running = useRef(0);

  const update = (key: number, change: Partial<Upload>) => setUploads((list) => list.map((u) => (u.key === key ? { ...u, ...change } : u)));

  const pump = () => {
    while (running.current < PARALLEL_UPLOADS && queue.current.length) {
      const { upload, file } = queue.current.shift()!;
      running.current++;
      uploadFile(props.collection, file, upload.name, (sent) => update(upload.key, { sent }))
        .done.then((doc) => {
          const status = DocumentStatus[(doc.status ?? "").replace("DOCUMENT_STATUS_", "") as keyof typeof DocumentStatus] ?? DocumentStatus.PENDING;
          update(upload.key, { sent: upload.size, documentId: doc.id, storedStatus: status });
        })
        .catch((err) => update(upload.key, { error: `${errorInfo(err).code}: ${errorInfo(err).message}` }))
        .finally(() => {
          running.current--;
          pump();
        });
    }
  };

  const add = (files: { file: File; name: string }[]) => {
    const added = files
      .filter(({ name }) => !name.split("/").some((part) => part.startsWith(".")))
      .map(({ file, name }) => ({ upload: { key: nextKey.current++, name, size: file.size, sent: 0, documentId: "", storedStatus: DocumentStatus.UNSPECIFIED, error: "" }, file }));
    setUploads((list) => [...list, ...added.map((a) => a.upload)]);
    queue.current.push(...added);
    pump();
  };

  const onDrop = async (event: DragEvent) => {
    event.preventDefault();
    setOver(false);
    const items = Array.from(event.dataTransfer?.items ?? []);
    const found: { file: File; name: string }[] = [];
    const entries = items.map((item) => item.webkitGetAsEntry?.()).filter((e): e is FileSystemEntry => !!e);
    if (entries.length) for (const entry of entries) await filesOf(entry, found);
    else for (const file of Array.from(event.dataTransfer?.files ?? [])) found.push({ file, name: file.name });
    add(found);
  };

  const onPick = (event: Event) => {
    const input = event.currentTarget as HTMLInputElement;
    add(Array.from(input.files ?? []).map((file) => ({ file, name: file.webkitRelativePath || file.name })));
    input.value = "";
  };

  const live = props.live.byId;
  const finished = uploads.filter((u) => {
    const status = live.get(u.documentId)?.status ?? u.storedStatus;
    return u.error || status === DocumentStatus.READY || status === DocumentStatus.FAILED;
  }).length;

  return (
    <section class="uploads" aria-labelledby="uploads-heading">
      <h2 id="uploads-heading">Upload</h2>
      <div
        class={over ? "dropzone over" : "dropzone"}
        onDragOver={(e) => (e.preventDefault(), setOver(true))}
        onDragLeave={() => setOver(false)}
        onDrop={onDrop}
        data-testid="dropzone"
      >
        <p>Drop files or a folder here, or</p>
        <label class="picker">
          <span>Choose files</span>
          <input type="file" multiple onChange={onPick} />
        </label>
        <label class="picker">
          <span>Choose a folder</span>
          <input type="file" multiple {...{ webkitdirectory: true }} onChange={onPick} />
        </label>
      </div>
      {uploads.length ? (
        <>
          <p aria-live="polite">
            {finished} of {uploads.length} finished
          </p>
          <ul class="upload-list">
            {uploads.map((u) => {
              const doc = live.get(u.documentId);
              return (
                <li key={u.key}>
                  <span class="name">{u.name}</span>
                  {u.error ? (
                    <span class="failure">{u.error}</span>
                  ) : u.documentId ? (
                    <>
                      <StatusBadge status={doc?.status ?? u.storedStatus} />{" "}
                      <a href={href("documents", u.documentId)}>open</a>
                      {doc?.status === DocumentStatus.FAILED ? <span class="failure"> {doc.errorMessage}</span> : null}
                    </>
                  ) : (
                    <progress max={u.size || 1} value={u.sent} aria-label={`upload of ${u.name}`} />
                  )}
                </li>
              );
            })}
          </ul>
        </>
      ) : null}
    </section>
  );
}
