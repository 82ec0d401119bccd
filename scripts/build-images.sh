#!/bin/bash
# build-images.sh: build stem's profile images from containers/Containerfile.
#
#   scripts/build-images.sh                 all three profiles
#   scripts/build-images.sh rp2350 ...      only the named profiles
#   scripts/build-images.sh agent           the agent sandbox image (needs the
#                                           agent CLIs: scripts/install-agent-clis.sh)
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
#   AGENT_CLIS_PREFIX   the npm prefix holding the agent CLIs (default .cache/agent-clis)
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
ctx=$repo/containers
all=(native-amd64 hazard3-sim rp2350)
known=("${all[@]}" agent)

log() { printf 'build-images: %s\n' "$*" >&2; }

profiles=("$@")
[ ${#profiles[@]} -gt 0 ] || profiles=("${all[@]}")
for p in "${profiles[@]}"; do
	case " ${known[*]} " in
	*" $p "*) ;;
	*)
		log "unknown profile $p: choose from ${known[*]}"
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
for f in files/stem-init files/shell/stem-prompt.sh files/nvim/sysinit.vim files/debug/program-pane files/debug/program-wait.pl; do
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

# The agent image takes the CLIs and its node from the host's
# .cache/agent-clis (see the agent stage): hard links into a staging
# context, so nothing large is copied.
stage=""
cleanup() { [ -z "$stage" ] || rm -rf "$stage"; }
trap cleanup EXIT
agent_context() {
	local prefix=${AGENT_CLIS_PREFIX:-$repo/.cache/agent-clis} node
	[ -x "$prefix/bin/claude" ] && [ -x "$prefix/bin/codex" ] && [ -x "$prefix/bin/gemini" ] || {
		log "the agent CLIs are not in $prefix: run scripts/install-agent-clis.sh first"
		exit 1
	}
	# Its own pinned node (22 or later, for the compile cache), not the host's.
	node=$prefix/node/bin/node
	[ -x "$node" ] || {
		log "the agent image's node is not in $prefix/node: run scripts/install-agent-clis.sh first"
		exit 1
	}
	stage=$(mktemp -d "${TMPDIR:-/tmp}/stem-agent-ctx.XXXXXX")
	mkdir -p "$stage/prefix"
	cp -al "$prefix/bin" "$prefix/lib" "$stage/prefix/" 2>/dev/null || cp -a "$prefix/bin" "$prefix/lib" "$stage/prefix/"
	cp -L "$node" "$stage/node"
}

# A build whose inputs are those of the image's last build is skipped:
# podman build with nothing changed still takes seconds (it hashes every
# COPY source to find its cache). The key covers the build context, the
# arguments and the base image's id, and for the agent the CLIs' files
# (names, sizes, times, link targets). --no-cache in PODMAN_BUILD_FLAGS
# always builds.
stamps=$repo/.cache/image-stamps
input_key() {
	{
		printf '%s\n' "$1" "${args[@]}" "${extra[@]}"
		podman image inspect --format '{{.Id}}' "$base" 2>/dev/null || echo "no $base"
		(cd "$ctx" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
		if [ "$1" = agent ]; then
			find "${AGENT_CLIS_PREFIX:-$repo/.cache/agent-clis}"/{bin,lib,node} -printf '%P %s %T@ %l\n' 2>&1 | LC_ALL=C sort
		fi
	} | sha256sum | cut -d' ' -f1
}
image_id() { podman image inspect --format '{{.Id}}' "$1" 2>/dev/null || true; }

log "base image: $base"
total=$SECONDS
for p in "${profiles[@]}"; do
	tag=localhost/stem-$p:latest
	key=$(input_key "$p")
	if [[ " ${extra[*]-} " != *" --no-cache "* && -f $stamps/$p ]] && [ "$(cat "$stamps/$p")" = "$key $(image_id "$tag")" ]; then
		log "$tag is up to date (its inputs are those of its last build)"
		continue
	fi
	rm -f "$stamps/$p"
	log "building $tag (stage $p)"
	start=$SECONDS
	ctxargs=()
	if [ "$p" = agent ]; then
		[ -n "$stage" ] || agent_context
		ctxargs=(--build-context "agent-clis=$stage")
	fi
	podman build --layers --target "$p" -t "$tag" "${args[@]}" "${ctxargs[@]}" "${extra[@]}" \
		-f "$ctx/Containerfile" "$ctx"
	size=$(podman image inspect --format '{{.Size}}' "$tag")
	log "built $tag in $((SECONDS - start)) s, $((size / 1000000)) MB"
	mkdir -p "$stamps"
	echo "$key $(image_id "$tag")" >"$stamps/$p"
done
log "done in $((SECONDS - total)) s"
