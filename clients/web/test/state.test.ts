import { describe, expect, it } from "vitest";
import { CallStateMachine } from "../src/state";

describe("CallStateMachine", () => {
  it("goes connecting → connected → reconnecting → connected → ended", () => {
    const sm = new CallStateMachine();
    expect(sm.state).toBe("connecting");
    expect(sm.to("connected")).toBe(true);
    expect(sm.to("reconnecting")).toBe(true);
    expect(sm.to("connected")).toBe(true);
    expect(sm.end("hangup")).toBe(true);
    expect(sm.state).toBe("ended");
    expect(sm.endReason).toBe("hangup");
  });

  it("cannot reconnect a call that never connected", () => {
    const sm = new CallStateMachine();
    expect(sm.to("reconnecting")).toBe(false);
    expect(sm.state).toBe("connecting");
  });

  it("a repeated state is no change", () => {
    const sm = new CallStateMachine();
    sm.to("connected");
    expect(sm.to("connected")).toBe(false);
  });

  it("ended is final and keeps the first reason", () => {
    const sm = new CallStateMachine();
    sm.to("connected");
    expect(sm.end("backend_hangup")).toBe(true);
    expect(sm.end("hangup")).toBe(false);
    expect(sm.to("connected")).toBe(false);
    expect(sm.endReason).toBe("backend_hangup");
  });
});
