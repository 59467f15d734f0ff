import { describe, expect, it } from "vitest";
import { ReconnectPolicy } from "../src/reconnect";

const opts = { disconnectGraceMs: 1000, maxAttempts: 3, backoffMs: 500, maxBackoffMs: 1500 };

describe("ReconnectPolicy", () => {
  it("does nothing while connected", () => {
    const p = new ReconnectPolicy(opts);
    p.onIceState(0, "connected");
    expect(p.poll(10_000)).toEqual({ kind: "none" });
  });

  it("waits out the grace of a disconnect before restarting", () => {
    const p = new ReconnectPolicy(opts);
    p.onIceState(0, "connected");
    p.onIceState(100, "disconnected");
    expect(p.poll(500)).toEqual({ kind: "wait", at: 1100 });
    expect(p.poll(1100)).toEqual({ kind: "restart", attempt: 1 });
  });

  it("a disconnect that heals within the grace restarts nothing", () => {
    const p = new ReconnectPolicy(opts);
    p.onIceState(100, "disconnected");
    p.onIceState(600, "connected");
    expect(p.poll(5000)).toEqual({ kind: "none" });
  });

  it("restartNow (a silent path) restarts at once, even inside a disconnect's grace", () => {
    const p = new ReconnectPolicy(opts);
    p.onIceState(0, "connected");
    p.onIceState(100, "disconnected");
    p.restartNow(300);
    expect(p.poll(300)).toEqual({ kind: "restart", attempt: 1 });
  });

  it("failed restarts at once", () => {
    const p = new ReconnectPolicy(opts);
    p.onIceState(0, "failed");
    expect(p.poll(0)).toEqual({ kind: "restart", attempt: 1 });
  });

  it("a network change restarts at once", () => {
    const p = new ReconnectPolicy(opts);
    p.onIceState(0, "connected");
    p.onNetworkChange(50);
    expect(p.poll(50)).toEqual({ kind: "restart", attempt: 1 });
  });

  it("one restart at a time", () => {
    const p = new ReconnectPolicy(opts);
    p.onIceState(0, "failed");
    expect(p.poll(0).kind).toBe("restart");
    p.onIceState(10, "failed");
    expect(p.poll(20)).toEqual({ kind: "none" });
  });

  it("backs off exponentially (capped) and gives up after maxAttempts", () => {
    const p = new ReconnectPolicy(opts);
    p.onIceState(0, "failed");
    expect(p.poll(0)).toEqual({ kind: "restart", attempt: 1 });
    p.onRestartDone(100, "error");
    expect(p.poll(100)).toEqual({ kind: "wait", at: 600 });
    expect(p.poll(600)).toEqual({ kind: "restart", attempt: 2 });
    p.onRestartDone(700, "ok"); // answer applied, but ICE does not come back
    expect(p.poll(700)).toEqual({ kind: "wait", at: 1700 });
    expect(p.poll(1700)).toEqual({ kind: "restart", attempt: 3 });
    p.onRestartDone(1800, "error");
    expect(p.poll(1800 + 1500)).toEqual({ kind: "give_up", reason: "lost" });
    expect(p.lost).toBe(true);
    expect(p.poll(99_999)).toEqual({ kind: "none" });
  });

  it("404 on the PATCH gives up at once (the session is gone)", () => {
    const p = new ReconnectPolicy(opts);
    p.onIceState(0, "failed");
    p.poll(0);
    p.onRestartDone(10, "not_found");
    expect(p.poll(10)).toEqual({ kind: "give_up", reason: "lost" });
  });

  it("ICE coming back after a restart ends the outage and resets the attempts", () => {
    const p = new ReconnectPolicy(opts);
    p.onIceState(0, "failed");
    p.poll(0);
    p.onRestartDone(100, "ok");
    p.onIceState(300, "connected");
    expect(p.recovering).toBe(false);
    expect(p.attempts).toBe(0);
    expect(p.poll(10_000)).toEqual({ kind: "none" });
    // A later outage gets its full set of attempts.
    p.onIceState(20_000, "failed");
    expect(p.poll(20_000)).toEqual({ kind: "restart", attempt: 1 });
  });
});
