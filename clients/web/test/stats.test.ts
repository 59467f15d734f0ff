import { describe, expect, it } from "vitest";
import { receivedTotal, summarise } from "../src/stats";
import { micConstraints } from "../src/mic";

describe("summarise", () => {
  it("reads a maplike report whose iteration yields [id, stat] pairs, as RTCStatsReport does", () => {
    const stats = new Map<string, { id: string; type: string; [k: string]: unknown }>([
      ["o", { id: "o", type: "outbound-rtp", kind: "audio", packetsSent: 7, bytesSent: 700 }],
      ["i", { id: "i", type: "inbound-rtp", kind: "audio", packetsReceived: 5, totalAudioEnergy: 0.25 }],
    ]);
    // Not a Map: what a browser hands out (maplike, `instanceof Map` is false).
    const report = {
      values: () => stats.values(),
      [Symbol.iterator]: () => stats.entries(),
    };
    const s = summarise(report as never);
    expect(s.packetsSent).toBe(7);
    expect(s.packetsReceived).toBe(5);
    expect(s.totalAudioEnergy).toBe(0.25);
  });

  it("sums audio both ways and reads the selected pair", () => {
    const s = summarise([
      { id: "T", type: "transport", selectedCandidatePairId: "P2" },
      { id: "o", type: "outbound-rtp", kind: "audio", packetsSent: 50, bytesSent: 4000 },
      { id: "v", type: "outbound-rtp", kind: "video", packetsSent: 999 },
      {
        id: "i", type: "inbound-rtp", kind: "audio", packetsReceived: 40, packetsLost: 2,
        jitter: 0.004, totalAudioEnergy: 0.5, jitterBufferDelay: 2, jitterBufferEmittedCount: 40,
      },
      {
        id: "ri", type: "remote-inbound-rtp", kind: "audio", roundTripTime: 0.081, jitter: 0.002,
        packetsLost: 12, fractionLost: 0.1,
      },
      { id: "P1", type: "candidate-pair", nominated: true, state: "succeeded", currentRoundTripTime: 9 },
      { id: "P2", type: "candidate-pair", currentRoundTripTime: 0.012, localCandidateId: "L", remoteCandidateId: "R" },
      { id: "L", type: "local-candidate", protocol: "udp", address: "10.0.0.2", port: 5000 },
      { id: "R", type: "remote-candidate", protocol: "udp", address: "203.0.113.9", port: 3478 },
    ]);
    expect(s.packetsSent).toBe(50);
    expect(s.bytesSent).toBe(4000);
    expect(s.packetsReceived).toBe(40);
    expect(s.packetsLost).toBe(2);
    expect(s.jitter).toBe(0.004);
    expect(s.totalAudioEnergy).toBe(0.5);
    expect(s.jitterBufferDelayMs).toBe(50);
    expect(s.rtt).toBe(0.012);
    expect(s.selectedPair).toEqual({ local: "udp 10.0.0.2:5000", remote: "udp 203.0.113.9:3478" });
    expect(s.uplink).toEqual({ rtt: 0.081, jitter: 0.002, packetsLost: 12, fractionLost: 0.1 });
  });

  it("an empty report is zeros and nulls", () => {
    const s = summarise([]);
    expect(s.packetsSent).toBe(0);
    expect(s.rtt).toBeNull();
    expect(s.selectedPair).toBeNull();
    expect(s.uplink).toBeNull();
  });
});

describe("micConstraints", () => {
  it("keeps echo cancellation, turns off noise suppression and gain control by default", () => {
    const c = micConstraints();
    expect(c.echoCancellation).toBe(true);
    expect(c.noiseSuppression).toBe(false);
    expect(c.autoGainControl).toBe(false);
    expect(micConstraints(true)).toEqual(c);
  });

  it("the app's overrides win", () => {
    expect(micConstraints({ echoCancellation: false, deviceId: "x" })).toMatchObject({
      echoCancellation: false,
      noiseSuppression: false,
      deviceId: "x",
    });
  });
});

describe("receivedTotal", () => {
  it("reads the selected pair's bytes, else its packets, else the transport's", () => {
    const pair = { id: "P", type: "candidate-pair", bytesReceived: 900, packetsReceived: 9 };
    const other = { id: "Q", type: "candidate-pair", bytesReceived: 5 };
    const transport = { id: "T", type: "transport", selectedCandidatePairId: "P", bytesReceived: 1000 };
    expect(receivedTotal([transport, other, pair])).toBe(900);
    expect(receivedTotal([transport, { id: "P", type: "candidate-pair", packetsReceived: 9 }])).toBe(9);
    expect(receivedTotal([transport])).toBe(1000);
    expect(
      receivedTotal([{ id: "N", type: "candidate-pair", nominated: true, state: "succeeded", bytesReceived: 42 }]),
    ).toBe(42);
  });

  it("null when the report has no counter", () => {
    expect(receivedTotal([{ id: "o", type: "outbound-rtp", kind: "audio", packetsSent: 3 }])).toBeNull();
    expect(receivedTotal([])).toBeNull();
  });
});
