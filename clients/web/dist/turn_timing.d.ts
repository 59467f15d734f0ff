import { type TurnLatency, type TurnReport } from "./turns";
/** A running level sampler (see `LevelTapFactory`). */
export interface LevelTap {
    close(): void;
}
/**
 * Starts sampling the microphone and the reply (whatever track `remote` holds now) every 10 ms:
 * `onSample(performance.now(), micDbfs, remoteDbfs)`, RMS levels of the last ~10 ms.
 */
export type LevelTapFactory = (mic: MediaStream, remote: MediaStream, onSample: (tMs: number, micDbfs: number, remoteDbfs: number) => void) => LevelTap;
/**
 * The browser's LevelTap: one AudioContext, an AnalyserNode (512 samples) on the microphone and
 * one on the reply's current track, polled every 10 ms. Chromium feeds a remote WebRTC track to
 * WebAudio only while a media element plays it too (the app's `<audio>`, which it has anyway
 * to hear the reply); the context is resumed until it runs (a page without a user gesture may
 * keep it suspended: no samples then, no turns).
 */
export declare const webAudioTap: LevelTapFactory;
/** What turn timing reports to its call. */
export interface TurnTimingSink {
    /** The transceiver's split of a reported turn. */
    turn(split: TurnLatency): void;
    /** A turn this browser measured, as reported (or not: `sent`). */
    report(report: TurnReport): void;
    /** Whether the call has ended (nothing is reported then). */
    ended(): boolean;
}
/** One call's turn timing across its connections. */
export declare class TurnTiming {
    private readonly sink;
    private readonly remoteStream;
    private readonly levelTap;
    private readonly detector;
    /** The receive-delay counters at the last report, of the current connection. */
    private delays;
    private tap;
    private pc;
    private turns;
    constructor(sink: TurnTimingSink, remoteStream: MediaStream, levelTap?: LevelTapFactory);
    /** The call's connection is now `pc` (with its turns channel): starts over; returns what
     * removes its listener. */
    adopt(pc: RTCPeerConnection, turns: RTCDataChannel | null): () => void;
    /** Starts sampling `mic` (once; not without a mic track). */
    start(mic: MediaStream | null): void;
    close(): void;
    private onLevels;
    /** The RTP timestamp of the reply's most recently played packet (null if none yet). */
    private playingRtpTimestamp;
    /** Sends a turn's report with the receive delays since the last one, and hands it on. */
    private reportTurn;
    /** The turns channel carries the transceiver's splits only; anything else is dropped. */
    private onTurnsMessage;
}
