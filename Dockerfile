# syntax=docker/dockerfile:1
# Switchboard: a static-enough Rust binary on a slim Debian runtime.
#
#   docker build -t switchboard .
#   docker run -p 8080:8080 -v switchboard-data:/data switchboard
#
# The first start writes the first human's token to
# /data/switchboard.db.bootstrap-token (mode 0600), or takes it from
# SWITCHBOARD_BOOTSTRAP_TOKEN; see docs/deploy.md.

# --- build ------------------------------------------------------------------
FROM rust:1-bookworm AS builder
WORKDIR /src

# Dependencies first, in a layer of their own: it is rebuilt only when
# Cargo.toml or Cargo.lock change. Every target the manifest declares gets
# an empty stand-in so that cargo accepts the manifest.
# .cargo/config.toml sets the bundled SQLite's build flags (docs/decisions.md).
COPY Cargo.toml Cargo.lock ./
COPY .cargo ./.cargo
RUN mkdir -p src benches tests/it \
 && echo 'fn main() {}' > src/main.rs \
 && touch src/lib.rs tests/it/main.rs \
 && for bench in b1_queue_loop b2_mcp_loop b3_doorbell_latency b4_stream_memory b5_sweep_cost b7_wake_latency b9_intake_rules b10_admission b11_queue_page mcp_path; do \
        echo 'fn main() {}' > "benches/$bench.rs"; \
    done \
 && cargo build --release --locked --bin switchboard \
 && rm -rf src

# The crate itself (migrations are compiled in from src/store/migrations).
COPY src ./src
RUN touch src/main.rs src/lib.rs \
 && cargo build --release --locked --bin switchboard \
 && install -D -m 0755 target/release/switchboard /out/switchboard

# --- runtime ----------------------------------------------------------------
FROM debian:bookworm-slim
# A fixed, unprivileged uid/gid, so that a bind-mounted /data can be chowned
# to it ahead of time (chown 10001:10001 /srv/switchboard).
RUN groupadd --system --gid 10001 switchboard \
 && useradd --system --uid 10001 --gid 10001 --home-dir /data --shell /usr/sbin/nologin switchboard \
 && install -d -o 10001 -g 10001 -m 0700 /data
COPY --from=builder /out/switchboard /usr/local/bin/switchboard

ENV SWITCHBOARD_LISTEN=0.0.0.0:8080 \
    SWITCHBOARD_DATABASE_URL=/data/switchboard.db
# For PostgreSQL the first start's token file lands in the working directory.
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8080
USER 10001:10001
# No HEALTHCHECK: the slim image has no HTTP client (curl would add ~10 MB and
# a TLS stack to the attack surface). Probe GET /healthz (alive) and
# GET /readyz (database reachable, schema current) from the orchestrator or
# the proxy instead (deploy/Caddyfile does).
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/switchboard"]
CMD ["serve"]
