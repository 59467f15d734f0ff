export declare class Emitter<Events extends Record<string, unknown[]>> {
    private handlers;
    on<K extends keyof Events>(event: K, handler: (...args: Events[K]) => void): () => void;
    off<K extends keyof Events>(event: K, handler: (...args: Events[K]) => void): void;
    protected emit<K extends keyof Events>(event: K, ...args: Events[K]): void;
}
