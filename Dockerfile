# syntax=docker/dockerfile:1
# syncd: a static binary on a distroless non-root base (no shell, no package
# manager; CA certificates and tzdata included).
#
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) \
#     --build-arg REVISION=$(git rev-parse HEAD) -t syncd .
#
# Without VERSION, `syncd version` says dev-<REVISION> (the build context has
# no .git, so Go cannot stamp the revision itself); without either, dev.
#   docker run --rm -e FORMS_API_KEY -v "$PWD/syncd.yaml:/etc/syncd/syncd.yaml:ro" \
#     -v syncd-data:/var/lib/syncd syncd once --config /etc/syncd/syncd.yaml
#
# Deployment on Kubernetes: deploy/k8s/README.md.

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
WORKDIR /src
ENV GOTOOLCHAIN=local
COPY go.mod go.sum ./
COPY cmd/ cmd/
COPY internal/ internal/
ARG VERSION=
ARG REVISION=
ARG TARGETOS
ARG TARGETARCH
# The cache mounts (BuildKit) keep modules and build cache across builds; the
# build downloads only the modules the binary imports (not `go mod download`:
# that would fetch the test-only DuckDB module and its native libraries too).
# Static (no cgo: the DuckDB reader is used by tests only), reproducible paths,
# no symbol tables, the version and revision stamped for `syncd version` and
# the Parquet footers; without Cloud Storage's unused gRPC transport (the
# Makefile says why).
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -buildvcs=false -tags disable_grpc_modules -ldflags "-s -w -X main.version=${VERSION} -X main.revision=${REVISION}" -o /out/syncd ./cmd/syncd

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/syncd /syncd
# 65532 is distroless' "nonroot"; the Kubernetes manifests run as the same uid.
USER 65532:65532
ENTRYPOINT ["/syncd"]
