#!/usr/bin/env bash
# A real Docker engine for the Docker tests (the CI machine has no image registry: Docker
# episodes build on the local base image). Idempotent: .ci/docker-setup.sh skips what is done.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash .ci/docker-setup.sh
