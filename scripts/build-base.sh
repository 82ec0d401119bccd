#!/bin/bash
# build-base.sh: make the Debian 12 base image for hosts that cannot pull one.
#
# STEM_BASE_IMAGE names the image containers/Containerfile builds FROM. A
# registry image (the normal case, e.g. docker.io/library/debian:bookworm-slim)
# is pulled by `podman build` itself, so there is nothing to do here. A
# localhost/ name (default localhost/stem-base:bookworm) is built with
# `debootstrap --variant=minbase bookworm` and `podman import`.
#
# Idempotent: an existing image is kept, and a complete rootfs in
# STEM_BASE_ROOTFS (default /var/tmp/stem-base/rootfs) is reused. debootstrap
# needs root; as another user the rootfs is made with sudo and imported into
# the caller's own (rootless) storage.
#
# Environment: STEM_BASE_IMAGE, STEM_BASE_ROOTFS, DEBIAN_MIRROR.
set -euo pipefail

image=${STEM_BASE_IMAGE:-localhost/stem-base:bookworm}
rootfs=${STEM_BASE_ROOTFS:-/var/tmp/stem-base/rootfs}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

log() { printf 'build-base: %s\n' "$*" >&2; }

case $image in
localhost/*) ;;
*)
	log "STEM_BASE_IMAGE=$image is a registry image; podman build pulls it, nothing to do"
	exit 0
	;;
esac

if podman image exists "$image"; then
	log "$image exists; nothing to do (podman rmi $image to rebuild it)"
	exit 0
fi

sudo=()
if [ "$(id -u)" != 0 ]; then
	command -v sudo >/dev/null || { log "debootstrap needs root and sudo is not installed"; exit 1; }
	sudo=(sudo)
fi
command -v debootstrap >/dev/null || { log "debootstrap is not installed (apt-get install debootstrap)"; exit 1; }

start=$SECONDS
# debootstrap leaves its work directory behind when it fails half-way; such a
# tree is started over rather than imported.
if [ -x "$rootfs/bin/bash" ] && [ ! -e "$rootfs/debootstrap" ]; then
	log "reusing the rootfs in $rootfs"
else
	log "debootstrap --variant=minbase bookworm $rootfs (about a minute)"
	"${sudo[@]}" rm -rf -- "$rootfs"
	"${sudo[@]}" mkdir -p -- "$rootfs"
	"${sudo[@]}" debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >&2
fi

# debootstrap writes only the release suite; add updates and security like
# the registry's debian images have.
printf '%s\n' \
	'Types: deb' \
	"URIs: $mirror" \
	'Suites: bookworm bookworm-updates' \
	'Components: main' \
	'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' \
	'' \
	'Types: deb' \
	'URIs: http://deb.debian.org/debian-security' \
	'Suites: bookworm-security' \
	'Components: main' \
	'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' |
	"${sudo[@]}" tee "$rootfs/etc/apt/sources.list.d/debian.sources" >/dev/null
"${sudo[@]}" rm -f -- "$rootfs/etc/apt/sources.list"

# apt's lists and caches, manuals and translations (about 120 MB) are left
# out; the Containerfile keeps them out of later layers too. The device nodes
# in ./dev are left out as well: Podman makes /dev at run time, and lab's
# shared image store (overlay force_mask) cannot keep a device node's owner
# in its xattr, so an image carrying them fails to load there.
log "importing $rootfs as $image"
"${sudo[@]}" tar -C "$rootfs" --numeric-owner \
	--exclude=./var/cache/apt/archives/'*.deb' --exclude=./var/cache/apt/'*.bin' \
	--exclude=./var/lib/apt/lists/'*' --exclude=./usr/share/man/'*' \
	--exclude=./usr/share/locale/'*' --exclude=./usr/share/info/'*' \
	--exclude=./dev/'*' \
	-c . |
	podman import -q \
		--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		--change 'CMD ["/bin/bash"]' \
		- "$image" >/dev/null
log "built $image in $((SECONDS - start)) s"
