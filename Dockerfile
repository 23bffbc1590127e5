# syntax=docker/dockerfile:1
# Yosan gateway image: a static Go binary on distroless (nonroot). Migrations are embedded.
#   docker build -t yosan .
#   docker compose up        (with PostgreSQL; see docker-compose.yml)

FROM golang:1.26-bookworm AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-buildvcs=false
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/yosan ./cmd/yosan

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/yosan /usr/local/bin/yosan
ENV YOSAN_ADDR=0.0.0.0:8080
EXPOSE 8080
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/yosan"]
CMD ["serve"]
