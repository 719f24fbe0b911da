#!/bin/sh
# A container's entrypoint for `lakehouse run`: exec, so that `lakehouse` is the process the container
# runtime's SIGTERM reaches (a shell in between would not pass it on). Arguments go to `lakehouse`
# before `run` (e.g. --config /etc/lakehouse/lakehouse.yaml); secrets come from the environment.
# Give the container the stop grace period `lakehouse service container` prints.
set -eu
here=$(cd "$(dirname "$0")/../.." && pwd)
exec "$here/.venv/bin/lakehouse" "$@" run
