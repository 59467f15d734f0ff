# syntax=docker/dockerfile:1
# The example backend: echo-bot subscribes to transceivers over gRPC and plays each caller's
# utterance back. Build from the repository root:
#   docker build -f deploy/docker/echo-bot.Dockerfile -t voxgate/echo-bot:dev .
# Configuration is environment only (VOXGATE_ECHO_*, see `echo-bot --help`); the gRPC token
# comes from a secret-backed env var (VOXGATE_ECHO_TOKEN).

FROM rust:1-bookworm AS build
# No C dependencies (no libopus here), so the stock image builds it as is.
WORKDIR /src
COPY . .
# The one way every build of what ships runs (scripts/run and scripts/bench too): this binary
# alone, release profile, default features: the command `scripts/build-release --command echo-bot`
# prints (scripts/build-release --check, run by scripts/test, holds the two the same).
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p voxgate-echo-bot --bin echo-bot \
 && install -D -m 0755 target/release/echo-bot /out/echo-bot

FROM debian:bookworm-slim
RUN useradd --system --uid 10001 --user-group --no-create-home --shell /usr/sbin/nologin voxgate
COPY --from=build /out/echo-bot /usr/local/bin/echo-bot
COPY deploy/docker/healthcheck.sh /usr/local/bin/voxgate-healthcheck
ENV RUST_LOG=info
# No listening port: the bot dials the transceivers' gRPC port. It is healthy while it holds a
# connection to at least one of them.
USER 10001:10001
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD ["/usr/local/bin/voxgate-healthcheck", "connected"]
ENTRYPOINT ["/usr/local/bin/echo-bot"]
