# cctrace container image: a static binary on an empty base, running as a non-root user.
#   docker build -t cctrace .
# deploy/docker-compose.yml builds it as the stack's cctrace service.

FROM golang:1.26.8 AS build
WORKDIR /src
# Dependencies first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" \
        -o /out/cctrace ./cmd/cctrace \
    && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" \
        -o /out/healthcheck ./deploy/healthcheck \
    && mkdir -p /out/state

FROM scratch
# CA roots for an https upstream (api.anthropic.com); nothing else from the build stage.
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/cctrace /out/healthcheck /usr/local/bin/
# Where cctrace keeps the secret its credential fingerprints are keyed with, so that they stay
# the same across restarts; a volume mounted here starts with this directory's owner.
COPY --from=build --chown=65532:65532 /out/state /var/lib/cctrace
# Inside a container the listeners must take connections from other containers; publish them
# on the host's 127.0.0.1 only (see deploy/docker-compose.yml).
ENV CCTRACE_LISTEN=0.0.0.0:8787 \
    CCTRACE_METRICS_LISTEN=0.0.0.0:9787 \
    CCTRACE_STATE_DIR=/var/lib/cctrace
EXPOSE 8787 9787
USER 65532:65532
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["/usr/local/bin/healthcheck", "http://127.0.0.1:9787/healthz"]
ENTRYPOINT ["/usr/local/bin/cctrace"]
CMD ["serve"]
