export type ErrorCode = "signaling" | "network" | "unauthorized" | "busy" | "not_found" | "resume_expired" | "resume_invalid" | "resume_refused" | "call_gone" | "closed";
export declare class VoxgateError extends Error {
    readonly code: ErrorCode;
    /** The HTTP status, when the error is a signaling answer. */
    readonly status?: number;
    /** For `busy`: how long the server asked to wait (`Retry-After`), in milliseconds. */
    readonly retryAfterMs?: number;
    constructor(code: ErrorCode, message: string, status?: number, retryAfterMs?: number);
}
/** The error a signaling answer with status `status` means. */
export declare function errorForStatus(status: number, what: string, body: string, retryAfterMs?: number): VoxgateError;
