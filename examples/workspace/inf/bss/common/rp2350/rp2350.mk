# Shared rules for building a task of this card for the RP2350's Hazard3
# cores (TARGET=rp2350-rv), the Pico 2 counterpart of ../rv32.mk. A task's
# Makefile sets OBJS to its own objects (counter.o main.o) and includes
# this file; the startup code, the UART shim and the trap handler are added.
#
#   make TARGET=rp2350-rv            build/rp2350-rv/main.elf and main.bin
#   make test TARGET=rp2350-rv       check the image as the bootrom will see it (no board needed)
#   make deploy / run TARGET=...     flash it through the probe named by STEM_DEVICE (stemctl --device)
#   make gdbserver TARGET=...        OpenOCD on 127.0.0.1:3333 for the debug layout
#   make sections TARGET=...         section headers and symbols of main.elf
#   debug: gdb-multiarch -q -ex 'target extended-remote 127.0.0.1:3333' build/rp2350-rv/main.elf
#
# Objects go to build/rp2350-rv/, so they never mix with the QEMU build's.
# counter.S is RISC-V assembly: there is no rp2350-arm build.

COMMON   := ../common
RP       := $(COMMON)/rp2350
TARGET   ?= rp2350-rv
ifneq ($(TARGET),rp2350-rv)
$(error TARGET=$(TARGET): this card builds for the RP2350's Hazard3 cores only (TARGET=rp2350-rv))
endif
CROSS    ?= riscv64-unknown-elf-
CC        = $(CROSS)gcc
# Hazard3 implements RV32IMAC + Zicsr/Zifencei and some bit-manipulation
# extensions. Debian's gcc 12 has an rv32imac/ilp32 multilib but selects it
# only for -march=rv32imac exactly, so libgcc is named explicitly.
ARCH      = -march=rv32imac_zicsr_zifencei -mabi=ilp32
LIBGCC    = $(shell $(CROSS)gcc -march=rv32imac -mabi=ilp32 -print-libgcc-file-name)
CFLAGS    = $(ARCH) -g -O0 -ffreestanding -fno-builtin -mcmodel=medany -Wall -Wextra -I$(COMMON) -I$(RP)
BUILD     = build/$(TARGET)
ELF       = $(BUILD)/main.elf
BIN       = $(BUILD)/main.bin
LDSCRIPT  = $(RP)/rp2350-rv.ld
LDFLAGS   = $(ARCH) -nostdlib -nostartfiles -T $(LDSCRIPT) -Wl,-Map=$(BUILD)/main.map -Wl,--no-warn-rwx-segments
RP_OBJS   = $(addprefix $(BUILD)/,start-rv.o trap.o uart.o $(OBJS))

# The task's own files first, then the RP2350 ones, then the common ones
# (trap.S); ../start.S and ../sim.c are QEMU's and not used.
vpath %.c $(RP) $(COMMON)
vpath %.S $(RP) $(COMMON)

all: $(ELF) $(BIN)

$(BUILD):
	mkdir -p $@

$(BUILD)/%.o: %.c $(wildcard *.h) $(COMMON)/sim.h $(COMMON)/sections.h $(RP)/rp2350.h | $(BUILD)
	$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/%.o: %.S | $(BUILD)
	$(CC) $(CFLAGS) -c -o $@ $<

$(ELF): $(RP_OBJS) $(LDSCRIPT)
	$(CC) $(LDFLAGS) -o $@ $(RP_OBJS) $(LIBGCC)
	$(CROSS)size $@

$(BIN): $(ELF)
	$(CROSS)objcopy -O binary $< $@

test: $(ELF) $(BIN)
	$(RP)/check-image.sh $(TARGET) $(ELF) $(BIN) $(CHECK_DATA)

deploy: $(ELF)
	$(RP)/probe.sh deploy $(TARGET) $(ELF)

run: deploy

gdbserver: $(ELF)
	$(RP)/probe.sh gdbserver $(TARGET) $(ELF)

sections: $(ELF)
	$(CROSS)objdump -h $(ELF)
	$(CROSS)nm -n $(ELF)

clean:
	rm -rf build

.PHONY: all test deploy run gdbserver sections clean
