# Convenience targets; each is one script, which also runs without make.

.PHONY: setup test python npm embed

# Build (root and apt-get; cached by its inputs) and prepare the own
# CPython 3.13, the default build.
setup:
	./scripts/setup.sh

test: setup
	go test ./...

# The own build alone (~7-11 min the first time, then seconds).
python:
	./scripts/build-python.sh

# The npm fallback (CPython 3.12 -O0), for hosts that cannot build.
npm:
	./scripts/setup.sh --python npm

embed:
	./scripts/embed.sh
