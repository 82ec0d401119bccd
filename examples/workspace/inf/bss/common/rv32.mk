# Shared rules for the RV32 tasks of this card. A task's Makefile sets OBJS
# (and LDSCRIPT when it has its own) and includes this file.
#
#   make               build main.elf
#   make run           run it in QEMU; it prints through the UART and ends QEMU itself
#   make test          run it with a timeout; the output must equal expected.txt
#   make debug-server  QEMU halted with its gdb stub on 127.0.0.1:$(GDB_PORT)
#   make sections      section headers and symbols of main.elf
#   debug:             gdb-multiarch -q -ex 'target remote 127.0.0.1:1234' main.elf
#
# QEMU's virt machine is a generic RV32 core, not a Hazard3 model.

COMMON   := ../common
CROSS    ?= riscv64-unknown-elf-
CC        = $(CROSS)gcc
ARCH      = -march=rv32im -mabi=ilp32
CFLAGS    = $(ARCH) -g -O0 -ffreestanding -fno-builtin -mcmodel=medany -Wall -Wextra -I$(COMMON)
LDSCRIPT ?= $(COMMON)/link.ld
LDFLAGS   = $(ARCH) -nostdlib -nostartfiles -T $(LDSCRIPT) -Wl,-Map=main.map -Wl,--no-warn-rwx-segments
QEMU     ?= qemu-system-riscv32
QEMUFLAGS = -M virt -cpu rv32 -nographic -bios none
GDB_PORT ?= 1234
TIMEOUT  ?= 10

# A task's own start.S (or any file) wins over the one in common/.
vpath %.c $(COMMON)
vpath %.S $(COMMON)

all: main.elf

main.elf: $(OBJS) $(LDSCRIPT)
	$(CC) $(LDFLAGS) -o $@ $(OBJS) -lgcc

%.o: %.c $(wildcard *.h) $(COMMON)/sim.h $(COMMON)/sections.h
	$(CC) $(CFLAGS) -c -o $@ $<

%.o: %.S
	$(CC) $(CFLAGS) -c -o $@ $<

run: main.elf
	$(QEMU) $(QEMUFLAGS) -kernel main.elf

test: main.elf
	@status=0; timeout $(TIMEOUT) $(QEMU) $(QEMUFLAGS) -kernel main.elf </dev/null >out.txt 2>&1 || status=$$?; \
	if [ $$status -eq 124 ]; then echo "FAIL: QEMU still running after $(TIMEOUT)s"; exit 1; fi; \
	if [ $$status -ne 0 ]; then cat out.txt; echo "FAIL: program ended with status $$status"; exit 1; fi; \
	diff -u expected.txt out.txt && echo "PASS"

debug-server: main.elf
	$(QEMU) $(QEMUFLAGS) -S -gdb tcp:127.0.0.1:$(GDB_PORT) -kernel main.elf

sections: main.elf
	$(CROSS)objdump -h main.elf
	$(CROSS)nm -n main.elf

clean:
	rm -f *.o main.elf main.map out.txt

.PHONY: all run test debug-server sections clean
