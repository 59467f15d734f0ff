// A minimal typed event emitter (no dependency): `on` returns its own unsubscribe.

export class Emitter<Events extends Record<string, unknown[]>> {
  private handlers: { [K in keyof Events]?: Array<(...args: Events[K]) => void> } = {};

  on<K extends keyof Events>(event: K, handler: (...args: Events[K]) => void): () => void {
    (this.handlers[event] ??= []).push(handler);
    return () => this.off(event, handler);
  }

  off<K extends keyof Events>(event: K, handler: (...args: Events[K]) => void): void {
    const list = this.handlers[event];
    if (list) this.handlers[event] = list.filter((h) => h !== handler);
  }

  protected emit<K extends keyof Events>(event: K, ...args: Events[K]): void {
    for (const h of this.handlers[event] ?? []) {
      try {
        h(...args);
      } catch (e) {
        // An app's handler throwing must not break the call's own bookkeeping.
        console.error(`voxgate: "${String(event)}" handler threw`, e);
      }
    }
  }
}
