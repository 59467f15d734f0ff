export type Fetch = (input: string, init: RequestInit) => Promise<Response>;
export interface SignalingOptions {
    /** Bearer token (a static token or a per-call token minted by the app). */
    token?: string;
    /** Metadata for the backend: sent as query parameters of the POST. */
    metadata?: Record<string, string>;
    fetch?: Fetch;
}
export interface Created {
    /** Absolute URL of the session resource. */
    location: string;
    answer: string;
    iceServers: RTCIceServer[];
}
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
    constructor(opts?: SignalingOptions);
    private headers;
    private send;
    /** POSTs the offer; the answer, the session's absolute Location and any ICE servers. */
    create(base: string, offer: string): Promise<Created>;
    /** ICE restart: PATCHes a new offer to the session; the answer. 404 → `not_found`. */
    restart(location: string, offer: string): Promise<string>;
    /** Ends the session (best effort: a session already gone is not an error). */
    hangup(location: string): Promise<number>;
    /** The server's view of the session (`GET` on the Location), as parsed JSON. */
    session(location: string): Promise<unknown>;
}
