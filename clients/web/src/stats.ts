// Summarises an RTCStatsReport into what an app shows or logs: audio both ways, the selected
// candidate pair's RTT, jitter and loss, and what the server's receiver reports say of the
// microphone's audio; and reads the received total the liveness watchdog watches
// (`receivedTotal`). Pure: takes any iterable of stats dictionaries.

export interface CallStats {
  packetsSent: number;
  bytesSent: number;
  packetsReceived: number;
  packetsLost: number;
  /** Seconds, from the inbound audio stream. */
  jitter: number | null;
  /** Seconds, of the selected candidate pair. */
  rtt: number | null;
  /** Chromium's total energy of the received audio (grows while audio plays). */
  totalAudioEnergy: number;
  /** Outbound audio level 0..1 of the microphone track, where the browser reports it. */
  micLevel: number | null;
  jitterBufferDelayMs: number | null;
  selectedPair: { local: string | null; remote: string | null } | null;
  /**
   * The uplink as the server sees it (`remote-inbound-rtp`, from its RTCP receiver reports):
   * null until the first report. `rtt` is the RTCP round trip (LSR/DLSR), in seconds.
   */
  uplink: UplinkReport | null;
}

export interface UplinkReport {
  /** Seconds, from the server's last receiver report. */
  rtt: number | null;
  /** Seconds: the interarrival jitter the server measured of our audio. */
  jitter: number | null;
  /** Packets of our audio the server has reported lost, since the call began. */
  packetsLost: number;
  /** Fraction lost in the server's last report interval, 0..1. */
  fractionLost: number | null;
}

type Stat = Record<string, unknown> & { id: string; type: string };

const num = (v: unknown): number => (typeof v === "number" && Number.isFinite(v) ? v : 0);

/** A browser's `RTCStatsReport` (maplike: iterating it yields `[id, stat]` pairs) or a Map. */
type MapLike = { values(): Iterable<Stat> };

function statsOf(report: Iterable<Stat> | MapLike): Stat[] {
  const all: Stat[] = [];
  // An RTCStatsReport is not `instanceof Map`, and iterating it yields entries, not stats: take
  // its values() whenever it has them (an array's values() are its items, too).
  const values = typeof (report as MapLike).values === "function" ? (report as MapLike).values() : (report as Iterable<Stat>);
  for (const r of values) all.push(r);
  return all;
}

/**
 * What the connection has received so far, for the liveness watchdog: the selected candidate
 * pair's `bytesReceived` (or `packetsReceived`), else the transport's. These count data only
 * (SRTP, SRTCP, DTLS, SCTP), never ICE checks. Null when the report has neither.
 */
export function receivedTotal(report: Iterable<Stat> | MapLike): number | null {
  const all = statsOf(report);
  const counter = (r: Stat | undefined): number | null => {
    if (!r) return null;
    if (typeof r.bytesReceived === "number") return r.bytesReceived;
    if (typeof r.packetsReceived === "number") return r.packetsReceived;
    return null;
  };
  const transport = all.find((r) => r.type === "transport" && typeof r.selectedCandidatePairId === "string");
  const pair = transport
    ? all.find((r) => r.id === transport.selectedCandidatePairId)
    : all.find((r) => r.type === "candidate-pair" && r.nominated === true && r.state === "succeeded");
  return counter(pair) ?? counter(transport ?? all.find((r) => r.type === "transport"));
}

export function summarise(report: Iterable<Stat> | MapLike): CallStats {
  const all = statsOf(report);
  const byId = new Map(all.map((r) => [r.id, r]));
  const s: CallStats = {
    packetsSent: 0,
    bytesSent: 0,
    packetsReceived: 0,
    packetsLost: 0,
    jitter: null,
    rtt: null,
    totalAudioEnergy: 0,
    micLevel: null,
    jitterBufferDelayMs: null,
    selectedPair: null,
    uplink: null,
  };
  let selected: string | null = null;
  for (const r of all) {
    if (r.type === "transport" && typeof r.selectedCandidatePairId === "string") {
      selected = r.selectedCandidatePairId;
    }
  }
  const where = (id: unknown): string | null => {
    const c = typeof id === "string" ? byId.get(id) : undefined;
    if (!c) return null;
    return `${String(c.protocol ?? "?")} ${String(c.address ?? c.ip ?? "?")}:${String(c.port ?? "?")}`;
  };
  for (const r of all) {
    const kind = r.kind ?? r.mediaType;
    if (r.type === "outbound-rtp" && kind === "audio") {
      s.packetsSent += num(r.packetsSent);
      s.bytesSent += num(r.bytesSent);
    } else if (r.type === "inbound-rtp" && kind === "audio") {
      s.packetsReceived += num(r.packetsReceived);
      s.packetsLost += num(r.packetsLost);
      s.totalAudioEnergy += num(r.totalAudioEnergy);
      if (typeof r.jitter === "number") s.jitter = r.jitter;
      const emitted = num(r.jitterBufferEmittedCount);
      if (emitted > 0) s.jitterBufferDelayMs = (num(r.jitterBufferDelay) / emitted) * 1000;
    } else if (r.type === "remote-inbound-rtp" && kind === "audio") {
      s.uplink = {
        rtt: typeof r.roundTripTime === "number" ? r.roundTripTime : null,
        jitter: typeof r.jitter === "number" ? r.jitter : null,
        packetsLost: num(r.packetsLost),
        fractionLost: typeof r.fractionLost === "number" ? r.fractionLost : null,
      };
    } else if (r.type === "media-source" && kind === "audio" && typeof r.audioLevel === "number") {
      s.micLevel = r.audioLevel;
    } else if (
      r.type === "candidate-pair" &&
      (selected ? r.id === selected : r.nominated === true && r.state === "succeeded")
    ) {
      if (typeof r.currentRoundTripTime === "number") s.rtt = r.currentRoundTripTime;
      s.selectedPair = { local: where(r.localCandidateId), remote: where(r.remoteCandidateId) };
    }
  }
  return s;
}
