# `make soak`: tests/soak/journal_soak.c, a long run of JOURNAL verifies and commits with bad
# counts and corrupted journals among them, every report and every good sequence checked
# against the per-row program of the test-support library (mk/support.mk). Not part of
# `make test`: its default of 100 000 cycles takes minutes.
#
#   make soak                                   100 000 cycles on the CPU backend
#   make soak SOAK_CYCLES=1000000               a longer run (or SOAK_CYCLES in the environment)
#   make soak SOAK_BACKEND=cuda                 the same on the GPU (a CUDA build)
#   make soak SOAK_ARGS="--b 8 --t-max 8"       more sequences, longer drafts (see --help)
#   MEMRA_TEST_SEED=0x... make soak             replay the run a failure printed
#
# The binary finds libmemra through an rpath of $ORIGIN/.., so it runs from a $(BUILD) folder
# carried to another machine: $(BUILD)/tests/journal_soak --backend cuda.

SOAK_BIN := $(BUILD)/tests/journal_soak
SOAK_BACKEND ?= cpu
SOAK_ARGS ?=

$(SOAK_BIN): tests/soak/journal_soak.c $(SUPPORT_HDR) $(SUPPORT_LIB) $(LIB_DEV) $(BUILD)/.config
	@mkdir -p $(dir $@)
	$(CC) -Iabi -Itests -D_GNU_SOURCE -std=c11 -O2 -g $(WARN) $(EXTRA_CFLAGS) -o $@ $< \
	    $(SUPPORT_LIB) -L$(BUILD) -lmemra -Wl,-rpath,'$$ORIGIN/..' -lm $(EXTRA_LDFLAGS)

.PHONY: soak soak-build
soak-build: $(SOAK_BIN)

soak: $(SOAK_BIN)
	$(if $(SOAK_CYCLES),SOAK_CYCLES=$(SOAK_CYCLES)) $(SOAK_BIN) --backend $(SOAK_BACKEND) $(SOAK_ARGS)
