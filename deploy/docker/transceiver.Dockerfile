# syntax=docker/dockerfile:1
# The voxgate transceiver: WebRTC termination, WHIP signaling, the gRPC audio bridge.
# Build from the repository root:
#   docker build -f deploy/docker/transceiver.Dockerfile -t voxgate/transceiver:dev .
# Configuration is environment only (VOXGATE_*, see `transceiver --help`); the fleet key comes
# from a mounted secret file (VOXGATE_FLEET_KEY_FILE), the tokens from secret-backed env vars
# (VOXGATE_TOKEN, VOXGATE_GRPC_TOKEN). VOXGATE_INTERNAL_IP (the address relays reach, e.g. the
# pod IP) and VOXGATE_ADVERTISE (the relay VIP) must be set by the deployment.

FROM rust:1-bookworm AS build
# cmake: libopus is built from source by the opus crate. (Unpinned: the bookworm tag fixes
# the Debian release, and cmake only drives the build.)
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends cmake \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# The one way every build of what ships runs (scripts/run and scripts/bench too): this binary
# alone, release profile, default features: the command `scripts/build-release --command transceiver`
# prints (scripts/build-release --check, run by scripts/test, holds the two the same).
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p voxgate-transceiver --bin transceiver \
 && install -D -m 0755 target/release/transceiver /out/transceiver

FROM debian:bookworm-slim
RUN useradd --system --uid 10001 --user-group --no-create-home --shell /usr/sbin/nologin voxgate
COPY --from=build /out/transceiver /usr/local/bin/transceiver
COPY deploy/docker/healthcheck.sh /usr/local/bin/voxgate-healthcheck
# Media loop i binds VOXGATE_MEDIA_LISTEN's port + i: the UDP range below covers VOXGATE_LOOPS.
# Behind relays, ICE over TCP ends at the relay's TCP listener and reaches the loops' UDP
# sockets, so the loops' own TCP listeners stay off (direct mode, no relay: set
# VOXGATE_TCP_LISTEN=same and open 40000+i/tcp beside the UDP ports).
ENV VOXGATE_SIGNAL_LISTEN=0.0.0.0:8080 \
    VOXGATE_MEDIA_LISTEN=0.0.0.0:40000 \
    VOXGATE_LOOPS=2 \
    VOXGATE_GRPC_LISTEN=0.0.0.0:50051 \
    VOXGATE_TCP_LISTEN=off \
    VOXGATE_LOG_FORMAT=json \
    RUST_LOG=info
# 8080/tcp: signaling, /healthz, /readyz, /metrics. 50051/tcp: gRPC for backends.
# 40000-40001/udp: media loops, reached by relays only.
EXPOSE 8080/tcp 50051/tcp 40000-40001/udp
USER 10001:10001
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["/usr/local/bin/voxgate-healthcheck", "http", "VOXGATE_SIGNAL_LISTEN", "/healthz"]
ENTRYPOINT ["/usr/local/bin/transceiver"]
