# Runtime image for provider-clusterops, for those with a container engine.
# `make xpkg` builds the same image without one (see hack/xpkg).
#
# Build the binary first:
#   CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -o bin/linux_amd64/provider ./cmd/provider
FROM gcr.io/distroless/static:nonroot

COPY bin/linux_amd64/provider /usr/local/bin/provider

USER 65532:65532
ENTRYPOINT ["/usr/local/bin/provider"]
