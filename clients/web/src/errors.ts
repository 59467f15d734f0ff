// Typed errors of the client: every failure an app can act on has a `code`.

export type ErrorCode =
  | "signaling" // the server answered a signaling request with an unexpected status
  | "network" // a signaling request did not reach the server
  | "unauthorized" // 401: missing or wrong token
  | "busy" // 429 / 503: the server is at capacity or rate-limits; retry later
  | "not_found" // 404: the session is gone
  | "closed"; // the call has ended

export class VoxgateError extends Error {
  readonly code: ErrorCode;
  /** The HTTP status, when the error is a signaling answer. */
  readonly status?: number;
  constructor(code: ErrorCode, message: string, status?: number) {
    super(message);
    this.name = "VoxgateError";
    this.code = code;
    this.status = status;
  }
}

/** The error a signaling answer with status `status` means. */
export function errorForStatus(status: number, what: string, body: string): VoxgateError {
  const detail = `${what} answered ${status}: ${body.trim().slice(0, 200)}`;
  if (status === 401 || status === 403) return new VoxgateError("unauthorized", detail, status);
  if (status === 404 || status === 410) return new VoxgateError("not_found", detail, status);
  if (status === 429 || status === 503) return new VoxgateError("busy", detail, status);
  return new VoxgateError("signaling", detail, status);
}
