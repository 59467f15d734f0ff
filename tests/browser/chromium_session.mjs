#!/usr/bin/env node
// Drives Debian's Chromium (through playwright-core) as an unmodified WebRTC client of the voxgate
// transceiver: getUserMedia (a fake microphone fed from a generated WAV) -> RTCPeerConnection ->
// WHIP-shaped POST /v1/sessions -> connected -> audio for HOLD_MS -> GET the session -> DELETE.
//
// Env:
//   SIGNAL_URL     base URL of the transceiver's signaling server (required), e.g. http://127.0.0.1:8080
//   TOKEN          bearer token (optional)
//   HOLD_MS        how long to keep sending audio once connected (default 3000)
//   EXPECT_STATUS  if set (e.g. 401): only POST the offer and check that the status is this one
//   STUB_PAGE=1    do not load SIGNAL_URL/ from the server: serve a blank page at that origin from
//                  inside the browser (for checking this script without a server)
//   AUDIO=speech   generate speech with espeak-ng instead of a 440 Hz sine
//   EXPECT_ECHO=1  also require audio back from the server (inbound totalAudioEnergy > 0)
//   EXPECT_TRANSPORT=tcp  also require the selected candidate pair to use this protocol (udp or tcp)
//                  on both ends; the report's selectedPair always names both candidates
//
// Prints ONE JSON line on stdout: {ok, packetsSent, server, deleteStatus, connectMs, error?, ...}.
// Exit 0 on success, 1 otherwise (the reason on stderr).

import { chromium } from 'playwright-core';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const HARD_TIMEOUT_MS = 60_000;
const CONNECT_TIMEOUT_MS = 15_000;
const ICE_GATHER_TIMEOUT_MS = 2_000;

const result = { ok: false };
let browser = null;
let tmp = null;
let finished = false;

function emit(exitCode, reason) {
  if (finished) return;
  finished = true;
  if (reason) {
    result.error = reason;
    process.stderr.write(`chromium_session: FAIL: ${reason}\n`);
  }
  process.stdout.write(JSON.stringify(result) + '\n');
  process.exitCode = exitCode;
}

function cleanupTmp() {
  if (tmp) {
    try { rmSync(tmp, { recursive: true, force: true }); } catch { /* ignore */ }
    tmp = null;
  }
}

// Hard timeout: whatever hangs (launch, navigation, evaluate), the process ends within 60 s.
const hardTimer = setTimeout(async () => {
  emit(1, `hard timeout after ${HARD_TIMEOUT_MS} ms (stage: ${result.stage ?? 'unknown'})`);
  const b = browser;
  browser = null;
  try {
    if (b) await Promise.race([b.close(), new Promise((r) => setTimeout(r, 5000))]);
  } catch { /* ignore */ }
  cleanupTmp();
  process.exit(1);
}, HARD_TIMEOUT_MS);
hardTimer.unref();

function makeWav(dir) {
  const wav = join(dir, 'mic.wav');
  if (process.env.AUDIO === 'speech') {
    const raw = join(dir, 'speech.wav');
    execFileSync('espeak-ng', ['-w', raw, 'Hello from the voxgate browser test. One two three four five.'], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    // Chromium's fake capture wants plain PCM; resample to 48 kHz mono 16 bit and pad to 6 s.
    // The capture loops the file from getUserMedia on, not from the connection: with a 10 s
    // period, a call that connected just as the 3.9 s of speech ended (a UDP-blocked caller
    // falls back to TCP after ~3.4 s) heard its first echo ~10.6 s later, after a 9 s hold, and
    // udp_blocked's direct-mode test failed in CI (inbound audio 0; its retry passed); the
    // connect time puts the loop's phase near that edge every run. With 6 s an utterance ends
    // (0.6 s of silence) within 6.6 s of connecting wherever the loop stands, and 2.1 s of
    // silence leave the echo time to play before the next words barge in.
    execFileSync('sox', [raw, '-r', '48000', '-c', '1', '-b', '16', wav, 'pad', '0', '6', 'trim', '0', '6'], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
  } else {
    execFileSync('sox', ['-n', '-r', '48000', '-c', '1', '-b', '16', wav, 'synth', '10', 'sine', '440', 'vol', '0.5'], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
  }
  if (statSync(wav).size < 1000) throw new Error(`generated WAV ${wav} is too small`);
  return wav;
}

// Runs inside the page. Self-contained: uses none of the page's own scripts.
async function browserSession(opts) {
  const out = { stage: 'getUserMedia' };
  const log = [];
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  const authHeaders = opts.token ? { Authorization: `Bearer ${opts.token}` } : {};
  let pc = null;
  let stream = null;
  try {
    if (!navigator.mediaDevices || !navigator.mediaDevices.getUserMedia) {
      throw new Error(`navigator.mediaDevices.getUserMedia unavailable (secure context: ${window.isSecureContext})`);
    }
    stream = await navigator.mediaDevices.getUserMedia({ audio: true });
    const tracks = stream.getAudioTracks();
    if (tracks.length === 0) throw new Error('getUserMedia returned no audio track');
    out.audioTrack = tracks[0].label;

    out.stage = 'offer';
    pc = new RTCPeerConnection({ iceServers: [] });
    pc.onconnectionstatechange = () => log.push(`connectionState=${pc.connectionState}`);
    pc.oniceconnectionstatechange = () => log.push(`iceConnectionState=${pc.iceConnectionState}`);
    for (const t of tracks) pc.addTrack(t, stream);
    // Play what the server sends: Chromium only measures inbound audio energy for a track
    // that is rendered.
    pc.ontrack = (e) => {
      const el = new Audio();
      el.srcObject = e.streams[0] || new MediaStream([e.track]);
      el.play().catch((err) => log.push(`remote audio play failed: ${err}`));
    };
    const dc = pc.createDataChannel('oai-events');
    out.dataChannelOpen = false;
    dc.onopen = () => { out.dataChannelOpen = true; };
    await pc.setLocalDescription(await pc.createOffer());

    out.stage = 'ice-gathering';
    if (pc.iceGatheringState !== 'complete') {
      await Promise.race([
        new Promise((resolve) => {
          pc.addEventListener('icegatheringstatechange', () => {
            if (pc.iceGatheringState === 'complete') resolve();
          });
          pc.addEventListener('icecandidate', (e) => { if (!e.candidate) resolve(); });
        }),
        sleep(opts.iceGatherTimeoutMs),
      ]);
    }
    const offer = pc.localDescription.sdp;

    out.stage = 'post';
    const postUrl = new URL('/v1/sessions', opts.signalUrl).toString();
    const t0 = performance.now();
    let resp;
    try {
      resp = await fetch(postUrl, {
        method: 'POST',
        headers: { 'Content-Type': 'application/sdp', ...authHeaders },
        body: offer,
      });
    } catch (e) {
      throw new Error(`POST ${postUrl} failed: ${e}`);
    }
    out.postStatus = resp.status;
    const answer = await resp.text();
    const location = resp.headers.get('Location');

    if (opts.expectStatus) {
      out.ok = resp.status === opts.expectStatus;
      if (!out.ok) out.error = `POST ${postUrl}: expected status ${opts.expectStatus}, got ${resp.status}: ${answer.slice(0, 300)}`;
      if (resp.status === 201 && location) {
        // An unexpected session was created: end it.
        try {
          const d = await fetch(new URL(location, opts.signalUrl).toString(), { method: 'DELETE', headers: authHeaders });
          out.deleteStatus = d.status;
        } catch { /* ignore */ }
      }
      out.stage = 'done';
      return out;
    }

    if (resp.status !== 201) throw new Error(`POST ${postUrl}: expected 201, got ${resp.status}: ${answer.slice(0, 300)}`);
    if (!location) throw new Error(`POST ${postUrl}: 201 without a Location header`);
    const sessionUrl = new URL(location, opts.signalUrl).toString();
    out.location = location;
    const ct = resp.headers.get('Content-Type') || '';
    if (!ct.toLowerCase().startsWith('application/sdp')) log.push(`answer Content-Type is '${ct}'`);

    out.stage = 'set-remote-description';
    await pc.setRemoteDescription({ type: 'answer', sdp: answer });

    out.stage = 'connecting';
    if (pc.connectionState !== 'connected') {
      await new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`not connected after ${opts.connectTimeoutMs} ms (connectionState=${pc.connectionState}, iceConnectionState=${pc.iceConnectionState})`)),
          opts.connectTimeoutMs,
        );
        pc.addEventListener('connectionstatechange', () => {
          if (pc.connectionState === 'connected') { clearTimeout(timer); resolve(); }
          if (pc.connectionState === 'failed' || pc.connectionState === 'closed') {
            clearTimeout(timer);
            reject(new Error(`connectionState=${pc.connectionState} (iceConnectionState=${pc.iceConnectionState})`));
          }
        });
      });
    }
    out.connectMs = Math.round(performance.now() - t0);

    out.stage = 'hold';
    await sleep(opts.holdMs);
    if (dc.readyState === 'open') {
      try {
        dc.send(JSON.stringify({ type: 'voxgate.test.hello', client: 'chromium' }));
      } catch (e) {
        log.push(`data channel send failed: ${e}`);
      }
    }

    out.stage = 'stats';
    const stats = await pc.getStats();
    out.packetsSent = 0;
    out.packetsReceived = 0;
    out.totalAudioEnergy = 0;
    // The selected pair is the one the transport names (the standard way); a nominated,
    // succeeded pair stands in where a browser does not say.
    let selectedId = null;
    stats.forEach((r) => {
      if (r.type === 'transport' && r.selectedCandidatePairId) selectedId = r.selectedCandidatePairId;
    });
    const candidate = (id) => {
      const c = stats.get(id);
      return c && {
        protocol: c.protocol, candidateType: c.candidateType, tcpType: c.tcpType ?? null,
        address: c.address ?? c.ip ?? null, port: c.port,
      };
    };
    stats.forEach((r) => {
      const kind = r.kind || r.mediaType;
      if (r.type === 'outbound-rtp' && kind === 'audio') out.packetsSent += r.packetsSent || 0;
      if (r.type === 'inbound-rtp' && kind === 'audio') {
        out.packetsReceived += r.packetsReceived || 0;
        out.totalAudioEnergy += r.totalAudioEnergy || 0;
      }
      const selected = selectedId ? r.id === selectedId : r.nominated && r.state === 'succeeded';
      if (r.type === 'candidate-pair' && selected) {
        out.selectedPair = {
          rtt: r.currentRoundTripTime, bytesSent: r.bytesSent, bytesReceived: r.bytesReceived,
          nominated: r.nominated, state: r.state,
          local: candidate(r.localCandidateId), remote: candidate(r.remoteCandidateId),
        };
      }
    });
    out.connectionState = pc.connectionState;

    out.stage = 'get-session';
    const g = await fetch(sessionUrl, { headers: authHeaders });
    const gBody = await g.text();
    if (g.status !== 200) throw new Error(`GET ${sessionUrl}: expected 200, got ${g.status}: ${gBody.slice(0, 300)}`);
    try {
      out.server = JSON.parse(gBody);
    } catch (e) {
      throw new Error(`GET ${sessionUrl}: body is not JSON: ${gBody.slice(0, 300)}`);
    }

    out.stage = 'delete';
    const d = await fetch(sessionUrl, { method: 'DELETE', headers: authHeaders });
    out.deleteStatus = d.status;

    out.stage = 'checks';
    const problems = [];
    if (!(out.packetsSent > 0)) problems.push(`packetsSent=${out.packetsSent}`);
    const inPkts = out.server?.counters?.audio_packets_in;
    if (!(inPkts > 0)) problems.push(`server counters.audio_packets_in=${inPkts}`);
    if (out.deleteStatus !== 204) problems.push(`DELETE status ${out.deleteStatus} (expected 204)`);
    if (opts.expectEcho && !(out.totalAudioEnergy > 0)) {
      problems.push(`inbound totalAudioEnergy=${out.totalAudioEnergy} (expected audio back)`);
    }
    if (opts.expectTransport) {
      const p = out.selectedPair;
      if (!p || p.local?.protocol !== opts.expectTransport || p.remote?.protocol !== opts.expectTransport) {
        problems.push(`selected pair ${JSON.stringify(p)} (expected ${opts.expectTransport} on both ends)`);
      }
    }
    out.ok = problems.length === 0;
    if (!out.ok) out.error = problems.join('; ');
    out.stage = 'done';
    return out;
  } catch (e) {
    out.ok = false;
    out.error = `[${out.stage}] ${e && e.message ? e.message : e}`;
    return out;
  } finally {
    out.log = log;
    try { if (pc) pc.close(); } catch { /* ignore */ }
    try { if (stream) stream.getTracks().forEach((t) => t.stop()); } catch { /* ignore */ }
  }
}

async function main() {
  const signalUrl = (process.env.SIGNAL_URL || '').replace(/\/+$/, '');
  if (!signalUrl) return emit(1, 'SIGNAL_URL is not set');
  let origin;
  try {
    origin = new URL(signalUrl).origin;
  } catch {
    return emit(1, `SIGNAL_URL is not a URL: ${signalUrl}`);
  }
  const holdMs = Number.parseInt(process.env.HOLD_MS || '3000', 10);
  const expectStatus = process.env.EXPECT_STATUS ? Number.parseInt(process.env.EXPECT_STATUS, 10) : null;
  if (!Number.isFinite(holdMs) || holdMs < 0) return emit(1, `bad HOLD_MS: ${process.env.HOLD_MS}`);
  if (process.env.EXPECT_STATUS && !Number.isFinite(expectStatus)) return emit(1, `bad EXPECT_STATUS: ${process.env.EXPECT_STATUS}`);
  if (expectStatus) result.expectStatus = expectStatus;

  result.stage = 'wav';
  tmp = mkdtempSync(join(tmpdir(), 'voxgate-chromium-'));
  const wav = makeWav(tmp);

  result.stage = 'launch';
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
      `--use-file-for-fake-audio-capture=${wav}`,
      // getUserMedia needs a secure context; loopback already is one, other hosts are not.
      `--unsafely-treat-insecure-origin-as-secure=${origin}`,
    ],
  });
  const context = await browser.newContext({ permissions: ['microphone'] });
  const page = await context.newPage();
  const consoleLines = [];
  page.on('console', (m) => { if (consoleLines.length < 50) consoleLines.push(`${m.type()}: ${m.text()}`); });
  page.on('pageerror', (e) => { if (consoleLines.length < 50) consoleLines.push(`pageerror: ${e.message}`); });

  result.stage = 'navigate';
  const pageUrl = signalUrl + '/';
  if (process.env.STUB_PAGE === '1') {
    await page.route(pageUrl, (route) =>
      route.fulfill({ status: 200, contentType: 'text/html', body: '<!doctype html><title>voxgate stub</title>' }));
  }
  try {
    const resp = await page.goto(pageUrl, { waitUntil: 'load', timeout: 10_000 });
    result.pageStatus = resp ? resp.status() : null;
  } catch (e) {
    return emit(1, `cannot load ${pageUrl}: ${e.message.split('\n')[0]}`);
  }

  result.stage = 'session';
  const r = await page.evaluate(browserSession, {
    signalUrl,
    token: process.env.TOKEN || '',
    holdMs,
    expectEcho: process.env.EXPECT_ECHO === '1',
    expectTransport: process.env.EXPECT_TRANSPORT || '',
    expectStatus,
    connectTimeoutMs: CONNECT_TIMEOUT_MS,
    iceGatherTimeoutMs: ICE_GATHER_TIMEOUT_MS,
  });
  const { ok, error, stage, ...rest } = r;
  Object.assign(result, rest);
  result.stage = stage;
  result.ok = !!ok;
  if (!result.ok) {
    if (consoleLines.length) result.console = consoleLines;
    return emit(1, error || 'failed');
  }
  return emit(0);
}

try {
  await main();
} catch (e) {
  emit(1, `[${result.stage ?? 'start'}] ${e && e.message ? e.message.split('\n')[0] : e}`);
} finally {
  const b = browser;
  browser = null;
  if (b) {
    try { await Promise.race([b.close(), new Promise((r) => setTimeout(r, 10_000))]); } catch { /* ignore */ }
  }
  cleanupTmp();
  clearTimeout(hardTimer);
}
// Do not wait for stray handles (the browser is closed or abandoned by now).
process.exit(process.exitCode ?? 1);
