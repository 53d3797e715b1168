# syntax=docker/dockerfile:1
# pacegate: a static binary in a distroless, non-root image.
#
#   docker build -t pacegate .
#   docker run -p 8080:8080 -p 127.0.0.1:9090:9090 \
#     -v ./pacegate.yaml:/etc/pacegate/pacegate.yaml:ro \
#     -e PACEGATE_ADMIN_TOKEN=... pacegate

FROM golang:1.26 AS build
WORKDIR /src
# Dependencies first, so that a source change does not refetch them.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# CGO off: the binary must run on an image without a C library.
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/pacegate .

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/pacegate /pacegate
# Inside a container the listeners must bind every interface; the admin
# API stays off unless a token is configured (PACEGATE_ADMIN_TOKEN).
ENV PACEGATE_LISTEN=0.0.0.0:8080 \
    PACEGATE_ADMIN_LISTEN=0.0.0.0:9090
EXPOSE 8080 9090
USER nonroot:nonroot
# distroless has no curl: the binary checks its own /healthz.
HEALTHCHECK --interval=15s --timeout=5s --start-period=10s --retries=3 \
    CMD ["/pacegate", "healthcheck"]
ENTRYPOINT ["/pacegate"]
CMD ["--config", "/etc/pacegate/pacegate.yaml"]
