#!/usr/bin/env bash
# The network runs' wheels (scripts/fetch-wheels.sh net): kept under this
# name for the callers that use it.
exec "$(dirname "$0")/fetch-wheels.sh" net "$@"
