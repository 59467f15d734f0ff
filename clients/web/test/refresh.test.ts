import { describe, expect, it } from "vitest";
import { RefreshSchedule, refreshIntervalMs } from "../src/refresh";

describe("RefreshSchedule", () => {
  it("refreshes every third of the TTL, never more often than every 5 s", () => {
    expect(refreshIntervalMs(120)).toBe(40_000);
    expect(refreshIntervalMs(9)).toBe(5000);
    expect(refreshIntervalMs(0)).toBe(40_000); // no TTL header: the server default, 120 s
  });

  it("nothing is due before the first credential", () => {
    expect(new RefreshSchedule().nextAt).toBeNull();
  });

  it("each credential moves the next refresh; a failure retries a tick later", () => {
    const r = new RefreshSchedule();
    r.onCredential(1000, 120);
    expect(r.nextAt).toBe(41_000);
    r.onCredential(20_000, 30); // a PATCH's 200 brought a fresh one
    expect(r.nextAt).toBe(30_000);
    r.onRefreshFailed(30_000);
    expect(r.nextAt).toBe(40_000);
  });

  it("stop ends the schedule for good", () => {
    const r = new RefreshSchedule();
    r.onCredential(0, 120);
    r.stop();
    expect(r.nextAt).toBeNull();
    r.onCredential(10, 120);
    r.onRefreshFailed(20);
    expect(r.nextAt).toBeNull();
  });
});
