# The operator image: a static binary on a distroless base, running as non-root.
# `make image-operator` (bundlegen image operator) builds an equivalent image without
# Docker, reproducibly; docs/images.md compares the two.
# Build from the repository root: docker build -t <image> .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY operator/ operator/
ENV CGO_ENABLED=0
RUN go build -trimpath -ldflags "-s -w" -o /out/manager ./operator/cmd

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
