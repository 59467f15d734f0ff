// When to renew the resume credential: every third of its lifetime, never more often than every
// 5 s (docs/continuity.md). Sans-IO: a credential's arrival and a failed refresh go in, the time
// of the next refresh comes out; the call owns the timer and refreshes only while connected.

export const MIN_REFRESH_MS = 5000;
/** The server's default lifetime, assumed when an answer names none. */
export const DEFAULT_RESUME_TTL_SECS = 120;

/** How long after a credential with lifetime `ttlSecs` arrived the next refresh is due. */
export function refreshIntervalMs(ttlSecs: number): number {
  const ttl = ttlSecs > 0 ? ttlSecs : DEFAULT_RESUME_TTL_SECS;
  return Math.max(MIN_REFRESH_MS, (ttl * 1000) / 3);
}

export class RefreshSchedule {
  private at: number | null = null;
  private interval = refreshIntervalMs(0);
  private stopped = false;

  /** A credential arrived at `now` (a 201, a 200 to PATCH, or a refresh). */
  onCredential(now: number, ttlSecs: number): void {
    this.interval = refreshIntervalMs(ttlSecs);
    if (!this.stopped) this.at = now + this.interval;
  }

  /** A refresh failed: the next tick tries again (the credential in hand is still valid). */
  onRefreshFailed(now: number): void {
    if (!this.stopped) this.at = now + this.interval;
  }

  /** When the next refresh is due; null before the first credential and after `stop`. */
  get nextAt(): number | null {
    return this.at;
  }

  /** The call ended: nothing is due any more. */
  stop(): void {
    this.stopped = true;
    this.at = null;
  }
}
