# syntax=docker/dockerfile:1
# The voxgate relay: the region's public UDP port (behind the UDP load balancer / VIP).
# Build from the repository root:
#   docker build -f deploy/docker/relay.Dockerfile -t voxgate/relay:dev .
# Configuration is environment only (VOXGATE_RELAY_*, see `relay --help`); the fleet key comes
# from a mounted secret file (VOXGATE_RELAY_FLEET_KEY_FILE).

FROM rust:1-bookworm AS build
# No C dependencies (no libopus here), so the stock image builds it as is.
WORKDIR /src
COPY . .
# The one way every build of what ships runs (scripts/run and scripts/bench too): this binary
# alone, release profile, default features: the command `scripts/build-release --command relay`
# prints (scripts/build-release --check, run by scripts/test, holds the two the same).
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p voxgate-relay --bin relay \
 && install -D -m 0755 target/release/relay /out/relay

FROM debian:bookworm-slim
RUN useradd --system --uid 10001 --user-group --no-create-home --shell /usr/sbin/nologin voxgate
COPY --from=build /out/relay /usr/local/bin/relay
COPY deploy/docker/healthcheck.sh /usr/local/bin/voxgate-healthcheck
# Listen on every interface of the container; workers bind the internal port PORT+i, so the
# internal range below must cover VOXGATE_RELAY_WORKERS ports. The ICE-TCP listener shares the
# public IP:port (VOXGATE_RELAY_TCP_LISTEN's default); its thread talks to transceivers from a
# fixed internal port after the workers' (default: any free port) so firewalls can admit it.
ENV VOXGATE_RELAY_LISTEN=0.0.0.0:3478 \
    VOXGATE_RELAY_INTERNAL_LISTEN=0.0.0.0:3578 \
    VOXGATE_RELAY_TCP_INTERNAL_LISTEN=0.0.0.0:3580 \
    VOXGATE_RELAY_WORKERS=2 \
    VOXGATE_RELAY_METRICS_LISTEN=0.0.0.0:9478 \
    RUST_LOG=info
# 3478/udp and 3478/tcp: clients (public; TCP for callers whose networks block UDP).
# 3578-3580/udp: transceivers (internal; 3580 answers the TCP clients). 9478/tcp: /metrics.
EXPOSE 3478/udp 3478/tcp 3578-3580/udp 9478/tcp
USER 10001:10001
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["/usr/local/bin/voxgate-healthcheck", "http", "VOXGATE_RELAY_METRICS_LISTEN", "/metrics"]
ENTRYPOINT ["/usr/local/bin/relay"]
