#!/bin/sh
# check-image.sh TARGET ELF BIN: what can be checked without a board.
# The bootrom's rules (RP2350 datasheet 5.9.5): an IMAGE_DEF block in the
# first 4 KiB of flash; Arm images start with a vector table (SP, reset
# handler), RISC-V images are entered at their lowest address.
set -eu
target=$1 elf=$2 bin=$3
case $target in
rp2350-rv)  cross=riscv64-unknown-elf- machine=RISC-V  image_type=11010142 ;;
rp2350-arm) cross=arm-none-eabi-       machine=ARM     image_type=10210142 ;;
*) echo "check-image: unknown target $target" >&2; exit 2 ;;
esac
flash=$((0x10000000))
fail=0
ok()  { echo "ok    $*"; }
bad() { echo "FAIL  $*"; fail=1; }

word() { # word OFFSET: the little-endian 32-bit word at OFFSET in the flash image
    od -An -tx4 --endian=little -j "$1" -N 4 "$bin" | tr -d ' '
}
sym() { # sym NAME: a symbol's address, in decimal
    a=$("${cross}nm" "$elf" | awk -v n="$1" '$3 == n { print $1 }')
    [ -n "$a" ] || { echo "check-image: no symbol $1 in $elf" >&2; exit 1; }
    echo $((0x$a))
}

m=$("${cross}readelf" -h "$elf" | awk -F: '/Machine:/ { sub(/^ +/, "", $2); print $2 }')
case $m in *"$machine"*) ok "machine: $m" ;; *) bad "machine is $m, want $machine" ;; esac

def=$(sym __image_def)
off=$((def - flash))
if [ $off -ge 0 ] && [ $((off + 20)) -le 4096 ]; then ok "IMAGE_DEF at flash offset $off (first 4 KiB)"; else bad "IMAGE_DEF at flash offset $off, not in the first 4 KiB"; fi
want="ffffded3 $image_type 000001ff 00000000 ab123579"
got="$(word $off) $(word $((off + 4))) $(word $((off + 8))) $(word $((off + 12))) $(word $((off + 16)))"
if [ "$got" = "$want" ]; then ok "IMAGE_DEF words: $got"; else bad "IMAGE_DEF words: $got, want $want"; fi

case $target in
rp2350-rv)
    entry=$("${cross}readelf" -h "$elf" | awk '/Entry point/ { print $4 }')
    if [ $((entry)) -eq $flash ]; then ok "entry point $entry = start of flash"; else bad "entry point $entry, want 0x10000000"; fi
    ;;
rp2350-arm)
    sp=$((0x$(word 0)))
    reset=$((0x$(word 4)))
    handler=$(sym Reset_Handler)
    if [ $sp -gt $((0x20000000)) ] && [ $sp -le $((0x20082000)) ]; then ok "initial SP $(printf 0x%08x $sp) in SRAM"; else bad "initial SP $(printf 0x%08x $sp) is not in SRAM"; fi
    if [ $reset -eq $((handler | 1)) ]; then ok "reset vector $(printf 0x%08x $reset) = Reset_Handler | 1 (Thumb)"; else bad "reset vector $(printf 0x%08x $reset), want Reset_Handler|1 = $(printf 0x%08x $((handler | 1)))"; fi
    ;;
esac

size=$(wc -c < "$bin")
ok "flash image $size bytes"
exit $fail
