//! Compiles `grpc/voxgate.proto` into Rust (prost messages + tonic client and server) when the
//! `grpc` feature is on. `protox` parses the .proto in pure Rust: no system `protoc` needed.

fn main() {
    println!("cargo:rerun-if-changed=grpc/voxgate.proto");
    if std::env::var_os("CARGO_FEATURE_GRPC").is_none() {
        return;
    }
    let fds = protox::compile(["grpc/voxgate.proto"], ["grpc"])
        .unwrap_or_else(|e| panic!("grpc/voxgate.proto does not compile: {e}"));
    tonic_prost_build::configure()
        // PCM and Opus payloads are shared (taps, fan-out) without copying.
        .bytes(".voxgate.v1")
        // A `Quality` (two directions of optional floats) is four times the size of any other
        // uplink message, which are frames sent 50 times a second: boxed (with the ENDED event's
        // summary), they stay small.
        .boxed(".voxgate.v1.Uplink.kind.quality")
        .boxed(".voxgate.v1.SessionEvent.quality")
        .compile_fds(fds)
        .unwrap_or_else(|e| panic!("generating gRPC code failed: {e}"));
}
