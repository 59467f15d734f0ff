// Default microphone constraints (reasoning in README.md, "Microphone defaults").
// Echo cancellation stays on: a caller on speakers otherwise feeds the agent its own voice.
// Noise suppression and automatic gain control are off: with Chromium's whole processing chain
// on, the example agent understood 6 of 18 fake-mic utterances, with it off 6 of 6 (issue 38).
// Mono at 48 kHz is what Opus carries to the transceiver anyway.

export const DEFAULT_MIC: MediaTrackConstraints = {
  echoCancellation: true,
  noiseSuppression: false,
  autoGainControl: false,
  channelCount: 1,
  sampleRate: 48000,
};

/** The defaults with the app's overrides on top (`true` → the defaults). */
export function micConstraints(overrides?: MediaTrackConstraints | true): MediaTrackConstraints {
  return { ...DEFAULT_MIC, ...(overrides === true || !overrides ? {} : overrides) };
}
