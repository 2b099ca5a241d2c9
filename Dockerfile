# lwbench's image, for a load run on a Kubernetes cluster (lwbench manifest
# prints the Job that runs it; README: "A load on a real cluster"):
#
#   docker build -t lwbench:dev .
#
# The binary is static (CGO_ENABLED=0) and runs as distroless's nonroot
# user (65532), which lwbench manifest's pods run as. The build context
# leaves .git out (.dockerignore), so `lwbench version` in the image
# reports no commit: tag the image with it instead
# (docker build -t lwbench:$(git rev-parse --short HEAD) .).

FROM golang:1.26 AS build
WORKDIR /src
# The modules first, so that a change of the sources reuses their layer.
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY internal/ internal/
COPY pkg/ pkg/
RUN CGO_ENABLED=0 go build -trimpath -o /out/lwbench ./cmd/lwbench

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/lwbench /usr/local/bin/lwbench
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/lwbench"]
