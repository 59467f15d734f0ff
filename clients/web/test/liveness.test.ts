import { describe, expect, it } from "vitest";
import { VoxgateError } from "../src/errors";
import { Liveness, probeResultOf, type LivenessStep } from "../src/liveness";

const opts = { livenessPollMs: 200, livenessMs: 1200, probeTimeoutMs: 800 };

/** Drives a watchdog through samples: `totalAt(t)` is what the connection has received at t. */
function rig(l: Liveness, totalAt: (t: number) => number | null) {
  const probes: number[] = [];
  let probeId: number | null = null;
  const silent: Array<Extract<LivenessStep, { kind: "silent" }> & { at: number }> = [];
  /**
   * Runs from `from` to `to`, answering samples at once; a probe stays open (see `answer`), and
   * with `untilProbe` the run stops at it.
   */
  const run = (from: number, to: number, untilProbe = false) => {
    let now = from;
    while (now <= to) {
      const s = l.poll(now);
      if (s.kind === "sample") l.onSample(now, s.id, totalAt(now));
      else if (s.kind === "probe") {
        probes.push(now);
        probeId = s.id;
        if (untilProbe) return;
      } else if (s.kind === "silent") silent.push({ ...s, at: now });
      else if (s.kind === "wait") now = s.at;
      else now += 10;
    }
  };
  const answer = (now: number, result: Parameters<Liveness["onProbeDone"]>[2]) => {
    if (probeId === null) throw new Error("no probe open");
    l.onProbeDone(now, probeId, result);
    probeId = null;
  };
  return { run, answer, probes, silent };
}

function active(): Liveness {
  const l = new Liveness(opts);
  l.setActive(0, true);
  return l;
}

describe("Liveness", () => {
  it("samples every livenessPollMs while active, and nothing while inactive", () => {
    const l = new Liveness(opts);
    expect(l.poll(0)).toEqual({ kind: "none" });
    l.setActive(0, true);
    const s = l.poll(0);
    expect(s.kind).toBe("sample");
    expect(l.poll(5)).toEqual({ kind: "none" }); // the sample is out
    l.onSample(10, (s as { id: number }).id, 100);
    expect(l.poll(10)).toEqual({ kind: "wait", at: 210 });
    l.setActive(20, false);
    expect(l.poll(1000)).toEqual({ kind: "none" });
  });

  it("a total that grows never probes", () => {
    const l = active();
    const r = rig(l, (t) => Math.floor(t / 20)); // a packet every 20 ms
    r.run(0, 60_000);
    expect(r.probes).toEqual([]);
  });

  it("RTCP every second (a silent backend) never probes", () => {
    const l = active();
    const r = rig(l, (t) => Math.floor(t / 1000));
    r.run(0, 60_000);
    expect(r.probes).toEqual([]);
  });

  it("a total that stands still for livenessMs probes once, at the sample that finds it", () => {
    const l = active();
    const r = rig(l, (t) => (t < 5000 ? Math.floor(t / 20) : 250)); // the transceiver dies at 5 s
    r.run(0, 10_000);
    // The last change was seen at the 5000 sample; the 6200 one finds it unchanged 1.2 s on.
    expect(r.probes).toEqual([6200]);
  });

  it("growth while the probe is out makes its answer moot, and resets", () => {
    const l = active();
    let dead = true;
    const r = rig(l, (t) => (t < 1000 ? t : dead ? 1000 : t));
    r.run(0, 2400);
    expect(r.probes).toEqual([2200]);
    dead = false;
    r.run(2410, 2600); // traffic again
    r.answer(2700, "gone");
    r.run(2700, 5000);
    expect(r.silent).toEqual([]);
    expect(r.probes).toEqual([2200]);
  });

  it("404 or no answer: silent, gone or unreachable, since the last traffic seen", () => {
    for (const why of ["gone", "unreachable"] as const) {
      const l = active();
      const r = rig(l, (t) => Math.min(t, 3000));
      r.run(0, 4200);
      expect(r.probes).toEqual([4200]);
      r.answer(4250, why);
      r.run(4250, 4250);
      expect(r.silent).toEqual([{ kind: "silent", why, since: 3000, at: 4250 }]);
    }
  });

  it("200: silent, alive (restart ICE)", () => {
    const l = active();
    const r = rig(l, () => 7);
    r.run(0, 1200);
    r.answer(1210, "alive");
    r.run(1210, 1210);
    expect(r.silent.map((s) => s.why)).toEqual(["alive"]);
  });

  it("any other answer decides nothing", () => {
    const l = active();
    const r = rig(l, () => 7);
    r.run(0, 1200);
    r.answer(1210, "other");
    r.run(1210, 1300);
    expect(r.silent).toEqual([]);
  });

  it("probes of one silence are spaced livenessMs apart, doubling, at most 8 × livenessMs", () => {
    const l = active();
    const r = rig(l, () => 7);
    let now = 0;
    for (let i = 0; i < 7; i++) {
      r.run(now, now + 20_000, true);
      if (r.probes.length <= i) break;
      now = r.probes[i] + 50;
      r.answer(now, "alive");
    }
    const gaps = r.probes.slice(1).map((t, i) => t - (r.probes[i] + 50));
    // Spacing from each answer: 1.2, 2.4, 4.8, then 9.6 s (at the first sample after it).
    expect(r.probes[0]).toBe(1200);
    const spacing = [1200, 2400, 4800, 9600, 9600, 9600];
    expect(gaps).toHaveLength(spacing.length);
    gaps.forEach((g, i) => {
      expect(g).toBeGreaterThanOrEqual(spacing[i]);
      expect(g).toBeLessThanOrEqual(spacing[i] + 200);
    });
  });

  it("traffic after a probe resets the spacing", () => {
    const l = active();
    let t0 = Infinity; // traffic again from t0 on, then silence from 6000
    const r = rig(l, (t) => (t >= t0 && t < 6000 ? t : t >= 6000 ? 6000 : 0));
    r.run(0, 1200, true);
    r.answer(1250, "alive");
    t0 = 2000;
    r.run(1250, 8000);
    // A new silence: its first probe 1.2 s after the last traffic seen, as the first time.
    expect(r.probes).toEqual([1200, 7200]);
  });

  it("no counter in the report is no evidence of silence", () => {
    const l = active();
    const r = rig(l, () => null);
    r.run(0, 30_000);
    expect(r.probes).toEqual([]);
  });

  it("a throttled page (samples a second apart) probes later, not sooner", () => {
    const l = new Liveness({ ...opts, livenessPollMs: 1000 });
    l.setActive(0, true);
    const r = rig(l, (t) => Math.floor((t + 1) / 1000)); // RTCP just before each sample
    r.run(0, 30_000);
    expect(r.probes).toEqual([]);
  });

  it("reactivation starts a new baseline; stale sample and probe answers are ignored", () => {
    const l = active();
    const s = l.poll(0) as { kind: "sample"; id: number };
    l.setActive(10, false);
    l.setActive(20, true);
    l.onSample(30, s.id, 5); // from before: ignored, a new sample is due
    expect(l.poll(30).kind).toBe("sample");
  });

  it("traffic: a change after the baseline since activation (or no counter)", () => {
    const l = active();
    const step = (now: number, total: number | null) => {
      const s = l.poll(now) as { kind: "sample"; id: number };
      expect(s.kind).toBe("sample");
      l.onSample(now, s.id, total);
    };
    step(0, 50);
    expect(l.traffic).toBe(false); // the baseline
    step(200, 50);
    expect(l.traffic).toBe(false);
    step(400, 51);
    expect(l.traffic).toBe(true);
    l.setActive(500, false);
    l.setActive(500, true);
    expect(l.traffic).toBe(false);
    step(500, null);
    expect(l.traffic).toBe(true);
  });

  it("liveness: false never asks for anything", () => {
    const l = new Liveness(false);
    l.setActive(0, true);
    expect(l.poll(0)).toEqual({ kind: "none" });
    expect(l.poll(60_000)).toEqual({ kind: "none" });
  });
});

describe("probeResultOf", () => {
  it("maps statuses and failures", () => {
    expect(probeResultOf(200)).toBe("alive");
    expect(probeResultOf(404)).toBe("gone");
    expect(probeResultOf(410)).toBe("gone");
    expect(probeResultOf(401)).toBe("other");
    expect(probeResultOf(503)).toBe("other");
    expect(probeResultOf(new VoxgateError("network", "refused"))).toBe("unreachable");
    expect(probeResultOf(new Error("?"))).toBe("other");
  });
});
