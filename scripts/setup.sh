#!/usr/bin/env bash
# Install what stem needs on a Debian 12 machine, idempotently: Debian
# packages, a Go toolchain new enough for go.mod, Go modules, a working
# Podman configuration and its API service. Safe to run again: each step
# checks before it acts. Needs root for apt (run it with sudo otherwise).
#
#   scripts/setup.sh                   everything
#   scripts/setup.sh --podman-service  only the last step: make the API service
#                                      answer with the CONTAINERS_CONF this host
#                                      needs (.cache/podman.env), restarting one
#                                      that runs with another
#
# STEM_PODMAN_SOCKET names the service's socket (default: root's
# /run/podman/podman.sock, else $XDG_RUNTIME_DIR/podman/podman.sock).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE=$ROOT/.cache
mkdir -p "$CACHE"

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

ONLY_SERVICE=0
case ${1:-} in
"") ;;
--podman-service) ONLY_SERVICE=1 ;;
*) echo "usage: scripts/setup.sh [--podman-service]" >&2; exit 2 ;;
esac

GO_VERSION=$(awk '/^go /{print $2}' go.mod)

if [ "$ONLY_SERVICE" = 0 ]; then # (not indented: most of the script)
# Debian packages: host tools (tmux and nvim for the host client side and
# tests; gdb/qemu/toolchains so tests can build and debug the examples on the
# host as well as in the images), Podman, OpenSSH for the SSH tests.
# crun is there for the test that provokes its refusal of a hybrid cgroup
# layout (stem itself runs runc on such hosts); podman-compose validates
# containers/compose.yaml (scripts/check-images.sh). chromium is the headless
# browser the class dashboard's tests drive.
PKGS=(podman runc crun catatonit uidmap slirp4netns fuse-overlayfs containernetworking-plugins podman-compose
      tmux neovim bash git make gcc libc6-dev gdb gdb-multiarch valgrind
      qemu-system-misc gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf
      gcc-arm-none-eabi libnewlib-arm-none-eabi
      openssh-server openssh-client debootstrap curl unzip ca-certificates jq npm chromium)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# A machine whose node comes from elsewhere (nodesource) already has npm.
if [[ " ${missing[*]} " == *" npm "* ]] && command -v npm >/dev/null; then
  missing=("${missing[@]/npm}")
fi
read -ra missing <<<"${missing[*]}"
if ((${#missing[@]})); then
  say "installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  say "Debian packages present"
fi

# Go: Debian 12's golang is too old for go.mod; fetch the toolchain from the
# Go module proxy (the same zip `GOTOOLCHAIN` downloads) into /usr/local/go.
need_go() {
  command -v go >/dev/null || return 0
  local have; have=$(go env GOVERSION 2>/dev/null | sed 's/^go//')
  [ "$(printf '%s\n%s\n' "$GO_VERSION" "$have" | sort -V | head -1)" != "$GO_VERSION" ]
}
if need_go; then
  say "installing Go $GO_VERSION from the module proxy"
  zip=$CACHE/go$GO_VERSION.zip
  proxy=${GOPROXY:-https://proxy.golang.org}; proxy=${proxy%%,*}
  curl -fsSL -o "$zip" "$proxy/golang.org/toolchain/@v/v0.0.1-go$GO_VERSION.linux-amd64.zip"
  tmp=$(mktemp -d); unzip -q "$zip" -d "$tmp"
  rm -rf /usr/local/go && mv "$tmp/golang.org/toolchain@v0.0.1-go$GO_VERSION.linux-amd64" /usr/local/go
  rm -rf "$tmp"
  ln -sf /usr/local/go/bin/go /usr/local/bin/go; ln -sf /usr/local/go/bin/gofmt /usr/local/bin/gofmt
fi
say "Go $(go env GOVERSION); downloading modules"
go mod download

# Podman: base image first (needed to probe whether containers start here).
# A named STEM_BASE_IMAGE is used as given; otherwise an already-built local
# base wins, then the registry's Debian 12 image, and only when that cannot be
# pulled (no registry, as on these CI machines) debootstrap builds one.
REGISTRY_BASE=docker.io/library/debian:bookworm-slim
if [ -z "${STEM_BASE_IMAGE:-}" ] && ! podman image exists localhost/stem-base:bookworm; then
  if podman image exists "$REGISTRY_BASE" || timeout 60 podman pull -q "$REGISTRY_BASE" >/dev/null 2>&1; then
    export STEM_BASE_IMAGE=$REGISTRY_BASE
    say "base image: $REGISTRY_BASE from the registry"
  else
    say "cannot pull $REGISTRY_BASE (no registry?): building the base with debootstrap"
  fi
fi
scripts/build-base.sh

# Some hosts (these CI machines among them) need the repo's containers.conf:
# crun refuses a hybrid cgroup layout and default ulimits exceed the hard
# limits. Probe plain Podman; if it fails and the repo config works, record
# that in .cache/podman.env, which the Makefile includes.
BASE=${STEM_BASE_IMAGE:-localhost/stem-base:bookworm}
podman image exists "$BASE" || podman pull -q "$BASE" >/dev/null
if env -u CONTAINERS_CONF podman run --rm --network none "$BASE" true >/dev/null 2>&1; then
  rm -f "$CACHE/podman.env"
  say "Podman runs containers with its default configuration"
elif CONTAINERS_CONF=$ROOT/containers/containers.conf podman run --rm --network none "$BASE" true >/dev/null 2>&1; then
  echo "export CONTAINERS_CONF=$ROOT/containers/containers.conf" > "$CACHE/podman.env"
  say "this host needs containers/containers.conf (runc, ulimits): recorded in .cache/podman.env"
else
  echo "setup: Podman cannot start a container here, even with containers/containers.conf:" >&2
  CONTAINERS_CONF=$ROOT/containers/containers.conf podman run --rm --network none "$BASE" true >&2 || true
  exit 1
fi
fi # ONLY_SERVICE

# What this host needs: CONTAINERS_CONF from .cache/podman.env (recorded
# above), or, without that file, Podman's defaults (or the caller's own
# CONTAINERS_CONF).
NEED_CONF=0
if [ -f "$CACHE/podman.env" ]; then
  . "$CACHE/podman.env"
  NEED_CONF=1
fi

# The API service the Go bindings talk to. One that answers is kept only if
# it runs with the CONTAINERS_CONF this host needs: a service started from a
# shell without it (stemctl starts one with its caller's environment when
# none answers) fails every container here, and one started from a checkout
# since deleted cannot read its file. Its environment is in /proc/PID/environ
# of the process listening on the socket.
if [ -n "${STEM_PODMAN_SOCKET:-}" ]; then SOCK=$STEM_PODMAN_SOCKET
elif [ "$(id -u)" = 0 ]; then SOCK=/run/podman/podman.sock
else SOCK=${XDG_RUNTIME_DIR:?XDG_RUNTIME_DIR is not set}/podman/podman.sock; fi
# alive: the process runs (a zombie waiting for its parent does not).
alive() { kill -0 "$1" 2>/dev/null && [ "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)" != Z ]; }
conf_desc() { if [ -n "${CONTAINERS_CONF:-}" ]; then echo "CONTAINERS_CONF=$CONTAINERS_CONF"; else echo "the default Podman configuration"; fi; }
service_pids() {
  local pids
  pids=$(ss -xlpn 2>/dev/null | awk -v s="$SOCK" '$1 == "u_str" && $5 == s' | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u || true)
  [ -n "$pids" ] || pids=$(pgrep -f "podman system service .*unix://$SOCK\$" 2>/dev/null || true)
  echo $pids
}
for pid in $(service_pids); do
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = podman ] || {
    say "$SOCK is held by $(cat "/proc/$pid/comm" 2>/dev/null || echo "pid $pid") (socket activation?): not restarting it; if containers fail, give its podman.service CONTAINERS_CONF=${CONTAINERS_CONF:-} (systemctl edit)"
    continue
  }
  env=$(tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null) || continue
  if printf '%s\n' "$env" | grep -q '^CONTAINERS_CONF='; then
    conf=$(printf '%s\n' "$env" | sed -n 's/^CONTAINERS_CONF=//p' | head -n1); have="CONTAINERS_CONF=$conf"
  else
    conf=; have="no CONTAINERS_CONF"
  fi
  why=
  if [ "$NEED_CONF" = 1 ] && [ "$conf" != "$CONTAINERS_CONF" ]; then
    why="it runs with $have, this host needs CONTAINERS_CONF=$CONTAINERS_CONF"
  elif [ -n "$conf" ] && [ ! -e "$conf" ]; then
    why="its $conf is gone"
  fi
  [ -n "$why" ] || continue
  say "restarting the Podman API service on $SOCK (pid $pid): $why"
  # A service shutting down waits for Podman's storage lock, which another
  # podman can hold for seconds (the first copy of an image onto mapped ids):
  # give it 30 s, then kill it (its locks are released when it dies).
  kill "$pid" 2>/dev/null || true
  for i in $(seq 300); do
    alive "$pid" || break
    [ "$i" = 50 ] && say "waiting for the Podman API service (pid $pid) to finish its work"
    sleep 0.1
  done
  if alive "$pid"; then
    say "the Podman API service (pid $pid) did not stop in 30 s: killing it"
    kill -KILL "$pid" 2>/dev/null || true
    for _ in $(seq 50); do alive "$pid" || break; sleep 0.1; done
  fi
  if alive "$pid"; then
    echo "setup: the Podman API service (pid $pid) did not stop; stop it and run setup again" >&2
    exit 1
  fi
done
if ! curl -fsS --unix-socket "$SOCK" http://d/_ping >/dev/null 2>&1; then
  say "starting the Podman API service on $SOCK ($(conf_desc))"
  mkdir -p "$(dirname "$SOCK")"
  # CONTAINER_HOST would make this podman a client of the very socket. It
  # runs in the socket's directory, as the service stemctl starts does:
  # conmon writes files (oom) into its working directory, and a service
  # whose starting directory is removed cannot start containers.
  (
    cd "$(dirname "$SOCK")" || exit 1
    env -u CONTAINER_HOST -u CONTAINER_CONNECTION setsid nohup podman system service --time=0 "unix://$SOCK" >>"$CACHE/podman-service.log" 2>&1 < /dev/null &
  )
  for _ in $(seq 100); do curl -fsS --unix-socket "$SOCK" http://d/_ping >/dev/null 2>&1 && break; sleep 0.1; done
  curl -fsS --unix-socket "$SOCK" http://d/_ping >/dev/null || { echo "setup: the Podman API service did not start; see $CACHE/podman-service.log" >&2; exit 1; }
else
  say "the Podman API service on $SOCK answers ($(conf_desc))"
fi
mkdir -p /run/sshd 2>/dev/null || true
say "setup done"
