export declare const DEFAULT_MIC: MediaTrackConstraints;
/** The defaults with the app's overrides on top (`true` → the defaults). */
export declare function micConstraints(overrides?: MediaTrackConstraints | true): MediaTrackConstraints;
