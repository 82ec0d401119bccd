#!/bin/sh
# check-image.sh TARGET ELF BIN [SYMBOL=VALUE ...]: what can be checked
# without a board.
#
# The bootrom's rules (RP2350 datasheet 5.9.5): an IMAGE_DEF block in the
# first 4 KiB of flash; a RISC-V image is entered at its lowest address.
# Then the sections: .text/.rodata and .data's load copy in flash, .data and
# .bss in SRAM. Each SYMBOL=VALUE names a .data word whose initial value
# must be VALUE in flash, where start-rv.S copies it from.
set -eu
target=$1 elf=$2 bin=$3
shift 3
case $target in
rp2350-rv) cross=riscv64-unknown-elf- machine=RISC-V image_type=11010142 ;;
*) echo "check-image: unknown target $target (this card builds rp2350-rv only)" >&2; exit 2 ;;
esac
flash=$((0x10000000)) flash_end=$((0x10400000))
sram=$((0x20000000)) sram_end=$((0x20080000))
fail=0
ok()  { echo "ok    $*"; }
bad() { echo "FAIL  $*"; fail=1; }
hex() { printf 0x%08x "$1"; }

word() { # word OFFSET: the little-endian 32-bit word at OFFSET in the flash image
    od -An -tx4 --endian=little -j "$1" -N 4 "$bin" | tr -d ' '
}
sym() { # sym NAME: a symbol's address, in decimal
    a=$("${cross}nm" "$elf" | awk -v n="$1" '$3 == n { print $1 }')
    [ -n "$a" ] || { echo "check-image: no symbol $1 in $elf" >&2; exit 1; }
    echo $((0x$a))
}
within() { # within ADDR LO HI
    [ "$1" -ge "$2" ] && [ "$1" -le "$3" ]
}

m=$("${cross}readelf" -h "$elf" | awk -F: '/Machine:/ { sub(/^ +/, "", $2); print $2 }')
case $m in *"$machine"*) ok "machine: $m" ;; *) bad "machine is $m, want $machine" ;; esac

def=$(sym __image_def)
off=$((def - flash))
if [ $off -ge 0 ] && [ $((off + 20)) -le 4096 ]; then ok "IMAGE_DEF at flash offset $off (first 4 KiB)"; else bad "IMAGE_DEF at flash offset $off, not in the first 4 KiB"; fi
want="ffffded3 $image_type 000001ff 00000000 ab123579"
got="$(word $off) $(word $((off + 4))) $(word $((off + 8))) $(word $((off + 12))) $(word $((off + 16)))"
if [ "$got" = "$want" ]; then ok "IMAGE_DEF words: $got"; else bad "IMAGE_DEF words: $got, want $want"; fi

entry=$("${cross}readelf" -h "$elf" | awk '/Entry point/ { print $4 }')
if [ $((entry)) -eq $flash ]; then ok "entry point $entry = start of flash"; else bad "entry point $entry, want 0x10000000"; fi

ro0=$(sym __rodata_start) ro1=$(sym __rodata_end)
d0=$(sym __data_start) d1=$(sym __data_end) dl=$(sym __data_load)
b0=$(sym __bss_start) b1=$(sym __bss_end)
if within $ro0 $flash $flash_end && within $ro1 $ro0 $flash_end; then ok ".rodata $(hex $ro0)..$(hex $ro1) in flash"; else bad ".rodata $(hex $ro0)..$(hex $ro1) is not in flash"; fi
if within $d0 $sram $sram_end && within $d1 $d0 $sram_end; then ok ".data $(hex $d0)..$(hex $d1) in SRAM"; else bad ".data $(hex $d0)..$(hex $d1) is not in SRAM"; fi
if within $dl $flash $flash_end && within $((dl + d1 - d0)) $dl $flash_end; then ok ".data loaded from $(hex $dl) in flash"; else bad ".data's load address $(hex $dl) is not in flash"; fi
if within $b0 $sram $sram_end && within $b1 $b0 $sram_end; then ok ".bss $(hex $b0)..$(hex $b1) in SRAM"; else bad ".bss $(hex $b0)..$(hex $b1) is not in SRAM"; fi
size=$(wc -c < "$bin")
if [ $((dl + d1 - d0 - flash)) -le "$size" ]; then ok "flash image $size bytes, .data's initial values included"; else bad "flash image $size bytes ends before .data's initial values"; fi

for kv in "$@"; do
    name=${kv%%=*} value=${kv#*=}
    a=$(sym "$name")
    if ! within $a $d0 $((d1 - 4)); then bad "$name at $(hex $a) is not in .data"; continue; fi
    v=$((0x$(word $((a - d0 + dl - flash)))))
    if [ $v -eq $((value)) ]; then ok "$name = $v in flash at $(hex $((a - d0 + dl))), copied to $(hex $a)"; else bad "$name = $v in flash, want $value"; fi
done
exit $fail
