# syntax=docker/dockerfile:1
# freshet's container image: a multi-stage build, a distroless runtime, non-root (uid 65532),
# nothing written outside /tmp (the chart mounts an emptyDir there; the root filesystem can be
# read-only).
#
#   docker build -t freshet .                  # the runtime image: /freshet only
#   docker build --target demo -t freshet-news .   # plus the news example (`news`), for the chart's demo
#
# The build uses the committed Cargo.lock (--locked). Checked offline by hadolint in
# scripts/helm-check.sh; see docs/decisions.md for the base images.

# The toolchain the project is tested with (edition 2024, let-chains need at least 1.88).
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
# Cache mounts keep the registry and target between builds on the same builder.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p freshet-proxy -p freshet-examples --bin freshet --bin news \
    && mkdir -p /out \
    && cp target/release/freshet target/release/news /out/

# glibc and libgcc (what a Rust binary links), CA certificates, a nonroot user; no shell.
FROM gcr.io/distroless/cc-debian12:nonroot AS runtime
COPY --from=build /out/freshet /usr/local/bin/freshet
USER 65532:65532
# MySQL protocol (loopback by default; the application is in the same pod) and admin HTTP.
EXPOSE 3307 9307
ENTRYPOINT ["/usr/local/bin/freshet"]
CMD ["--config", "/etc/freshet/freshet.toml"]

FROM runtime AS demo
COPY --from=build /out/news /usr/local/bin/news

# The default target is the runtime image, not the demo.
FROM runtime
