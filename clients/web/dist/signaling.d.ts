export type Fetch = (input: string, init: RequestInit) => Promise<Response>;
export interface SignalingOptions {
    /** Bearer token (a static token or a per-call token minted by the app). */
    token?: string;
    /** Metadata for the backend: sent as query parameters of the POST. */
    metadata?: Record<string, string>;
    fetch?: Fetch;
    /** How long a PATCH, GET, DELETE or credential refresh may wait for its answer (5000 ms). */
    requestTimeoutMs?: number;
}
export declare const DEFAULT_REQUEST_TIMEOUT_MS = 5000;
export interface Created {
    /** Absolute URL of the session resource. */
    location: string;
    answer: string;
    iceServers: RTCIceServer[];
    /** The answer's resume credential, when the server sent one. */
    resume: ResumeCredential | null;
}
/** A resume credential (`vr1....`) and how long it is valid from when it arrived. */
export interface ResumeCredential {
    credential: string;
    ttlSecs: number;
}
/** The resume credential of an answer's headers, or null when it carries none. */
export declare function parseResumeHeaders(headers: Headers): ResumeCredential | null;
/** The call generation a credential names (`g`), or null when unreadable. */
export declare function credentialGeneration(credential: string): number | null;
/** When a credential expires (`exp`, Unix seconds), or null when unreadable. */
export declare function credentialExpiry(credential: string): number | null;
/**
 * Whether `next` may replace `held`: not when it names an older generation of the call (a late
 * answer of the session a resume replaced; resuming with it would be refused as stale).
 */
export declare function supersedes(next: ResumeCredential, held: ResumeCredential | null): boolean;
/**
 * `Retry-After` in milliseconds (delay-seconds or an HTTP date, RFC 9110 section 10.2.3), or
 * undefined when absent or unreadable.
 */
export declare function parseRetryAfter(value: string | null, now?: number): number | undefined;
/** The session id: the last path segment of its Location. */
export declare function sessionIdOf(location: string): string;
/** The POST endpoint for a signaling base URL (`https://host` or `https://host/v1/sessions`). */
export declare function sessionsUrl(base: string, metadata?: Record<string, string>): string;
/**
 * ICE servers from `Link` header values, e.g.
 * `<turn:turn.example.net?transport=udp>; rel="ice-server"; username="u"; credential="p"`.
 * Entries without `rel="ice-server"` are ignored.
 */
export declare function parseLinkIceServers(values: string[]): RTCIceServer[];
export declare class Signaling {
    private readonly opts;
    private readonly fetch;
    /** The POST endpoint of `create` (a resume goes there too, not to a Location). */
    private endpoint;
    private latest;
    constructor(opts?: SignalingOptions);
    /** The latest resume credential the server sent, or null before the first (or from an old server). */
    get credential(): ResumeCredential | null;
    private headers;
    /** Keeps the answer's credential, if it carries one that is not older than the one held. */
    private remember;
    /** Fetches with a deadline (`null`: none); no answer in time is a `network` error. */
    private send;
    /** POSTs the offer; the answer, the session's absolute Location and any ICE servers. */
    create(base: string, offer: string): Promise<Created>;
    private created;
    /**
     * Resumes the call on a new session: POSTs a new offer (of a new RTCPeerConnection) with the
     * credential as bearer to the endpoint `create` used. 201 → the new session; 401 →
     * `resume_expired` (the credential's `exp` has passed by this clock, or the answer says
     * "expired") or `resume_invalid`, 409 → `resume_refused`, 410 → `call_gone` (final); 429/503
     * → `busy` with `retryAfterMs`, other 5xx → `signaling`, a fetch that throws or gets no answer
     * within `timeoutMs` (default: none) → `network` (worth retrying).
     */
    resume(offer: string, credential?: string | undefined, timeoutMs?: number | null): Promise<Created>;
    /** Renews the resume credential (`GET {location}/resume`); the new one. */
    refreshResume(location: string): Promise<ResumeCredential>;
    /** ICE restart: PATCHes a new offer to the session; the answer. 404 → `not_found`. */
    restart(location: string, offer: string): Promise<string>;
    /** Ends the session (best effort: a session already gone is not an error). */
    hangup(location: string): Promise<number>;
    /**
     * The liveness probe (liveness.ts): `GET` on the Location with its own short deadline; the
     * status (the body is not read). No answer in `timeoutMs`, or none at all → `network`.
     */
    probe(location: string, timeoutMs: number): Promise<number>;
    /** The server's view of the session (`GET` on the Location), as parsed JSON. */
    session(location: string): Promise<unknown>;
}
