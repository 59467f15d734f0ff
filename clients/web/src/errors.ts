// Typed errors of the client: every failure an app can act on has a `code`.

export type ErrorCode =
  | "signaling" // the server answered a signaling request with an unexpected status
  | "network" // a signaling request did not reach the server, or got no answer in time
  | "unauthorized" // 401: missing or wrong token
  | "busy" // 429 / 503: the server is at capacity or rate-limits (or the resume send queue is full); retry later
  | "not_found" // 404: the session is gone
  | "resume_expired" // resume answered 401 and the credential's `exp` has passed
  | "resume_invalid" // resume answered 401: the credential is forged or malformed
  | "resume_refused" // resume answered 409: the credential was used already
  | "call_gone" // resume answered 410: no backend serves the call any more
  | "closed"; // the call has ended

export class VoxgateError extends Error {
  readonly code: ErrorCode;
  /** The HTTP status, when the error is a signaling answer. */
  readonly status?: number;
  /** For `busy`: how long the server asked to wait (`Retry-After`), in milliseconds. */
  readonly retryAfterMs?: number;
  constructor(code: ErrorCode, message: string, status?: number, retryAfterMs?: number) {
    super(message);
    this.name = "VoxgateError";
    this.code = code;
    this.status = status;
    this.retryAfterMs = retryAfterMs;
  }
}

/** The error a signaling answer with status `status` means. */
export function errorForStatus(
  status: number,
  what: string,
  body: string,
  retryAfterMs?: number,
): VoxgateError {
  const detail = `${what} answered ${status}: ${body.trim().slice(0, 200)}`;
  if (status === 401 || status === 403) return new VoxgateError("unauthorized", detail, status);
  if (status === 404 || status === 410) return new VoxgateError("not_found", detail, status);
  if (status === 429 || status === 503) return new VoxgateError("busy", detail, status, retryAfterMs);
  return new VoxgateError("signaling", detail, status);
}
