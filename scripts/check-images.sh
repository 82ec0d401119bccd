#!/bin/bash
# check-images.sh: prove each built profile image has a working toolchain.
#
#   scripts/check-images.sh              all three profiles
#   scripts/check-images.sh hazard3-sim  only the named profiles
#
# Every image: tmux 3.3a and Neovim 0.7.2 (a host tmux client only talks to a
# server of its own version, so the host's versions are compared when the host
# has them), stem-init and the shell/Neovim config files in place.
#   native-amd64  a C program builds, runs and passes valgrind; gdb runs it
#   hazard3-sim   an RV32IM C program built against picolibc runs on
#                 qemu-system-riscv32; its output (semihosting: stderr) and
#                 exit status come back
#   rp2350        Cortex-M33 (soft and hard float) and RV32IMAC programs build;
#                 OpenOCD, gdb-multiarch and picocom run
# Before the images: containers/compose.yaml is read by podman-compose itself
# (--dry-run build: it parses the file, merges the shared settings, fills in the
# variables and prints the podman build command of each service, running
# nothing and pulling nothing); each profile must be there with its own stage
# and image name.
# Exits non-zero when any check fails. (The checks are fed to bash on stdin, so
# anything that reads stdin, like QEMU with -nographic, gets </dev/null.)
set -euo pipefail
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
cd "$(dirname "$0")/.."

all=(native-amd64 hazard3-sim rp2350)
stamps=.cache/image-stamps
profiles=("$@")
[ ${#profiles[@]} -gt 0 ] || profiles=("${all[@]}")

want_tmux="tmux 3.3a"
want_nvim="NVIM v0.7.2"
if command -v tmux >/dev/null; then want_tmux=$(tmux -V); fi
if command -v nvim >/dev/null; then want_nvim=$(nvim --version | head -n1); fi

# common runs in every image; $1 and $2 are the expected versions.
read -r -d '' common <<'EOF' || true
set -u
fails=0
ok() { printf '  ok    %s\n' "$*"; }
bad() { printf '  FAIL  %s\n' "$*"; fails=$((fails + 1)); }
check() { local what=$1; shift; if out=$("$@" 2>&1); then ok "$what"; else bad "$what"; printf '%s\n' "$out" | sed 's/^/        /' | tail -n 20; fi; }
t=$(tmux -V); [ "$t" = "$1" ] && ok "$t" || bad "tmux is '$t', the host has '$1'"
n=$(nvim --version | head -n1); [ "$n" = "$2" ] && ok "$n" || bad "nvim is '$n', want '$2'"
check "stem-init is executable" test -x /usr/local/bin/stem-init
check "stem-init parses" bash -n /usr/local/bin/stem-init
check "prompt script installed" test -f /etc/stem/stem-prompt.sh
check "bash.bashrc sources it" grep -q /etc/stem/stem-prompt.sh /etc/bash.bashrc
check "nvim sysinit installed" test -f /etc/xdg/nvim/sysinit.vim
check "UTF-8 locale" sh -c '[ "$LANG" = C.UTF-8 ] && locale -a | grep -qi "^c.utf-\?8$"'
check "git, make, less, ps, file" sh -c 'git --version && make --version && less --version && ps --version && file --version'
cd "$(mktemp -d)"
EOF

read -r -d '' native <<'EOF' || true
cat >hello.c <<'C'
#include <stdio.h>
#include <stdlib.h>
int main(void) { char *p = malloc(16); printf("hello, native\n"); free(p); return 0; }
C
check "gcc builds a C program" gcc -g -O0 -Wall -o hello hello.c
check "it runs" sh -c './hello | grep -qx "hello, native"'
check "gdb runs it" sh -c 'gdb -q -batch -ex "break main" -ex run -ex bt ./hello | grep -q "main () at hello.c"'
check "valgrind finds no leak" valgrind -q --error-exitcode=9 --leak-check=full ./hello
EOF

read -r -d '' hazard3 <<'EOF' || true
cat >hello.c <<'C'
#include <stdio.h>
int main(void) { printf("hello, rv32\n"); return 7; }
C
rv32() { riscv64-unknown-elf-gcc "$@" -Os -g --specs=picolibc.specs --oslib=semihost --crt0=hosted \
	-Wl,--defsym=__flash=0x80000000 -Wl,--defsym=__flash_size=0x200000 \
	-Wl,--defsym=__ram=0x80200000 -Wl,--defsym=__ram_size=0x200000 -o hello.elf hello.c; }
check "riscv64-unknown-elf-gcc -march=rv32im builds with picolibc" rv32 -march=rv32im -mabi=ilp32
check "the ELF is 32-bit RISC-V" sh -c 'file hello.elf | grep -q "ELF 32-bit LSB executable, UCB RISC-V"'
check "qemu-system-riscv32 runs it (output, exit status 7)" sh -c '
	out=$(timeout 20 qemu-system-riscv32 -M virt -cpu rv32 -nographic -bios none -kernel hello.elf \
		-semihosting-config enable=on,target=native </dev/null 2>&1); rc=$?
	echo "output: $out, exit status $rc"; [ "$out" = "hello, rv32" ] && [ $rc = 7 ]'
check "gdb-multiarch knows riscv:rv32" gdb-multiarch -q -batch -ex 'set architecture riscv:rv32'
check "only qemu-system-riscv32 is installed" sh -c '[ "$(ls /usr/bin/qemu-system-*)" = /usr/bin/qemu-system-riscv32 ]'
EOF

read -r -d '' rp2350 <<'EOF' || true
cat >blink.c <<'C'
#include <stdint.h>
#include <string.h>
volatile uint32_t counter;
int main(void) { char b[8]; memset(b, 0, sizeof b); for (;;) counter += (uint32_t)b[0] + 1u; }
C
m33() { arm-none-eabi-gcc -mcpu=cortex-m33 -mthumb "$@" -Os -g --specs=nano.specs --specs=nosys.specs -o blink-arm.elf blink.c; }
check "arm-none-eabi-gcc -mcpu=cortex-m33 -mthumb builds (soft float)" m33
check "the ELF is ARMv8-M Mainline" sh -c 'arm-none-eabi-readelf -A blink-arm.elf | grep -q "Tag_CPU_arch: v8-M.mainline"'
check "arm-none-eabi-gcc builds hard float (fpv5-sp-d16)" m33 -mfloat-abi=hard -mfpu=fpv5-sp-d16
check "riscv64-unknown-elf-gcc -march=rv32imac builds with picolibc" \
	riscv64-unknown-elf-gcc -march=rv32imac -mabi=ilp32 -Os --specs=picolibc.specs --crt0=minimal \
	-Wl,--defsym=__flash=0x10000000 -Wl,--defsym=__flash_size=0x400000 \
	-Wl,--defsym=__ram=0x20000000 -Wl,--defsym=__ram_size=0x80000 -o blink-rv.elf blink.c
check "the RISC-V ELF is 32-bit with compressed instructions" sh -c 'file blink-rv.elf | grep -q "ELF 32-bit LSB executable, UCB RISC-V, RVC"'
check "openocd runs" sh -c 'openocd --version 2>&1 | grep -q "Open On-Chip Debugger"'
check "gdb-multiarch knows armv8-m.main" gdb-multiarch -q -batch -ex 'set architecture armv8-m.main'
check "picocom and lsusb are installed" sh -c 'picocom --help >/dev/null; command -v picocom && command -v lsusb'
if ls /usr/share/openocd/scripts/target/rp2350*.cfg /opt/openocd/share/openocd/scripts/target/rp2350*.cfg >/dev/null 2>&1; then
	ok "openocd has an rp2350 target"
else
	printf '  note  this OpenOCD (%s) has no rp2350 target: rebuild with OPENOCD_SOURCE (see containers/Containerfile)\n' \
		"$(openocd --version 2>&1 | head -n1)"
fi
EOF

status=0
printf 'containers/compose.yaml\n'
if ! command -v podman-compose >/dev/null; then
	printf '  FAIL  podman-compose is not installed: apt-get install podman-compose (or run make setup)\n'
	status=1
elif ! out=$(podman-compose -f containers/compose.yaml --dry-run build 2>&1); then
	printf '  FAIL  podman-compose cannot read it:\n'
	printf '%s\n' "$out" | sed 's/^/        /' | tail -n 20
	status=1
else
	for p in "${all[@]}"; do
		if printf '%s\n' "$out" | grep -q -- "^podman build -t localhost/stem-$p:latest -f ./Containerfile --target $p "; then
			printf '  ok    service %s builds stage %s as localhost/stem-%s:latest\n' "$p" "$p" "$p"
		else
			printf '  FAIL  service %s: podman-compose would not build stage %s as localhost/stem-%s:latest:\n' "$p" "$p" "$p"
			printf '%s\n' "$out" | sed 's/^/        /' | tail -n 20
			status=1
		fi
	done
fi

for p in "${profiles[@]}"; do
	case $p in
	native-amd64) body=$native ;;
	hazard3-sim) body=$hazard3 ;;
	rp2350) body=$rp2350 ;;
	*)
		printf 'check-images: unknown profile %s: choose from %s\n' "$p" "${all[*]}" >&2
		exit 2
		;;
	esac
	image=localhost/stem-$p:latest
	printf '%s\n' "$image"
	if ! podman image exists "$image"; then
		printf '  FAIL  image missing: run scripts/build-images.sh %s\n' "$p"
		status=1
		continue
	fi
	# An image that passed these very checks (this script, the same host
	# versions) is not run again.
	key="$(podman image inspect --format '{{.Id}}' "$image") $(sha256sum <"$self" | cut -d' ' -f1) $want_tmux $want_nvim"
	if [ -f "$stamps/check-$p" ] && [ "$(cat "$stamps/check-$p")" = "$key" ]; then
		printf '  ok    passed these checks before (image %.12s)\n' "${key#sha256:}"
		continue
	fi
	rm -f "$stamps/check-$p"
	start=$(date +%s.%N)
	if printf '%s\n%s\nexit $((fails > 0))\n' "$common" "$body" |
		timeout 300 podman run --rm -i --network none "$image" bash -s -- "$want_tmux" "$want_nvim"; then
		mkdir -p "$stamps"
		printf '%s\n' "$key" >"$stamps/check-$p"
	else
		status=1
	fi
	awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "  (%.1f s)\n", e - s }'
done
exit $status
