# Convenience targets; each is one script, which also runs without make.

.PHONY: setup test python embed

# Fetch and prepare the default build (and the own one, when built).
setup:
	./scripts/setup.sh

test: setup
	go test ./...

# Airlock's own optimised CPython 3.13 (~10 min the first time, needs root;
# cached by its inputs, then seconds). setup then prepares it for snapshots.
python:
	./scripts/build-python.sh
	./scripts/setup.sh

embed:
	./scripts/embed.sh
