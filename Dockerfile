# Airlock's HTTP API in a container, from this repository.
#
# The build stage (Debian trixie, as root, as scripts/build-python.sh needs:
# debootstrap, chroot, apt) builds the own CPython 3.13 (~10 min the first
# time; the chroot and the build stay in a cache mount, so a rebuild with
# the same inputs takes seconds), asyncifies it with Binaryen and embeds
# it, as a bundle (airlock setup --export), in a static, cgo-free binary.
# The runtime stage is that one file and an empty cache directory, run as
# an unprivileged user: compiled code and the snapshot image depend on the
# machine, so the server makes them there when it starts (~4-5 s).
#
#   docker build -t airlock .
#   docker run --rm -p 8080:8080 -e AIRLOCK_TOKEN=change-me airlock
#   curl -H 'Authorization: Bearer change-me' -d '{"code":"print(1)"}' localhost:8080/v1/run
#
# With a bundle another host exported (airlock setup --export FILE), put in
# the build context, the CPython build is skipped:
#
#   docker build --build-arg BUNDLE=airlock-bundle.tar -t airlock .

ARG GO_IMAGE=golang:1.26-trixie

FROM ${GO_IMAGE} AS build
ENV AIRLOCK_CACHE_DIR=/cache CGO_ENABLED=0
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG BUNDLE=
# The last step checks the binary runs on its own: an empty cache, nothing
# on PATH. (No heredoc and no syntax directive: the frontend built into
# the builder runs this, with nothing more to pull.)
RUN --mount=type=cache,target=/cache \
	set -eu; \
	if [ -n "$BUNDLE" ]; then \
		./scripts/embed.sh "$BUNDLE"; \
	else \
		./scripts/build-python.sh; \
		command -v wasm-opt >/dev/null || { apt-get update -qq && apt-get install -y -qq --no-install-recommends binaryen >/dev/null; }; \
		./scripts/embed.sh; \
	fi; \
	go build -tags airlock_embed -trimpath -ldflags='-s -w' -o /out/airlock ./cmd/airlock; \
	mkdir -p /out/cache; \
	env -i AIRLOCK_CACHE_DIR="$(mktemp -d)" /out/airlock run -c 'import sys; print("airlock: python", sys.version.split()[0])'

FROM scratch
COPY --from=build /out/airlock /airlock
COPY --from=build --chown=65532:65532 /out/cache /cache
ENV AIRLOCK_CACHE_DIR=/cache HOME=/cache
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/airlock", "serve", "--addr", "0.0.0.0:8080"]
