// Turn timing: the detector on scripted 10 ms level samples (a fake clock), the report and the
// split's validation, the receive-delay deltas, and a Call reporting on its `voxgate.turns`
// channel against fake WebRTC objects (headless Chromium runs the real analysers).

import { describe, expect, it, vi } from "vitest";
import { Call, type Peer } from "../src/call";
import type { LevelTapFactory } from "../src/turn_timing";
import { Signaling } from "../src/signaling";
import {
  ReceiveDelays,
  TURNS_LABEL,
  TurnDetector,
  levelDbfs,
  parseTurnLatency,
  reportMessage,
  turnReportOf,
  type HeardTurn,
  type TurnLatency,
  type TurnReport,
} from "../src/turns";

const LOUD = -20;
const QUIET = -80;
/** Loud inside any of the [from, to) ranges (ms), quiet elsewhere. */
const loudIn =
  (...ranges: Array<[number, number]>) =>
  (t: number) =>
    ranges.some(([a, b]) => t >= a && t < b) ? LOUD : QUIET;

/** Feeds mic and remote samples every 10 ms from 0 to `until`; returns the turns and when. */
function run(
  mic: (t: number) => number,
  remote: (t: number) => number,
  until: number,
  rtp: (t: number) => number | null = () => null,
  d = new TurnDetector(),
): Array<HeardTurn & { at: number }> {
  const out: Array<HeardTurn & { at: number }> = [];
  for (let t = 0; t < until; t += 10) {
    const a = d.mic(t, mic(t));
    const b = d.remote(t, remote(t), rtp(t));
    for (const x of [a, b]) if (x) out.push({ ...x, at: t });
  }
  return out;
}

describe("TurnDetector", () => {
  it("a clean turn: end of speech at the last voiced sample, heard at the reply's first loud one", () => {
    const turns = run(loudIn([0, 1000]), loudIn([1600, 2500]), 4000);
    expect(turns).toEqual([{ speechEndAt: 990, heardAt: 1600, speechEndToHeardMs: 610, rtpTimestamp: null, at: 1600 }]);
  });

  it("a reply of several sentences is one turn; the next spurt makes the next", () => {
    const turns = run(loudIn([0, 1000], [4000, 4500]), loudIn([1600, 2000], [2300, 2600], [5000, 5200]), 6000);
    expect(turns.map((t) => [t.speechEndAt, t.heardAt])).toEqual([
      [990, 1600],
      [4490, 5000],
    ]);
  });

  it("an echo of the caller's tail right after the end of speech is not the reply's onset", () => {
    // The echo runs 60 ms past the end, pauses 70 ms (under the 100 ms of quiet), comes back.
    const turns = run(loudIn([0, 1000]), loudIn([200, 1050], [1120, 1160], [1700, 2000]), 3000);
    expect(turns.map((t) => t.heardAt)).toEqual([1700]);
    expect(turns[0].speechEndAt).toBe(990);
  });

  it("a reply overlapping the speech counts only after 100 ms of quiet", () => {
    // Loud samples 90 ms apart (80 ms of quiet samples between) are one stretch of sound.
    const turns = run(loudIn([0, 1000]), loudIn([500, 1300], [1380, 1500], [1580, 1700]), 2500);
    expect(turns).toEqual([]);
    const later = run(loudIn([0, 1000]), loudIn([500, 1300], [1390, 1600]), 2500);
    expect(later.map((t) => t.heardAt)).toEqual([1390]);
  });

  it("the caller resuming within the hangover cancels the pending turn and speech goes on", () => {
    // A 200 ms pause with a loud remote sample in it (an onset found), then more speech.
    const turns = run(loudIn([0, 1000], [1200, 2000]), loudIn([1150, 1190], [2600, 3000]), 4000);
    expect(turns.map((t) => [t.speechEndAt, t.heardAt])).toEqual([[1990, 2600]]);
  });

  it("a new spurt after the end was confirmed but before the reply cancels the turn", () => {
    const turns = run(loudIn([0, 1000], [1500, 1700]), loudIn([2300, 2600]), 3500);
    expect(turns.map((t) => [t.speechEndAt, t.heardAt])).toEqual([[1690, 2300]]);
  });

  it("a blip under 100 ms is no spurt, and after a confirmed end it cancels nothing", () => {
    expect(run(loudIn([0, 80]), loudIn([600, 900]), 1500)).toEqual([]);
    const turns = run(loudIn([0, 1000], [1400, 1450]), loudIn([1900, 2200]), 3000);
    expect(turns.map((t) => [t.speechEndAt, t.heardAt])).toEqual([[990, 1900]]);
  });

  it("a reply heard within the hangover counts once the end is confirmed", () => {
    const turns = run(loudIn([0, 1000]), loudIn([1100, 1500]), 2000);
    // Heard 110 ms after the end; reported at the 250 ms of quiet, from a mic sample.
    expect(turns).toEqual([{ speechEndAt: 990, heardAt: 1100, speechEndToHeardMs: 110, rtpTimestamp: null, at: 1240 }]);
  });

  it("passes the onset's RTP timestamp through, and watches only between the end and the onset", () => {
    const d = new TurnDetector();
    expect(d.watching).toBe(false);
    const turns = run(loudIn([0, 1000]), loudIn([1600, 2000]), 1600, (t) => 48 * t + 7, d);
    expect(turns).toEqual([]);
    expect(d.watching).toBe(true);
    expect(d.remote(1600, LOUD, 4_294_967_295)).toMatchObject({ rtpTimestamp: 4_294_967_295, speechEndToHeardMs: 610 });
    expect(d.watching).toBe(false);
  });

  it("a late timer tick counts for at most 20 ms of voice", () => {
    const d = new TurnDetector();
    // Three voiced samples 100 ms apart: 10 + 20 + 20 ms, no spurt.
    for (const t of [0, 100, 200]) d.mic(t, LOUD);
    for (let t = 210; t < 600; t += 10) d.mic(t, QUIET);
    expect(d.watching).toBe(false);
  });
});

describe("levelDbfs", () => {
  it("is the RMS in dBFS", () => {
    expect(levelDbfs(new Float32Array(512).fill(0.5))).toBeCloseTo(-6.02, 2);
    expect(levelDbfs(new Float32Array(512))).toBe(-Infinity);
  });
});

describe("turn.report", () => {
  it("rounds to 0.1 ms and says null where unknown, in the wire's field order", () => {
    const r = turnReportOf(
      { speechEndAt: 0, heardAt: 612.345, speechEndToHeardMs: 612.345, rtpTimestamp: 123456 },
      { jitterBufferMs: 41.26, playoutMs: null, rttMs: 2.04 },
    );
    expect(reportMessage(r)).toBe(
      '{"type":"turn.report","speech_end_to_heard_ms":612.3,"rtp_timestamp":123456,' +
        '"jitter_buffer_ms":41.3,"playout_ms":null,"rtt_ms":2}',
    );
    const odd = turnReportOf(
      { speechEndAt: 0, heardAt: 1, speechEndToHeardMs: 1, rtpTimestamp: 2 ** 32 },
      { jitterBufferMs: NaN, playoutMs: -1, rttMs: Infinity },
    );
    expect(odd).toMatchObject({ rtpTimestamp: null, jitterBufferMs: null, playoutMs: null, rttMs: null });
  });

  it("receive delays are the means since the previous report", () => {
    const d = new ReceiveDelays();
    const stats = (jb: number, emitted: number, playout: number | null, samples: number) => [
      { id: "I", type: "inbound-rtp", kind: "audio", jitterBufferDelay: jb, jitterBufferEmittedCount: emitted, playoutId: "AP" },
      ...(playout === null
        ? []
        : [{ id: "AP", type: "media-playout", kind: "audio", totalPlayoutDelay: playout, totalSamplesCount: samples }]),
      { id: "T", type: "transport", selectedCandidatePairId: "P" },
      { id: "P", type: "candidate-pair", currentRoundTripTime: 0.012 },
    ];
    const first = d.take(stats(48, 960, 960, 48_000));
    expect(first.jitterBufferMs).toBeCloseTo(50, 9);
    expect(first.playoutMs).toBeCloseTo(20, 9);
    expect(first.rttMs).toBe(12);
    // Since then: 960 samples held 38.4 s in all (40 ms each), 48000 played with 30 ms each.
    const next = d.take(stats(48 + 38.4, 1920, 960 + 1440, 96_000));
    expect(next.jitterBufferMs).toBeCloseTo(40, 9);
    expect(next.playoutMs).toBeCloseTo(30, 9);
    expect(d.take(stats(90, 1920, null, 0))).toEqual({ jitterBufferMs: null, playoutMs: null, rttMs: 12 });
    expect(new ReceiveDelays().take([])).toEqual({ jitterBufferMs: null, playoutMs: null, rttMs: null });
  });
});

const SPLIT = {
  type: "turn.latency",
  turn: 3,
  total_ms: 640.5,
  parts: [
    { name: "capture_send", ms: -4.5, source: "estimated" },
    { name: "network_up", ms: 10, source: "estimated" },
    { name: "transceiver_up", ms: 0.3, source: "measured" },
    { name: "backend", ms: 520.2, source: "measured" },
    { name: "transceiver_down", ms: 9.5, source: "measured" },
    { name: "network_down", ms: 10, source: "estimated" },
    { name: "jitter_buffer", ms: 65, source: "client" },
    { name: "playout", ms: 30, source: "client" },
  ],
};

describe("parseTurnLatency", () => {
  it("takes a turn.latency split, text or parsed", () => {
    const expected: TurnLatency = { turn: 3, totalMs: 640.5, parts: SPLIT.parts as TurnLatency["parts"] };
    expect(parseTurnLatency(JSON.stringify(SPLIT))).toEqual(expected);
    expect(parseTurnLatency(SPLIT)).toEqual(expected);
  });

  it("drops anything malformed", () => {
    const parts = SPLIT.parts;
    const bad: unknown[] = [
      "not json",
      null,
      42,
      { ...SPLIT, type: "turn.report" },
      { ...SPLIT, turn: 1.5 },
      { ...SPLIT, total_ms: "640" },
      { ...SPLIT, total_ms: -1 },
      { ...SPLIT, parts: [] },
      { ...SPLIT, parts: "x" },
      { ...SPLIT, parts: Array(17).fill(parts[1]) },
      { ...SPLIT, parts: [{ ...parts[1], source: "guessed" }] },
      { ...SPLIT, parts: [{ ...parts[1], ms: -1 }] },
      { ...SPLIT, parts: [{ ...parts[1], name: "" }] },
      { ...SPLIT, parts: [null] },
    ];
    for (const m of bad) expect(parseTurnLatency(m), JSON.stringify(m)).toBeNull();
    // Infinity does not survive JSON, but a parsed object may carry it.
    expect(parseTurnLatency({ ...SPLIT, parts: [{ ...parts[0], ms: Infinity }] })).toBeNull();
  });
});

// ---- The Call's side, against fake WebRTC objects --------------------------------------------

class FakeTrack {
  kind = "audio";
  enabled = true;
  constructor(readonly id: string) {}
}

class FakeStream {
  private tracks: FakeTrack[] = [];
  constructor(tracks: FakeTrack[] = []) {
    this.tracks = [...tracks];
  }
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
  constructor(readonly label: string) {
    super();
  }
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
  receive(message: object | string) {
    const data = typeof message === "string" ? message : JSON.stringify(message);
    this.dispatchEvent(new MessageEvent("message", { data }));
  }
}

class FakePc extends EventTarget {
  iceConnectionState: RTCIceConnectionState = "new";
  iceGatheringState: RTCIceGatheringState = "complete";
  signalingState: RTCSignalingState = "stable";
  localDescription: { type: string; sdp: string } | null = null;
  closed = false;
  /** What getStats says: the jitter buffer's and playout's counters. */
  counters = { jb: 0, emitted: 0, playout: 0, samples: 0 };
  rtp = 1000;
  private readonly track: FakeTrack;
  constructor(
    readonly name: string,
    readonly channels: FakeChannel[],
  ) {
    super();
    this.track = new FakeTrack(`remote of ${name}`);
  }
  getConfiguration() {
    return { iceServers: [] };
  }
  setConfiguration() {}
  restartIce() {}
  async createOffer() {
    return { type: "offer", sdp: `offer of ${this.name}` };
  }
  async setLocalDescription(d: { type: string; sdp?: string }) {
    this.localDescription = { type: d.type, sdp: d.sdp ?? "" };
  }
  async setRemoteDescription() {
    const e = new Event("track") as Event & { track: FakeTrack };
    e.track = this.track;
    this.dispatchEvent(e);
    queueMicrotask(() => {
      this.iceConnectionState = "connected";
      this.dispatchEvent(new Event("iceconnectionstatechange"));
      for (const c of this.channels) c.open();
    });
  }
  getReceivers() {
    return [{ track: this.track, getSynchronizationSources: () => [{ timestamp: 1, rtpTimestamp: this.rtp, source: 5 }] }];
  }
  async getStats() {
    const c = this.counters;
    const stats = [
      { id: "I", type: "inbound-rtp", kind: "audio", jitterBufferDelay: c.jb, jitterBufferEmittedCount: c.emitted, playoutId: "AP" },
      { id: "AP", type: "media-playout", kind: "audio", totalPlayoutDelay: c.playout, totalSamplesCount: c.samples },
      { id: "P", type: "candidate-pair", nominated: true, state: "succeeded", currentRoundTripTime: 0.004 },
    ];
    return { values: () => stats.values() };
  }
  close() {
    this.closed = true;
    this.iceConnectionState = "closed";
  }
}

const cred = (g: number) =>
  `vr1.${Buffer.from(JSON.stringify({ c: "call1", g, s: "s", w: "", o: "a", exp: 9e9 })).toString("base64url")}.mac`;
const created = (id: string, g: number) =>
  new Response(`answer for ${id}`, {
    status: 201,
    headers: { Location: `/v1/sessions/${id}`, "X-Voxgate-Resume": cred(g), "X-Voxgate-Resume-Ttl": "120" },
  });

function rig() {
  const answers = [() => created("s1", 1), () => created("s2", 2), () => new Response(null, { status: 204 })];
  const fetch = async () => {
    const next = answers.shift();
    if (!next) throw new TypeError("no more answers");
    return next();
  };
  const peers: Array<{ pc: FakePc; app: FakeChannel; turns: FakeChannel }> = [];
  const make = (): Peer => {
    const app = new FakeChannel("oai-events");
    const turns = new FakeChannel(TURNS_LABEL);
    const pc = new FakePc(`pc${peers.length + 1}`, [app, turns]);
    peers.push({ pc, app, turns });
    return {
      pc: pc as unknown as RTCPeerConnection,
      channel: app as unknown as RTCDataChannel,
      turns: turns as unknown as RTCDataChannel,
    };
  };
  let sample: ((t: number, mic: number, remote: number) => void) | null = null;
  let closed = 0;
  const levelTap: LevelTapFactory = (_mic, _remote, onSample) => {
    sample = onSample;
    return { close: () => void closed++ };
  };
  const call = new Call({
    ...make(),
    newPeer: make,
    signaling: new Signaling({ fetch }),
    micStream: new FakeStream([new FakeTrack("mic")]) as unknown as MediaStream,
    gatherTimeoutMs: 10,
    turnTiming: true,
    levelTap,
  });
  const events = { turn: [] as TurnLatency[], report: [] as TurnReport[], message: [] as unknown[] };
  call.on("turn", (t) => events.turn.push(t));
  call.on("turnReport", (r) => events.report.push(r));
  call.on("message", (m) => events.message.push(m));
  /** One turn: speech [t0, t0 + 500), the reply loud from t0 + 1100. */
  const speakAndHear = (t0: number) => {
    if (!sample) throw new Error("no level tap");
    for (let t = t0; t < t0 + 2000; t += 10) {
      sample(t, t < t0 + 500 ? LOUD : QUIET, t >= t0 + 1100 ? LOUD : QUIET);
    }
  };
  return { call, peers, events, speakAndHear, closed: () => closed, tapped: () => sample !== null };
}

async function until(done: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 200 && !done(); i++) await new Promise((r) => setTimeout(r, 1));
  if (!done()) throw new Error(`timed out waiting for ${what}`);
}

describe("Call turn timing", () => {
  it("reports a turn on voxgate.turns with its delays, and emits the split that comes back", async () => {
    const r = rig();
    expect(r.tapped()).toBe(false); // nothing sampled before the call is up
    await r.call.start("http://lb", 1000);
    const { pc, app, turns } = r.peers[0];
    pc.counters = { jb: 4.8, emitted: 96, playout: 1.2, samples: 48 };
    pc.rtp = 48_000;
    r.speakAndHear(0);
    await until(() => r.events.report.length === 1, "the report");
    expect(turns.sent).toEqual([
      '{"type":"turn.report","speech_end_to_heard_ms":610,"rtp_timestamp":48000,' +
        '"jitter_buffer_ms":50,"playout_ms":25,"rtt_ms":4}',
    ]);
    expect(r.events.report[0]).toMatchObject({ speechEndToHeardMs: 610, sent: true });
    expect(app.sent).toEqual([]);

    // The next report covers only what changed since: 960 more samples held 40 ms each.
    pc.counters = { jb: 4.8 + 38.4, emitted: 96 + 960, playout: 1.2, samples: 48 };
    r.speakAndHear(5000);
    await until(() => r.events.report.length === 2, "the second report");
    expect(JSON.parse(turns.sent[1])).toMatchObject({ jitter_buffer_ms: 40, playout_ms: null });

    turns.receive(SPLIT);
    expect(r.events.turn).toEqual([{ turn: 3, totalMs: 640.5, parts: SPLIT.parts }]);
    // Malformed splits and anything else on the turns channel reach no event; send() uses the app's.
    const debug = vi.spyOn(console, "debug").mockImplementation(() => {});
    turns.receive({ ...SPLIT, parts: [{ name: "backend", ms: "x", source: "measured" }] });
    turns.receive({ type: "hello" });
    turns.receive("plain text");
    expect(debug).toHaveBeenCalledTimes(3);
    debug.mockRestore();
    expect(r.events.turn).toHaveLength(1);
    expect(r.events.message).toEqual([]);
    app.receive({ type: "turn.latency", note: "the app's own" });
    expect(r.events.message).toEqual([{ type: "turn.latency", note: "the app's own" }]);
    expect(r.events.turn).toHaveLength(1);
    r.call.send({ hi: 1 });
    expect(app.sent).toEqual(['{"hi":1}']);
    expect(turns.sent).toHaveLength(2);
  });

  it("a resume moves reporting to the new connection's turns channel; hangup stops the sampling", async () => {
    const r = rig();
    await r.call.start("http://lb", 1000);
    r.peers[0].app.receive({ type: "session.migrate" });
    await until(() => r.call.sessionId === "s2" && r.call.state === "connected", "the resume");
    const [old, now] = r.peers;
    expect(old.turns.readyState).toBe("closed");
    now.pc.counters = { jb: 2, emitted: 100, playout: 0, samples: 0 };
    r.speakAndHear(10_000);
    await until(() => r.events.report.length === 1, "the report");
    expect(old.turns.sent).toEqual([]);
    expect(JSON.parse(now.turns.sent[0])).toMatchObject({ speech_end_to_heard_ms: 610, jitter_buffer_ms: 20 });
    old.turns.receive(SPLIT); // the old connection speaks for the call no more
    expect(r.events.turn).toEqual([]);
    now.turns.receive(SPLIT);
    expect(r.events.turn).toHaveLength(1);

    await r.call.hangup();
    expect(r.closed()).toBe(1);
    expect(now.turns.readyState).toBe("closed");
  });

  it("a report while the turns channel is not open is emitted unsent", async () => {
    const r = rig();
    await r.call.start("http://lb", 1000);
    r.peers[0].turns.readyState = "closing";
    r.speakAndHear(0);
    await until(() => r.events.report.length === 1, "the report");
    expect(r.events.report[0].sent).toBe(false);
    expect(r.peers[0].turns.sent).toEqual([]);
  });
});
