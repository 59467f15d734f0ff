import { describe, expect, it } from "vitest";
import { Continuity, restartResultOf, resumeResultOf } from "../src/continuity";
import { VoxgateError } from "../src/errors";

const opts = { disconnectGraceMs: 1000, maxAttempts: 2, backoffMs: 500, maxBackoffMs: 1500, resumeWindowMs: 5000 };

function withCredential(): Continuity {
  const c = new Continuity(opts);
  c.canResume = true;
  return c;
}

/** An outage whose first restart is under way at t=0. */
function restarting(c: Continuity): void {
  c.onIceState(0, "failed");
  expect(c.poll(0)).toEqual({ kind: "restart", attempt: 1 });
}

describe("Continuity", () => {
  it("ICE trouble restarts ICE first", () => {
    const c = withCredential();
    restarting(c);
    expect(c.resuming).toBe(false);
  });

  it("a PATCH answered 404 resumes at once", () => {
    const c = withCredential();
    restarting(c);
    c.onRestartDone(10, "not_found");
    expect(c.poll(10)).toEqual({ kind: "resume", attempt: 1 });
    expect(c.resuming).toBe(true);
  });

  it("a PATCH that cannot reach the server resumes at once", () => {
    const c = withCredential();
    restarting(c);
    c.onRestartDone(10, "unreachable");
    expect(c.poll(10)).toEqual({ kind: "resume", attempt: 1 });
  });

  it("PATCHes answered 5xx resume once the restarts are used up", () => {
    const c = withCredential();
    restarting(c);
    c.onRestartDone(10, "server_error");
    expect(c.poll(10)).toEqual({ kind: "wait", at: 510 });
    expect(c.poll(510)).toEqual({ kind: "restart", attempt: 2 });
    c.onRestartDone(600, "server_error");
    expect(c.poll(600 + 1000)).toEqual({ kind: "resume", attempt: 1 });
  });

  it("restarts used up with answers applied end the call lost", () => {
    const c = withCredential();
    restarting(c);
    c.onRestartDone(10, "ok");
    expect(c.poll(510)).toEqual({ kind: "restart", attempt: 2 });
    c.onRestartDone(600, "ok");
    expect(c.poll(1600)).toEqual({ kind: "end", reason: "lost" });
    expect(c.poll(1700)).toEqual({ kind: "none" });
  });

  it("session.migrate resumes at once, even while connected", () => {
    const c = withCredential();
    c.onIceState(0, "connected");
    c.onMigrate(5);
    expect(c.poll(5)).toEqual({ kind: "resume", attempt: 1 });
  });

  it("session.ended shutdown resumes instead of ending; other reasons end", () => {
    const c = withCredential();
    c.onSessionEnded(0, "shutdown");
    expect(c.poll(0)).toEqual({ kind: "resume", attempt: 1 });
    const d = withCredential();
    d.onSessionEnded(0, "backend_hangup");
    expect(d.poll(0)).toEqual({ kind: "end", reason: "backend_hangup" });
  });

  it("without a credential nothing resumes: 404 ends lost, shutdown ends shutdown, migrate is ignored", () => {
    const a = new Continuity(opts);
    restarting(a);
    a.onRestartDone(10, "not_found");
    expect(a.poll(10)).toEqual({ kind: "end", reason: "lost" });
    const b = new Continuity(opts);
    b.onSessionEnded(0, "shutdown");
    expect(b.poll(0)).toEqual({ kind: "end", reason: "shutdown" });
    const m = new Continuity(opts);
    m.onMigrate(0);
    expect(m.poll(0)).toEqual({ kind: "none" });
    expect(m.resuming).toBe(false);
  });

  it("during a resume, ICE events and the old session's end change nothing", () => {
    const c = withCredential();
    c.onMigrate(0);
    expect(c.poll(0).kind).toBe("resume");
    c.onIceState(10, "failed");
    c.onSessionEnded(20, "resumed");
    c.onMigrate(30);
    expect(c.poll(40)).toEqual({ kind: "none" });
  });

  it("retryable resume failures back off (or honour Retry-After) within the window, then end lost", () => {
    const c = withCredential();
    c.onMigrate(0);
    expect(c.poll(0)).toEqual({ kind: "resume", attempt: 1 });
    c.onResumeDone(100, { kind: "retry", afterMs: null });
    expect(c.poll(100)).toEqual({ kind: "wait", at: 600 });
    expect(c.poll(600)).toEqual({ kind: "resume", attempt: 2 });
    c.onResumeDone(700, { kind: "retry", afterMs: 3000 });
    expect(c.poll(700)).toEqual({ kind: "wait", at: 3700 });
    expect(c.poll(3700)).toEqual({ kind: "resume", attempt: 3 });
    c.onResumeDone(3800, { kind: "retry", afterMs: 2000 }); // 5800 is past the 5000 window
    expect(c.poll(3800)).toEqual({ kind: "end", reason: "lost" });
  });

  it("a final refusal ends the call with its reason", () => {
    const c = withCredential();
    c.onMigrate(0);
    c.poll(0);
    c.onResumeDone(50, { kind: "final", reason: "call_gone" });
    expect(c.poll(50)).toEqual({ kind: "end", reason: "call_gone" });
  });

  it("after a resume the new session gets a fresh set of ICE restarts", () => {
    const c = withCredential();
    restarting(c);
    c.onRestartDone(10, "not_found");
    c.poll(10);
    c.onResumeDone(500, { kind: "ok" });
    expect(c.resuming).toBe(false);
    expect(c.poll(600)).toEqual({ kind: "none" });
    c.onIceState(1000, "failed");
    expect(c.poll(1000)).toEqual({ kind: "restart", attempt: 1 });
  });

  it("end (a hang-up) stops every decision", () => {
    const c = withCredential();
    c.onMigrate(0);
    c.end("hangup");
    expect(c.poll(0)).toEqual({ kind: "end", reason: "hangup" });
    expect(c.poll(1)).toEqual({ kind: "none" });
  });
});

describe("Continuity on a silent path (liveness.ts)", () => {
  it("gone or unreachable resumes at once; alive restarts ICE at once, without the grace", () => {
    for (const why of ["gone", "unreachable"] as const) {
      const c = withCredential();
      c.onIceState(0, "connected");
      c.onSilentPath(1200, why);
      expect(c.poll(1200)).toEqual({ kind: "resume", attempt: 1 });
      expect(c.recovering).toBe(true);
    }
    const c = withCredential();
    c.onIceState(0, "connected");
    expect(c.recovering).toBe(false);
    c.onIceState(500, "disconnected"); // within the grace: no restart yet
    expect(c.poll(600)).toEqual({ kind: "wait", at: 1500 });
    c.onSilentPath(1200, "alive");
    expect(c.poll(1200)).toEqual({ kind: "restart", attempt: 1 });
    expect(c.recovering).toBe(true);
  });

  it("without a credential: gone ends the call lost, unreachable leaves it to ICE", () => {
    const gone = new Continuity(opts);
    gone.onSilentPath(1200, "gone");
    expect(gone.poll(1200)).toEqual({ kind: "end", reason: "lost" });
    const unreachable = new Continuity(opts);
    unreachable.onSilentPath(1200, "unreachable");
    expect(unreachable.poll(1200)).toEqual({ kind: "none" });
  });

  it("during a resume a silent path changes nothing", () => {
    const c = withCredential();
    c.onMigrate(0);
    expect(c.poll(0)).toEqual({ kind: "resume", attempt: 1 });
    c.onSilentPath(10, "alive");
    expect(c.poll(10)).toEqual({ kind: "none" });
    expect(c.resumeAttempts).toBe(1);
  });
});

describe("outcome mapping", () => {
  it("PATCH failures: 404 not_found, network unreachable, 5xx server_error, else error", () => {
    expect(restartResultOf(new VoxgateError("not_found", "", 404))).toBe("not_found");
    expect(restartResultOf(new VoxgateError("network", ""))).toBe("unreachable");
    expect(restartResultOf(new VoxgateError("busy", "", 503))).toBe("server_error");
    expect(restartResultOf(new VoxgateError("signaling", "", 502))).toBe("server_error");
    expect(restartResultOf(new VoxgateError("unauthorized", "", 401))).toBe("error");
    expect(restartResultOf(new TypeError("x"))).toBe("error");
  });

  it("resume failures: refusals are final with their code, busy/network/5xx retry", () => {
    expect(resumeResultOf(new VoxgateError("resume_invalid", "", 401))).toEqual({ kind: "final", reason: "resume_invalid" });
    expect(resumeResultOf(new VoxgateError("resume_expired", "", 401))).toEqual({ kind: "final", reason: "resume_expired" });
    expect(resumeResultOf(new VoxgateError("resume_refused", "", 409))).toEqual({ kind: "final", reason: "resume_refused" });
    expect(resumeResultOf(new VoxgateError("call_gone", "", 410))).toEqual({ kind: "final", reason: "call_gone" });
    expect(resumeResultOf(new VoxgateError("busy", "", 429, 2000))).toEqual({ kind: "retry", afterMs: 2000 });
    expect(resumeResultOf(new VoxgateError("busy", "", 503))).toEqual({ kind: "retry", afterMs: null });
    expect(resumeResultOf(new VoxgateError("network", ""))).toEqual({ kind: "retry", afterMs: null });
    expect(resumeResultOf(new VoxgateError("signaling", "", 500))).toEqual({ kind: "retry", afterMs: null });
    expect(resumeResultOf(new VoxgateError("signaling", "", 400))).toEqual({ kind: "final", reason: "lost" });
    // The resumed connection not coming up: its 201's credential resumes again.
    expect(resumeResultOf(new Error("ICE failed"))).toEqual({ kind: "retry", afterMs: null });
  });
});
