#!/bin/sh
# probe.sh deploy|gdbserver TARGET ELF
#
# Flashes ELF, or serves gdb on 127.0.0.1:3333, through an SWD probe
# (Raspberry Pi Debug Probe or another CMSIS-DAP probe) with OpenOCD.
#
# The device comes from STEM_DEVICE, which stemctl sets from --device (only
# the devices named there enter the rp2350 container; STEM_DEVICE holds the
# first). Set by hand it may hold several paths separated by spaces or
# commas; the probe is the one under /dev/bus/usb.
#
# Note: Debian 12's OpenOCD 0.12 has no RP2350 support (no target/rp2350.cfg).
# The rp2350 image needs an RP2350-capable OpenOCD (Raspberry Pi's fork, or
# upstream newer than 0.12): see OPENOCD_SOURCE in docs/profiles.md.
set -eu
mode=$1 target=$2 elf=$3

case $target in
rp2350-rv) cfg=${OPENOCD_TARGET:-target/rp2350-riscv.cfg} ;;
*) echo "$mode: unknown target $target (this card builds rp2350-rv only)" >&2; exit 2 ;;
esac

usage_device() {
    cat >&2 <<MSG
  Name the probe's USB device when you start the instance, for example
      stemctl up rp2350 ${STEM_SERIES:-inf} ${STEM_CARD:-bss} ${STEM_TASK:-4} --target $target --device /dev/bus/usb/001/005
  (lsusb shows the bus and device numbers; the Raspberry Pi Debug Probe is 2e8a:000c).
  A serial port works the same way for the board's output: --device /dev/ttyACM0.
  stemctl passes that device into the container and sets STEM_DEVICE to it;
  outside stemctl: make $mode STEM_DEVICE=/dev/bus/usb/001/005
MSG
}

if [ -z "${STEM_DEVICE:-}" ]; then
    echo "$mode: no device: STEM_DEVICE is not set, so no probe or board was passed into this container." >&2
    usage_device
    exit 2
fi

probe=
for dev in $(echo "$STEM_DEVICE" | tr ',' ' '); do
    if [ ! -e "$dev" ]; then
        echo "$mode: STEM_DEVICE names $dev, but it does not exist here (unplugged? a re-plugged USB device gets a new number)." >&2
        usage_device
        exit 2
    fi
    case $dev in */bus/usb/*) probe=$dev ;; esac
done
if [ -z "$probe" ]; then
    echo "$mode: STEM_DEVICE=$STEM_DEVICE holds no probe: a serial port shows the board's output but cannot flash or debug it." >&2
    usage_device
    exit 2
fi

if ! command -v openocd >/dev/null 2>&1; then
    echo "$mode: openocd is not installed in this container." >&2
    exit 1
fi
found=
for d in ${OPENOCD_SCRIPTS:-} /usr/local/share/openocd/scripts /usr/share/openocd/scripts; do
    if [ -f "$d/$cfg" ]; then found=$d/$cfg; break; fi
done
if [ -z "$found" ]; then
    echo "$mode: $(openocd --version 2>&1 | head -n 1) has no $cfg." >&2
    echo "  Debian 12's OpenOCD 0.12 lacks RP2350 support; build the rp2350 image with an RP2350-capable" >&2
    echo "  OpenOCD (OPENOCD_SOURCE, docs/profiles.md), or set OPENOCD_TARGET to its config file." >&2
    exit 1
fi

case $mode in
deploy)
    exec openocd -f interface/cmsis-dap.cfg -f "$cfg" -c "adapter speed 5000" \
        -c "program $elf verify reset exit" ;;
gdbserver)
    echo "OpenOCD serves gdb on 127.0.0.1:3333; the debug pane connects with target extended-remote." >&2
    exec openocd -f interface/cmsis-dap.cfg -f "$cfg" -c "adapter speed 5000" \
        -c "bindto 127.0.0.1" -c "gdb_port 3333" ;;
*)
    echo "probe.sh: unknown mode $mode" >&2; exit 2 ;;
esac
