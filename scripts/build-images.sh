#!/bin/bash
# build-images.sh: build stem's profile images from containers/Containerfile.
#
#   scripts/build-images.sh                 all three profiles
#   scripts/build-images.sh rp2350 ...      only the named profiles
#
# Each profile is a stage of the Containerfile, tagged
# localhost/stem-<profile>:latest. Podman's layer cache makes a rebuild with
# nothing changed take seconds.
#
# Environment:
#   STEM_BASE_IMAGE  image to build FROM. Default: localhost/stem-base:bookworm
#                    when it exists (scripts/build-base.sh makes it on hosts
#                    without a registry), else docker.io/library/debian:bookworm-slim.
#   OPENOCD_SOURCE   "debian" (default; OpenOCD 0.12, no RP2350 support) or a git
#                    URL built from source, e.g. https://github.com/raspberrypi/openocd.git
#   OPENOCD_REF      branch, tag or commit of OPENOCD_SOURCE (default sdk-2.0.0)
#   PODMAN_BUILD_FLAGS  extra flags for podman build, split on spaces (e.g. --no-cache)
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
ctx=$repo/containers
all=(native-amd64 hazard3-sim rp2350)

log() { printf 'build-images: %s\n' "$*" >&2; }

profiles=("$@")
[ ${#profiles[@]} -gt 0 ] || profiles=("${all[@]}")
for p in "${profiles[@]}"; do
	case " ${all[*]} " in
	*" $p "*) ;;
	*)
		log "unknown profile $p: choose from ${all[*]}"
		exit 2
		;;
	esac
done

base=${STEM_BASE_IMAGE:-}
if [ -z "$base" ]; then
	if podman image exists localhost/stem-base:bookworm; then
		base=localhost/stem-base:bookworm
	else
		base=docker.io/library/debian:bookworm-slim
	fi
fi
case $base in
localhost/*)
	podman image exists "$base" || {
		log "base image $base does not exist: run scripts/build-base.sh first"
		exit 1
	}
	;;
esac

# Files other parts of stem provide; the image is incomplete without them.
for f in files/stem-init files/shell/stem-prompt.sh files/nvim/sysinit.vim; do
	[ -f "$ctx/$f" ] || {
		log "missing containers/$f"
		exit 1
	}
done

args=(--build-arg "BASE_IMAGE=$base")
[ -z "${OPENOCD_SOURCE:-}" ] || args+=(--build-arg "OPENOCD_SOURCE=$OPENOCD_SOURCE")
[ -z "${OPENOCD_REF:-}" ] || args+=(--build-arg "OPENOCD_REF=$OPENOCD_REF")
# shellcheck disable=SC2206 # split on purpose
extra=(${PODMAN_BUILD_FLAGS:-})

log "base image: $base"
total=$SECONDS
for p in "${profiles[@]}"; do
	tag=localhost/stem-$p:latest
	log "building $tag (stage $p)"
	start=$SECONDS
	podman build --layers --target "$p" -t "$tag" "${args[@]}" "${extra[@]}" \
		-f "$ctx/Containerfile" "$ctx"
	size=$(podman image inspect --format '{{.Size}}' "$tag")
	log "built $tag in $((SECONDS - start)) s, $((size / 1000000)) MB"
done
log "done in $((SECONDS - total)) s"
