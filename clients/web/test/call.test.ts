// The Call's resume path against fake WebRTC objects (no browser): the swap of connections, the
// same remoteStream, messages held while resuming, hang-up during a resume, the credential
// refresh on its timer, the liveness watchdog's probe of a silent connection. Headless Chromium runs the real thing (transceiver/tests/web_continuity.rs).

import { afterEach, describe, expect, it, vi } from "vitest";
import { Call, type Peer, type Resumed } from "../src/call";
import type { LivenessOptions } from "../src/liveness";
import { Signaling } from "../src/signaling";
import type { CallState, EndReason } from "../src/state";

class FakeTrack {
  kind = "audio";
  enabled = true;
  constructor(readonly id: string) {}
}

class FakeStream {
  private tracks: FakeTrack[] = [];
  addTrack(t: FakeTrack) {
    this.tracks.push(t);
  }
  removeTrack(t: FakeTrack) {
    this.tracks = this.tracks.filter((x) => x !== t);
  }
  getTracks() {
    return [...this.tracks];
  }
  getAudioTracks() {
    return this.getTracks();
  }
}
(globalThis as { MediaStream?: unknown }).MediaStream = FakeStream;

class FakeChannel extends EventTarget {
  readyState: RTCDataChannelState = "connecting";
  sent: string[] = [];
  send(text: string) {
    if (this.readyState !== "open") throw new Error(`channel ${this.readyState}`);
    this.sent.push(text);
  }
  close() {
    this.readyState = "closed";
  }
  open() {
    this.readyState = "open";
    this.dispatchEvent(new Event("open"));
  }
  receive(message: object) {
    this.dispatchEvent(new MessageEvent("message", { data: JSON.stringify(message) }));
  }
}

class FakePc extends EventTarget {
  iceConnectionState: RTCIceConnectionState = "new";
  iceGatheringState: RTCIceGatheringState = "complete";
  signalingState: RTCSignalingState = "stable";
  localDescription: { type: string; sdp: string } | null = null;
  remoteSdp: string | null = null;
  closed = false;
  /** What the connection has received (a transport stat in getStats), or null: no counter. */
  received: (() => number) | null = null;
  private config: RTCConfiguration = { iceServers: [] };
  constructor(
    readonly name: string,
    readonly channel: FakeChannel,
    /** Whether ICE connects (and the channel opens) once an answer is applied. */
    public connects = true,
  ) {
    super();
  }
  getConfiguration() {
    return this.config;
  }
  setConfiguration(c: RTCConfiguration) {
    this.config = c;
  }
  restartIce() {}
  async createOffer(o?: RTCOfferOptions) {
    return { type: "offer", sdp: `offer of ${this.name}${o?.iceRestart ? " (restart)" : ""}` };
  }
  async setLocalDescription(d: { type: string; sdp?: string }) {
    if (d.type === "rollback") {
      this.signalingState = "stable";
      return;
    }
    this.localDescription = { type: d.type, sdp: d.sdp ?? "" };
    this.signalingState = "have-local-offer";
  }
  async setRemoteDescription(d: { sdp: string }) {
    this.remoteSdp = d.sdp;
    this.signalingState = "stable";
    const e = new Event("track") as Event & { track: FakeTrack };
    e.track = new FakeTrack(`remote of ${this.name}`);
    this.dispatchEvent(e);
    if (this.connects) {
      queueMicrotask(() => {
        this.ice("connected");
        this.channel.open();
      });
    }
  }
  ice(state: RTCIceConnectionState) {
    this.iceConnectionState = state;
    this.dispatchEvent(new Event("iceconnectionstatechange"));
  }
  async getStats() {
    const stats: Array<Record<string, unknown>> = [
      { id: "o", type: "outbound-rtp", kind: "audio", packetsSent: this.name === "pc1" ? 500 : 7 },
    ];
    if (this.received) stats.push({ id: "T", type: "transport", bytesReceived: this.received() });
    return { values: () => stats.values() };
  }
  close() {
    this.closed = true;
    this.iceConnectionState = "closed";
  }
}

function cred(g: number, exp = 9e9): string {
  const payload = Buffer.from(JSON.stringify({ c: "call1", g, s: "s", w: "", o: "a", exp })).toString("base64url");
  return `vr1.${payload}.mac`;
}

type Answer = [number, string, Record<string, string>?];
interface Seen {
  url: string;
  method: string;
  auth: string | undefined;
  body: unknown;
}

/** A fetch answering each request with the next answer; a function answer may wait on a gate. */
function scripted(answers: Array<Answer | (() => Promise<Answer>)>) {
  const seen: Seen[] = [];
  const fetch = async (url: string, init: RequestInit) => {
    const headers = (init.headers ?? {}) as Record<string, string>;
    seen.push({ url, method: String(init.method), auth: headers["Authorization"], body: init.body });
    const next = answers.shift();
    if (!next) throw new TypeError("no more answers");
    // As a browser's fetch: an aborted request rejects, whatever the server does.
    const aborted = new Promise<never>((_, reject) =>
      init.signal?.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError"))),
    );
    const [status, body, h] = typeof next === "function" ? await Promise.race([next(), aborted]) : next;
    return new Response(status === 204 ? null : body, { status, headers: h ?? {} });
  };
  return { fetch, seen };
}

function gate(): { open: (a: Answer) => void; answer: () => Promise<Answer> } {
  let open: (a: Answer) => void = () => {};
  const p = new Promise<Answer>((r) => (open = r));
  return { open, answer: () => p };
}

const created = (id: string, credential: string): Answer => [
  201,
  `answer for ${id}`,
  { Location: `/v1/sessions/${id}`, "X-Voxgate-Resume": credential, "X-Voxgate-Resume-Ttl": "120" },
];

function rig(answers: Array<Answer | (() => Promise<Answer>)>, liveness?: Partial<LivenessOptions> | false) {
  const f = scripted(answers);
  const peers: FakePc[] = [];
  const make = (): Peer => {
    const channel = new FakeChannel();
    const pc = new FakePc(`pc${peers.length + 1}`, channel);
    peers.push(pc);
    return { pc: pc as unknown as RTCPeerConnection, channel: channel as unknown as RTCDataChannel };
  };
  const first = make();
  const call = new Call({
    ...first,
    newPeer: make,
    signaling: new Signaling({ token: "tok", fetch: f.fetch }),
    micStream: new FakeStream() as unknown as MediaStream,
    reconnect: { backoffMs: 10, maxBackoffMs: 20 },
    liveness,
    gatherTimeoutMs: 10,
  });
  const states: CallState[] = [];
  const resumed: Resumed[] = [];
  const ended: EndReason[] = [];
  call.on("state", (s) => states.push(s));
  call.on("resumed", (r) => resumed.push(r));
  call.on("ended", (r) => ended.push(r));
  return { call, f, peers, states, resumed, ended };
}

/** Lets promises and timers run until `done()` holds (within about `ms`). */
async function until(done: () => boolean, what: string, ms = 200): Promise<void> {
  for (let i = 0; i < ms && !done(); i++) await new Promise((r) => setTimeout(r, 1));
  if (!done()) throw new Error(`timed out waiting for ${what}`);
}

afterEach(() => {
  vi.useRealTimers();
});

describe("Call resume", () => {
  it("a PATCH answered 404 resumes on a new connection: same remoteStream, new session id, old one closed", async () => {
    const r = rig([created("s1", cred(1)), [404, "gone"], created("s2", cred(2))]);
    await r.call.start("http://lb", 1000);
    const stream = r.call.remoteStream;
    expect(stream.getTracks().map((t) => t.id)).toEqual(["remote of pc1"]);

    r.peers[0].ice("failed");
    await until(() => r.resumed.length === 1, "resumed");

    expect(r.f.seen.map((s) => `${s.method} ${s.url}`)).toEqual([
      "POST http://lb/v1/sessions",
      "PATCH http://lb/v1/sessions/s1",
      "POST http://lb/v1/sessions",
    ]);
    expect(r.f.seen[1].auth).toBe(`Bearer ${cred(1)}`);
    expect(r.f.seen[2].auth).toBe(`Bearer ${cred(1)}`);
    expect(r.f.seen[2].body).toBe("offer of pc2");
    expect(r.resumed[0]).toMatchObject({ sessionId: "s2", previousSessionId: "s1" });
    expect(r.resumed[0].gapMs).toBeGreaterThanOrEqual(0);
    expect(r.states).toEqual(["connected", "reconnecting", "connected"]);
    expect(r.call.sessionId).toBe("s2");
    expect(r.call.remoteStream).toBe(stream);
    expect(stream.getTracks().map((t) => t.id)).toEqual(["remote of pc2"]);
    expect(r.peers[0].closed).toBe(true);
    expect((await r.call.stats()).packetsSent).toBe(7); // the new connection's counters

    // The old connection no longer speaks for the call.
    r.peers[0].channel.receive({ type: "session.ended", reason: "resumed" });
    r.peers[0].ice("failed");
    expect(r.call.state).toBe("connected");
    r.call.send({ hello: 1 });
    expect(r.peers[1].channel.sent).toEqual(['{"hello":1}']);
    expect(r.peers[0].channel.sent).toEqual([]);
  });

  it("session.migrate resumes at once; sends while resuming wait and go out first on the new channel", async () => {
    const post = gate();
    const r = rig([created("s1", cred(1)), post.answer]);
    await r.call.start("http://lb", 1000);
    r.call.on("state", (s) => s === "connected" && r.call.send("after"));

    r.peers[0].channel.receive({ type: "session.migrate" });
    await until(() => r.f.seen.length === 2, "the resume POST");
    expect(r.call.state).toBe("reconnecting");
    r.call.send({ n: 1 });
    r.call.send("two");
    // A draining transceiver's goodbye during the resume ends nothing.
    r.peers[0].channel.receive({ type: "session.ended", reason: "shutdown" });
    expect(r.peers[0].channel.sent).toEqual([]);

    post.open(created("s2", cred(2)));
    await until(() => r.resumed.length === 1, "resumed");
    expect(r.peers[1].channel.sent).toEqual(['{"n":1}', "two", "after"]);
    expect(r.ended).toEqual([]);
  });

  it("hangup during a resume DELETEs the old session and the one the resume POST made", async () => {
    const post = gate();
    const r = rig([created("s1", cred(1)), post.answer, [204, ""], [204, ""]]);
    await r.call.start("http://lb", 1000);
    r.peers[0].channel.receive({ type: "session.migrate" });
    await until(() => r.f.seen.length === 2, "the resume POST");

    await r.call.hangup();
    expect(r.ended).toEqual(["hangup"]);
    post.open(created("s2", cred(2)));
    await until(() => r.f.seen.length === 4, "the second DELETE");
    expect(r.f.seen.slice(2).map((s) => `${s.method} ${s.url}`)).toEqual([
      "DELETE http://lb/v1/sessions/s1",
      "DELETE http://lb/v1/sessions/s2",
    ]);
    expect(r.peers[1].closed).toBe(true);
    expect(r.resumed).toEqual([]);
    expect(() => r.call.send("x")).toThrow();
  });

  it("a final refusal ends the call with its reason: 409 resume_refused, 401 with an expired credential resume_expired", async () => {
    const a = rig([created("s1", cred(1)), [409, "used already"]]);
    await a.call.start("http://lb", 1000);
    a.peers[0].channel.receive({ type: "session.migrate" });
    await until(() => a.ended.length === 1, "the end");
    expect(a.ended).toEqual(["resume_refused"]);

    const b = rig([created("s1", cred(1, 1000)), [401, "missing or invalid bearer token"]]);
    await b.call.start("http://lb", 1000);
    b.peers[0].channel.receive({ type: "session.migrate" });
    await until(() => b.ended.length === 1, "the end");
    expect(b.ended).toEqual(["resume_expired"]);
  });

  it("retryable refusals are tried again with the newest credential; a server without credentials cannot resume", async () => {
    const r = rig([created("s1", cred(1)), [503, "no backend", { "Retry-After": "0" }], created("s2", cred(2))]);
    await r.call.start("http://lb", 1000);
    r.peers[0].channel.receive({ type: "session.migrate" });
    await until(() => r.resumed.length === 1, "resumed");
    expect(r.f.seen.filter((s) => s.method === "POST")).toHaveLength(3);

    const old = rig([[201, "answer", { Location: "/v1/sessions/s1" }], [404, "gone"]]);
    await old.call.start("http://lb", 1000);
    old.peers[0].channel.receive({ type: "session.migrate" }); // ignored: nothing to resume with
    expect(old.call.state).toBe("connected");
    old.peers[0].ice("failed");
    await until(() => old.ended.length === 1, "the end");
    expect(old.ended).toEqual(["lost"]);
  });
});

describe("Call credential refresh", () => {
  it("refreshes every third of the TTL while connected; a failure ends nothing and is retried", async () => {
    vi.useFakeTimers();
    const r = rig([
      created("s1", cred(1)),
      [503, "busy"],
      [200, cred(1) + "x", { "X-Voxgate-Resume": cred(1) + "x", "X-Voxgate-Resume-Ttl": "30" }],
      [200, cred(1) + "y", { "X-Voxgate-Resume": cred(1) + "y", "X-Voxgate-Resume-Ttl": "30" }],
      [204, ""],
    ]);
    const started = r.call.start("http://lb", 1000);
    await vi.advanceTimersByTimeAsync(0);
    await started;

    await vi.advanceTimersByTimeAsync(39_999);
    expect(r.f.seen).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(r.f.seen[1]).toMatchObject({ method: "GET", url: "http://lb/v1/sessions/s1/resume" });
    expect(r.call.state).toBe("connected");
    await vi.advanceTimersByTimeAsync(40_000); // the failed one, a tick later
    expect(r.f.seen).toHaveLength(3);
    expect(r.f.seen[2].auth).toBe(`Bearer ${cred(1)}`);
    await vi.advanceTimersByTimeAsync(10_000); // TTL 30 s now: every 10 s
    expect(r.f.seen).toHaveLength(4);
    expect(r.f.seen[3].auth).toBe(`Bearer ${cred(1)}x`);

    await r.call.hangup();
    expect(r.f.seen[4]).toMatchObject({ method: "DELETE", auth: `Bearer ${cred(1)}y` });
    await vi.advanceTimersByTimeAsync(120_000);
    expect(r.f.seen).toHaveLength(5);
  });
});

describe("Call liveness", () => {
  const fast = { livenessPollMs: 10, livenessMs: 60, probeTimeoutMs: 50 };
  /** A counter that grows while `alive()` holds. */
  const traffic = (alive: () => boolean) => {
    let n = 0;
    return () => (alive() ? ++n : n);
  };

  it("a connection gone silent is probed; 404 resumes at once, before ICE says anything", async () => {
    let dead = false;
    const r = rig([created("s1", cred(1)), [404, "no such session"], created("s2", cred(2))], fast);
    r.peers[0].received = traffic(() => !dead);
    await r.call.start("http://lb", 1000);
    await new Promise((res) => setTimeout(res, 100));
    expect(r.f.seen).toHaveLength(1); // traffic: no probe

    dead = true;
    const diedAt = Date.now();
    await until(() => r.resumed.length === 1, "resumed", 2000);
    expect(r.f.seen.map((x) => `${x.method} ${x.url}`)).toEqual([
      "POST http://lb/v1/sessions",
      "GET http://lb/v1/sessions/s1",
      "POST http://lb/v1/sessions",
    ]);
    expect(r.f.seen[1].auth).toBe(`Bearer ${cred(1)}`);
    expect(r.peers[0].iceConnectionState).toBe("closed"); // never disconnected: closed by the swap
    expect(r.states).toEqual(["connected", "reconnecting", "connected"]);
    // The gap counts from the last traffic seen, not from the probe's answer.
    expect(r.resumed[0].gapMs).toBeGreaterThanOrEqual(Date.now() - diedAt - 30);
  });

  it("a probe that gets no answer resumes too", async () => {
    let dead = false;
    const hang = () => new Promise<Answer>(() => {});
    const r = rig([created("s1", cred(1)), hang, created("s2", cred(2))], fast);
    r.peers[0].received = traffic(() => !dead);
    await r.call.start("http://lb", 1000);
    dead = true;
    await until(() => r.resumed.length === 1, "resumed", 2000);
    expect(r.f.seen.map((x) => x.method)).toEqual(["POST", "GET", "POST"]);
  });

  it("200 (the session lives, our path does not) restarts ICE at once; reconnecting until traffic comes again", async () => {
    let dead = false;
    const r = rig(
      [created("s1", cred(1)), [200, "{}"], [200, "answer 2", { "X-Voxgate-Resume": cred(1) }]],
      fast,
    );
    r.peers[0].received = traffic(() => !dead);
    await r.call.start("http://lb", 1000);
    r.peers[0].connects = false; // ICE stays `connected` throughout: no state event comes
    dead = true;
    await until(() => r.f.seen.length === 3, "the PATCH", 2000);
    expect(r.f.seen.map((x) => `${x.method} ${x.url}`)).toEqual([
      "POST http://lb/v1/sessions",
      "GET http://lb/v1/sessions/s1",
      "PATCH http://lb/v1/sessions/s1",
    ]);
    expect(r.f.seen[2].body).toBe("offer of pc1 (restart)");
    await until(() => r.peers[0].remoteSdp === "answer 2", "the answer applied", 2000);
    await new Promise((res) => setTimeout(res, 30));
    expect(r.call.state).toBe("reconnecting"); // the answer is in, but nothing arrives yet
    dead = false; // the new path carries media
    await until(() => r.call.state === "connected", "connected again", 2000);
    await new Promise((res) => setTimeout(res, 200));
    expect(r.f.seen).toHaveLength(3);
    expect(r.states).toEqual(["connected", "reconnecting", "connected"]);
    expect(r.resumed).toEqual([]);
    expect(r.ended).toEqual([]);
  });

  it("liveness: false never probes, however silent", async () => {
    const r = rig([created("s1", cred(1))], false);
    r.peers[0].received = () => 5;
    await r.call.start("http://lb", 1000);
    await new Promise((res) => setTimeout(res, 300));
    expect(r.f.seen).toHaveLength(1);
    expect(r.call.state).toBe("connected");
  });

  it("hangup stops the watchdog", async () => {
    const r = rig([created("s1", cred(1)), [204, ""]], fast);
    r.peers[0].received = () => 5;
    await r.call.start("http://lb", 1000);
    await r.call.hangup();
    await new Promise((res) => setTimeout(res, 300));
    expect(r.f.seen.map((x) => x.method)).toEqual(["POST", "DELETE"]);
  });
});
