#!/usr/bin/env node
// The demo page (transceiver/web/index.html) in headless Chromium, talking to a voice agent:
// Chromium's fake microphone plays WAV (speech after some silence, once), the page's "Connect
// microphone" button is pressed, and the page is read until its transcript pane shows what the
// agent heard and answered and its latency line shows a time. The level meters' widths are
// sampled meanwhile.
//
// Env: SIGNAL_URL (the transceiver's signaling base URL), WAV (16-bit PCM), TIMEOUT_MS (90000).
// Prints ONE JSON line: {ok, user, agent, latency, maxIn, maxOut, error?, console}.

import { chromium } from 'playwright-core';

const signalUrl = (process.env.SIGNAL_URL || '').replace(/\/$/, '');
const wav = process.env.WAV || '';
const timeoutMs = Number(process.env.TIMEOUT_MS || 90_000);
const result = { ok: false };
let browser = null;

function emit(code, error) {
  if (error) result.error = error;
  console.log(JSON.stringify(result));
  process.exitCode = code;
}

try {
  if (!signalUrl || !wav) throw new Error('SIGNAL_URL and WAV are required');
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
    headless: true,
    timeout: 30_000,
    args: [
      '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--allow-loopback-in-peer-connection',
      '--use-fake-device-for-media-stream', '--use-fake-ui-for-media-stream',
      '--autoplay-policy=no-user-gesture-required',
      `--use-file-for-fake-audio-capture=${wav}%noloop`,
    ],
  });
  const context = await browser.newContext({ permissions: ['microphone'] });
  const page = await context.newPage();
  const consoleLines = [];
  result.console = consoleLines;
  page.on('console', (m) => { if (consoleLines.length < 30) consoleLines.push(`${m.type()}: ${m.text()}`); });
  page.on('pageerror', (e) => { if (consoleLines.length < 30) consoleLines.push(`pageerror: ${e.message}`); });
  await page.goto(signalUrl + '/', { waitUntil: 'load', timeout: 10_000 });
  await page.click('#connect');
  const deadline = Date.now() + timeoutMs;
  let maxIn = 0, maxOut = 0;
  for (;;) {
    const s = await page.evaluate(() => ({
      user: [...document.querySelectorAll('#transcript .user')].map((p) => p.textContent),
      agent: [...document.querySelectorAll('#transcript .agent')].map((p) => p.textContent),
      notes: [...document.querySelectorAll('#transcript .note')].map((p) => p.textContent),
      latency: document.getElementById('latency').textContent,
      status: document.getElementById('status').textContent,
      levelIn: parseFloat(document.getElementById('level-in').style.width) || 0,
      levelOut: parseFloat(document.getElementById('level-out').style.width) || 0,
    }));
    maxIn = Math.max(maxIn, s.levelIn);
    maxOut = Math.max(maxOut, s.levelOut);
    Object.assign(result, { user: s.user, agent: s.agent, notes: s.notes, latency: s.latency, status: s.status, maxIn, maxOut });
    if (s.user.length && s.agent.length && /\d+ ms/.test(s.latency) && maxOut > 0) break;
    if (Date.now() > deadline) throw new Error(`timed out: ${JSON.stringify(s)}`);
    await page.waitForTimeout(20);
  }
  result.ok = true;
  emit(0);
} catch (e) {
  emit(1, e.message.split('\n')[0]);
} finally {
  if (browser) await browser.close().catch(() => {});
}
