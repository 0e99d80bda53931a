/**
 * Retries and pacing: every call honours RetryInfo and retries what can heal, within its deadline
 * (the Python SDK's retry.py, rule for rule; docs/clients.md, "Retries and deadlines").
 *
 * - RATE_LIMITED (RESOURCE_EXHAUSTED with a RetryInfo): wait the delay the server named (plus up
 *   to 10 % jitter) and try again, as long as the call's deadline allows. The whole client holds
 *   back for that long, and from then on starts its calls no faster than 90 % of the limit the
 *   server reported (ErrorInfo `limit_per_second`).
 * - TOO_MANY_UPLOADS (the server's upload slots are full; nothing was stored): wait the delay its
 *   RetryInfo names (when a slot should be free), spread by up to 50 % so that the refused uploads
 *   of a batch do not all come back at once, as long as the deadline allows; the rest of the
 *   client is not held back. From a server that names no delay: as UNAVAILABLE.
 * - UNAVAILABLE (a restart, the database away, nothing listening yet): exponential backoff from
 *   200 ms to 5 s, each wait drawn from the upper half of its step, up to `attempts` tries, within
 *   the deadline.
 * - A TLS handshake failure is not retried, and neither is anything else.
 */
import { RateLimited, SluiceError, TLSError, Unavailable } from "./errors.js";

/** What part of the server's reported rate a client allows itself once it has been refused. */
export const PACE_FRACTION = 0.9;

export interface RetryPolicyOptions {
  /** How long a call may take in all, retries included (ms). */
  timeoutMs?: number;
  /** Tries of a call that met UNAVAILABLE or TOO_MANY_UPLOADS (rate limits: as the deadline allows). */
  attempts?: number;
  initialBackoffMs?: number;
  maxBackoffMs?: number;
}

export class RetryPolicy {
  readonly timeoutMs: number;
  readonly attempts: number;
  readonly initialBackoffMs: number;
  readonly maxBackoffMs: number;

  constructor(options: RetryPolicyOptions = {}) {
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.attempts = options.attempts ?? 6;
    this.initialBackoffMs = options.initialBackoffMs ?? 200;
    this.maxBackoffMs = options.maxBackoffMs ?? 5_000;
  }

  /** The wait after the `attempt`-th failure (0-based): exponential, with jitter in its upper half. */
  backoff(attempt: number): number {
    const ceiling = Math.min(this.maxBackoffMs, this.initialBackoffMs * 2 ** attempt);
    return uniform(ceiling / 2, ceiling);
  }

  /** Milliseconds to wait before trying again after `error`, or undefined to give up and throw it.
   * `attempt` counts the earlier failures that were not rate limits. */
  nextWait(error: SluiceError, attempt: number, remainingMs: number): number | undefined {
    let wait: number;
    if (error instanceof RateLimited && error.retryAfterMs !== undefined) {
      wait = error.retryAfterMs * uniform(1.0, 1.1);
    } else if (error.reason === "TOO_MANY_UPLOADS" && error.retryAfterMs !== undefined) {
      wait = error.retryAfterMs * uniform(1.0, 1.5);
    } else if (error instanceof TLSError) {
      return undefined;
    } else if (error instanceof Unavailable || error.reason === "TOO_MANY_UPLOADS") {
      if (attempt + 1 >= this.attempts) return undefined;
      wait = this.backoff(attempt);
    } else {
      return undefined;
    }
    return wait < remainingMs ? wait : undefined;
  }
}

/** The pace of one client's calls: all wait while the server has said to (RetryInfo), and once it
 * has reported its limit, calls start no faster than PACE_FRACTION of it. `rate` (calls a second)
 * sets a pace from the start; undefined waits to be told. */
export class Pacer {
  private interval: number;
  private holdUntil = 0;
  private nextStart = 0;

  constructor(rate?: number, private readonly clock: () => number = () => performance.now()) {
    this.interval = rate ? 1000 / rate : 0;
  }

  /** Calls a second this client allows itself, undefined while unpaced. */
  get rate(): number | undefined {
    return this.interval ? 1000 / this.interval : undefined;
  }

  /** The milliseconds to wait before starting a call (its start is booked). */
  reserve(): number {
    const now = this.clock();
    if (!this.interval && this.holdUntil <= now) return 0; // nobody has been refused
    const start = Math.max(now, this.holdUntil, this.nextStart);
    if (this.interval) this.nextStart = start + this.interval;
    return start - now;
  }

  /** The server refused a call: hold every call back for its delay, and pace at the reported limit. */
  refused(error: RateLimited): void {
    if (error.retryAfterMs) this.holdUntil = Math.max(this.holdUntil, this.clock() + error.retryAfterMs);
    const limit = Number.parseFloat(error.metadata.limit_per_second ?? "0");
    if (Number.isFinite(limit) && limit > 0) {
      this.interval = Math.max(this.interval, 1000 / (limit * PACE_FRACTION));
    }
  }
}

function uniform(low: number, high: number): number {
  return low + Math.random() * (high - low);
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (ms <= 0) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}
