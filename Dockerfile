# gitmem as a container image: a static binary on distroless, run as a
# non-root user, the memory in the /data volume, serving HTTP on 7077.
#
#   docker build -t gitmem .
#   docker run -d --name gitmem -p 7077:7077 -v gitmem-data:/data \
#     -e GITMEM_TOKEN="$(openssl rand -hex 32)" gitmem
#   docker exec gitmem gitmem log          # the operator commands are in the image too
#
# Without GITMEM_TOKEN the server refuses to start: it listens on every
# interface of the container. Every setting is also an environment variable
# (docs/operations.md#settings).

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# BUILD_DATE (say, --build-arg BUILD_DATE=$(date -u +%FT%TZ)) shows in gitmem version.
ARG BUILD_DATE=
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.buildDate=${BUILD_DATE}" -o /out/gitmem ./cmd/gitmem \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/gitmem /usr/local/bin/gitmem
COPY --from=build --chown=65532:65532 /out/data /data
ENV GITMEM_REPO=/data GITMEM_LOG_FORMAT=json
VOLUME /data
EXPOSE 7077
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/gitmem"]
CMD ["serve", "--http", "0.0.0.0:7077"]
