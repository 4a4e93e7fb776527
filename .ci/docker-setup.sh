#!/usr/bin/env bash
# Make a real Docker engine and a local base image available (idempotent).
#
#   .ci/docker-setup.sh            # install docker.io + debootstrap if missing,
#                                  # start dockerd if needed, build rgym-local-base:latest
#
# No image registry is reachable in CI, so the base image is built from a
# Debian bookworm rootfs made by debootstrap and loaded with `docker import`.
# The rootfs tarball is cached (RGYM_ROOTFS_CACHE, default ~/.cache/rgym) so a
# second machine setup only re-imports it.  debootstrap uses its own default
# mirror; RGYM_DEBIAN_MIRROR overrides it (a URL of a Debian archive).
set -euo pipefail

BASE_TAG="${RGYM_LOCAL_BASE:-rgym-local-base:latest}"
CACHE_DIR="${RGYM_ROOTFS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rgym}"
ROOTFS_TAR="$CACHE_DIR/bookworm-minbase-rootfs.tar"
MIRROR=(${RGYM_DEBIAN_MIRROR:+"$RGYM_DEBIAN_MIRROR"})   # empty: debootstrap's default
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

log() { printf '[docker-setup] %s\n' "$*" >&2; }

# 1. Packages.
missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
if [ "${#missing[@]}" -gt 0 ]; then
    log "installing ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi

# 2. The daemon.
if ! docker info >/dev/null 2>&1; then
    if ! pgrep -x dockerd >/dev/null 2>&1; then
        # A daemon killed with its session (or the machine) leaves pid files that stop
        # the next one from starting.
        $SUDO rm -f /var/run/docker.pid /var/run/docker/containerd/containerd.pid
    fi
    log "starting dockerd (log: /tmp/dockerd.log)"
    $SUDO sh -c 'nohup dockerd >/tmp/dockerd.log 2>&1 &'
    for _ in $(seq 1 120); do
        if docker info >/dev/null 2>&1; then break; fi
        sleep 0.5
    done
    if ! docker info >/dev/null 2>&1; then
        log "dockerd did not answer within 60 s; last lines of /tmp/dockerd.log:"
        tail -n 30 /tmp/dockerd.log >&2 || true
        exit 1
    fi
fi
log "Docker engine $(docker version --format '{{.Server.Version}}') is running"

# 3. The local base image.
if docker image inspect "$BASE_TAG" >/dev/null 2>&1; then
    log "$BASE_TAG already present"
    exit 0
fi
mkdir -p "$CACHE_DIR"
if [ ! -s "$ROOTFS_TAR" ]; then
    rootfs="$(mktemp -d "$CACHE_DIR/rootfs.XXXXXX")"
    log "debootstrap bookworm into $rootfs (about 40 s)"
    $SUDO debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
        bookworm "$rootfs" "${MIRROR[@]}" >"$CACHE_DIR/debootstrap.log" 2>&1 || {
        log "debootstrap failed; see $CACHE_DIR/debootstrap.log"; tail -n 20 "$CACHE_DIR/debootstrap.log" >&2; exit 1; }
    $SUDO tar -C "$rootfs" -cf "$ROOTFS_TAR.part" .
    mv "$ROOTFS_TAR.part" "$ROOTFS_TAR"
    $SUDO rm -rf "$rootfs"
fi
log "importing $ROOTFS_TAR as $BASE_TAG"
docker import --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' "$ROOTFS_TAR" "$BASE_TAG" >/dev/null
docker run --rm --network none "$BASE_TAG" python3 -c 'print("base image ok")'
