#!/usr/bin/env node
// Drives the browser client library (@voxgate/client, served by the transceiver at /voxgate.js)
// in Debian's Chromium through playwright-core, one command at a time, for
// transceiver/tests/web_client.rs. The page is the transceiver's own origin (its /healthz, so no
// page script runs) and imports /voxgate.js from it, as an app would.
//
// Env: SIGNAL_URL (required), TOKEN (optional), HARD_TIMEOUT_MS (optional, default 120000),
// MIC_PATTERN (optional): the fake microphone as a tone/silence pattern in ms, e.g.
// `tone:1200,silence:2800` (a 440 Hz tone, then silence; Chromium loops the file, so the caller
// speaks 1.2 s every 4 s); without it the microphone is a steady tone.
// stdin, one JSON object per line:
//   {"cmd":"connect","port":N?}  connect(); with `port`, every answer's UDP candidates are
//                                rewritten to 127.0.0.1:port and its TCP candidates dropped (the
//                                client's answerTransform hook), so media goes through a proxy;
//                                `"liveness":false` or `{...}` is passed to connect() as is
//   {"cmd":"port","port":N}      the port later answers (ICE restarts) are rewritten to
//   {"cmd":"send","message":X}   call.send(X)
//   {"cmd":"mute"} / {"cmd":"unmute"} / {"cmd":"stats"} / {"cmd":"hangup"} / {"cmd":"quit"}
//   {"cmd":"heard","since":MS}   what the caller heard since wall-clock time MS (Date.now()):
//                                {maxGapMs, loudMs, lastLoudAt}: the longest stretch between two
//                                loud 10 ms samples of the remote audio (the gap a person hears),
//                                loud time in total, and the last loud sample's time
//   {"cmd":"turns"}              {turns, reports}: the client's `turn` events so far (the
//                                transceiver's splits: {turn, totalMs, parts: [{name, ms,
//                                source}]}, with `at`, `wall`) and the `turn.report` messages it
//                                sent on the voxgate.turns channel (as sent, with `wall`)
// stdout, one JSON object per line: {"event":"ready"}, {"event":"connected","sessionId",...},
// {"event":"state","state"}, {"event":"message","message"}, {"event":"ended","reason"},
// {"event":"resumed","sessionId","previousSessionId","gapMs"} (the call moved to a new session),
// {"event":"turn","turn","totalMs","parts","at","wall"} (a split from the transceiver, as it
// arrives), {"event":"turn_report","report","wall"} (a report the client sent),
// {"event":"ice","state","wall"} and {"event":"candidate","candidate","wall"} (every peer
// connection's ICE states and gathered candidates, wall clock in ms),
// {"event":"done","cmd","result"} after each command (`stats`: its result is {stats, state,
// attempts}), {"event":"error",...}.
// The process ends after `quit`, on stdin's end, or after HARD_TIMEOUT_MS.

import { chromium } from 'playwright-core';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

const HARD_TIMEOUT_MS = Number(process.env.HARD_TIMEOUT_MS) || 120_000;
const signalUrl = (process.env.SIGNAL_URL || '').replace(/\/$/, '');
if (!signalUrl) {
  process.stderr.write('web_client: SIGNAL_URL is required\n');
  process.exit(2);
}

const emit = (o) => process.stdout.write(JSON.stringify(o) + '\n');
let browser = null;
const tmp = mkdtempSync(join(tmpdir(), 'voxgate-web-client-'));

async function quit(code) {
  try {
    if (browser) await Promise.race([browser.close(), new Promise((r) => setTimeout(r, 5000))]);
  } catch { /* closing anyway */ }
  try { rmSync(tmp, { recursive: true, force: true }); } catch { /* ignore */ }
  process.exit(code);
}
setTimeout(() => {
  emit({ event: 'error', error: `hard timeout after ${HARD_TIMEOUT_MS} ms` });
  void quit(1);
}, HARD_TIMEOUT_MS).unref();

// The fake microphone (looped by Chromium): a steady 440 Hz tone, or MIC_PATTERN's.
const wav = join(tmp, 'mic.wav');
if (process.env.MIC_PATTERN) {
  writeFileSync(wav, patternWav(process.env.MIC_PATTERN));
} else {
  execFileSync('sox', ['-n', '-r', '48000', '-c', '1', '-b', '16', wav, 'synth', '10', 'sine', '440', 'vol', '0.5'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
}

/** A 48 kHz mono 16-bit WAV of `tone:MS` (440 Hz at half scale) and `silence:MS` segments. */
function patternWav(pattern) {
  const rate = 48_000;
  const segments = pattern.split(',').map((part) => {
    const m = /^\s*(tone|silence):(\d+)\s*$/.exec(part);
    if (!m || Number(m[2]) <= 0) {
      process.stderr.write(`web_client: bad MIC_PATTERN segment ${JSON.stringify(part)} (want tone:MS or silence:MS)\n`);
      rmSync(tmp, { recursive: true, force: true });
      process.exit(2);
    }
    return { tone: m[1] === 'tone', samples: Math.round((Number(m[2]) * rate) / 1000) };
  });
  const total = segments.reduce((n, s) => n + s.samples, 0);
  const out = Buffer.alloc(44 + total * 2);
  out.write('RIFF', 0);
  out.writeUInt32LE(36 + total * 2, 4);
  out.write('WAVEfmt ', 8);
  out.writeUInt32LE(16, 16);
  out.writeUInt16LE(1, 20); // PCM
  out.writeUInt16LE(1, 22); // mono
  out.writeUInt32LE(rate, 24);
  out.writeUInt32LE(rate * 2, 28);
  out.writeUInt16LE(2, 32);
  out.writeUInt16LE(16, 34);
  out.write('data', 36);
  out.writeUInt32LE(total * 2, 40);
  let i = 0;
  for (const s of segments) {
    for (let n = 0; n < s.samples; n++, i++) {
      const v = s.tone ? Math.round(0.5 * 32767 * Math.sin((2 * Math.PI * 440 * n) / rate)) : 0;
      out.writeInt16LE(v, 44 + i * 2);
    }
  }
  return out;
}

browser = await chromium.launch({
  executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
  headless: true,
  timeout: 30_000,
  args: [
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--allow-loopback-in-peer-connection',
    '--use-fake-device-for-media-stream',
    '--use-fake-ui-for-media-stream',
    '--autoplay-policy=no-user-gesture-required',
    '--disable-background-timer-throttling',
    `--use-file-for-fake-audio-capture=${wav}`,
  ],
});
const context = await browser.newContext({ permissions: ['microphone'] });
const page = await context.newPage();
page.on('pageerror', (e) => emit({ event: 'error', error: `pageerror: ${e.message}` }));
// Events the page reports go straight to stdout.
await page.exposeFunction('voxgateReport', (o) => emit(o));
await page.goto(signalUrl + '/healthz', { waitUntil: 'load', timeout: 15_000 });

// Installs the client in the page: window.voxgateRun(cmd) runs one command.
await page.evaluate(async ({ base, token }) => {
  const report = (o) => window.voxgateReport(o);
  // Every peer connection the library makes reports its ICE states and late candidates, with
  // the wall clock, so a test can tell when the browser itself noticed a fault.
  // What the client sends on its turns channel is kept as sent, for `turns`.
  const reports = [];
  const turns = [];
  const Native = window.RTCPeerConnection;
  window.RTCPeerConnection = class extends Native {
    constructor(...args) {
      super(...args);
      this.addEventListener('iceconnectionstatechange', () =>
        report({ event: 'ice', state: this.iceConnectionState, wall: Date.now() }));
      this.addEventListener('icecandidate', (e) =>
        report({ event: 'candidate', candidate: e.candidate?.candidate ?? null, wall: Date.now() }));
    }
    createDataChannel(label, init) {
      const channel = super.createDataChannel(label, init);
      if (label === 'voxgate.turns') {
        const send = channel.send.bind(channel);
        channel.send = (data) => {
          send(data);
          let parsed = data;
          try { parsed = JSON.parse(data); } catch { /* kept as text */ }
          const r = { report: parsed, wall: Date.now() };
          reports.push(r);
          report({ event: 'turn_report', ...r });
        };
      }
      return channel;
    }
  };
  const lib = await import(base + '/voxgate.js');
  let call = null;
  let port = null;
  // Media through the test's proxy: the answer's UDP candidates point at it, its TCP ones go
  // (ICE-TCP straight to the transceiver would bypass the proxy).
  const transform = (sdp) => {
    if (port === null) return sdp;
    return sdp
      .split('\r\n')
      .filter((l) => !(l.startsWith('a=candidate:') && / tcp /i.test(l)))
      .map((l) => {
        if (!l.startsWith('a=candidate:')) return l;
        const f = l.split(' ');
        f[4] = '127.0.0.1';
        f[5] = String(port);
        return f.join(' ');
      })
      .join('\r\n');
  };
  // The ear: samples the remote audio every 10 ms (WebAudio) and keeps when it was loud. The
  // track inside `remoteStream` changes when the call resumes on a new session, so the source
  // follows whichever track the stream holds now.
  const LOUD_RMS = 0.01; // -40 dBFS: the echoed tone is far above, silence and comfort noise below
  const loudAt = [];
  const startEar = (stream) => {
    const ctx = new AudioContext();
    void ctx.resume();
    const analyser = ctx.createAnalyser();
    analyser.fftSize = 512;
    const buf = new Float32Array(analyser.fftSize);
    let track = null;
    let source = null;
    setInterval(() => {
      const now = stream.getAudioTracks()[0] ?? null;
      if (now !== track) {
        source?.disconnect();
        source = now ? ctx.createMediaStreamSource(new MediaStream([now])) : null;
        source?.connect(analyser);
        track = now;
      }
      analyser.getFloatTimeDomainData(buf);
      let sum = 0;
      for (const v of buf) sum += v * v;
      if (Math.sqrt(sum / buf.length) > LOUD_RMS) loudAt.push(Date.now());
      while (loudAt.length > 60_000) loudAt.shift();
    }, 10);
  };
  const heard = (since) => {
    const w = loudAt.filter((t) => t >= since);
    let maxGapMs = 0;
    for (let i = 1; i < w.length; i++) maxGapMs = Math.max(maxGapMs, w[i] - w[i - 1]);
    return { maxGapMs, loudMs: w.length * 10, lastLoudAt: w.length ? w[w.length - 1] : null };
  };
  window.voxgateRun = async (c) => {
    switch (c.cmd) {
      case 'connect': {
        port = c.port ?? null;
        const t0 = performance.now();
        call = await lib.connect(base, {
          token: token || undefined,
          answerTransform: transform,
          reconnect: { backoffMs: 300 },
          liveness: c.liveness,
        });
        call.on('state', (state) => report({ event: 'state', state, at: performance.now(), wall: Date.now() }));
        call.on('message', (message) => report({ event: 'message', message }));
        call.on('ended', (reason) => report({ event: 'ended', reason, at: performance.now() }));
        call.on('resumed', (r) => report({ event: 'resumed', ...r, at: performance.now(), wall: Date.now() }));
        call.on('turn', (t) => {
          const e = { ...t, at: performance.now(), wall: Date.now() };
          turns.push(e);
          report({ event: 'turn', ...e });
        });
        // Render what the backend sends: Chromium measures inbound audio energy only then.
        const el = new Audio();
        el.srcObject = call.remoteStream;
        el.play().catch(() => {});
        startEar(call.remoteStream);
        report({
          event: 'connected',
          sessionId: call.sessionId,
          sessionUrl: call.sessionUrl,
          connectMs: Math.round(performance.now() - t0),
        });
        break;
      }
      case 'port':
        port = c.port;
        break;
      case 'send':
        call.send(c.message);
        break;
      case 'mute':
        call.mute();
        break;
      case 'unmute':
        call.unmute();
        break;
      case 'stats':
        return { stats: await call.stats(), state: call.state, attempts: call.reconnectAttempts };
      case 'heard':
        return heard(c.since);
      case 'turns':
        return { turns, reports };
      case 'hangup':
        await call.hangup();
        break;
      default:
        throw new Error(`unknown command ${c.cmd}`);
    }
  };
}, { base: signalUrl, token: process.env.TOKEN || '' });
emit({ event: 'ready' });

for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  let c;
  try {
    c = JSON.parse(line);
  } catch (e) {
    emit({ event: 'error', error: `bad command line: ${e}` });
    continue;
  }
  if (c.cmd === 'quit') break;
  try {
    const result = await page.evaluate((cmd) => window.voxgateRun(cmd), c);
    emit({ event: 'done', cmd: c.cmd, result: result ?? null });
  } catch (e) {
    emit({ event: 'error', cmd: c.cmd, error: String(e && e.message ? e.message : e) });
  }
}
await quit(0);
