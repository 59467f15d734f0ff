export type ErrorCode = "signaling" | "network" | "unauthorized" | "busy" | "not_found" | "closed";
export declare class VoxgateError extends Error {
    readonly code: ErrorCode;
    /** The HTTP status, when the error is a signaling answer. */
    readonly status?: number;
    constructor(code: ErrorCode, message: string, status?: number);
}
/** The error a signaling answer with status `status` means. */
export declare function errorForStatus(status: number, what: string, body: string): VoxgateError;
