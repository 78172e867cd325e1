# projhost's container image: `projhost run` workers (container mode; template.yaml's Mode
# container runs it on ECS Fargate). The SQLite driver is modernc.org/sqlite, pure Go, so the
# binary is static (CGO_ENABLED=0) and the final stage is distroless/static, as a non-root user.
# internal/samtemplate's test parses this file (no Docker engine runs the tests).
#
#   docker build -t projhost .                       # or: docker buildx build --platform linux/arm64,linux/amd64
#   docker run --rm projhost                         # run --help

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS=linux
ARG TARGETARCH
WORKDIR /src
COPY go.mod go.sum ./
# The Go SDK is a module of its own that go.mod replaces with ./sdk/go.
COPY sdk/go/go.mod sdk/go/go.mod
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags=-s -o /out/projhost ./cmd/projhost

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/projhost /projhost
# nonroot is uid/gid 65532; the compilation cache goes to its home, /home/nonroot/.cache.
USER 65532:65532
ENTRYPOINT ["/projhost"]
CMD ["run", "--help"]
