# `make bench`: builds $(BUILD)/bench/memra_bench against the public ABI, runs it (GPU when a
# CUDA device is usable, else the CPU backend), writes $(BENCH_OUT)/bench.{csv,json} and draws
# $(BENCH_OUT)/bench.png with gnuplot. `make bench QUICK=1` runs the reduced sweep CI smoke-tests;
# BENCH_ARGS passes more options (see `memra_bench --help`). `make bench-plot` redraws the plot
# from an existing $(BENCH_OUT)/bench.csv (for results fetched from a GPU machine).
#
# The binary finds libmemra next to itself through an $ORIGIN-relative run path, so a build
# directory carried to another machine runs there as is: $(BUILD)/bench/memra_bench --out DIR.

BENCH_OUT ?= results
BENCH_BIN := $(BUILD)/bench/memra_bench
BENCH_SRC := $(wildcard bench/*.c)
BENCH_OBJ := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/obj/%.o)
BENCH_HDR := $(wildcard bench/*.h) abi/memra.h
BENCH_COMMIT := $(shell git describe --always --dirty 2>/dev/null)

BENCH_CPPFLAGS := -Iabi -Ibench -D_GNU_SOURCE
BENCH_CFLAGS := -std=c11 -O2 -g $(WARN) $(EXTRA_CFLAGS)
BENCH_LDLIBS := -L$(BUILD) -lmemra -Wl,-rpath,'$$ORIGIN/..' -lm
ifeq ($(CUDA),1)
# CUDA events and the device-to-device copy; the runtime is linked statically, as libmemra's is.
BENCH_CPPFLAGS += -DMEMRA_BENCH_CUDA=1 -I$(CUDA_HOME)/include
BENCH_LDLIBS += -L$(CUDA_HOME)/lib64 -lcudart_static -ldl -lrt -lpthread
endif

$(BENCH_OBJ): $(BUILD)/bench/obj/%.o: bench/%.c $(BENCH_HDR) $(BUILD)/.config
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CPPFLAGS) $(BENCH_CFLAGS) -c $< -o $@

$(BENCH_BIN): $(BENCH_OBJ) $(LIB_DEV)
	$(CC) -o $@ $(BENCH_OBJ) $(BENCH_LDLIBS) $(EXTRA_LDFLAGS)

.PHONY: bench-build bench-plot
bench-build: $(BENCH_BIN)

# The plot is drawn even when some configuration FAILED (its points are missing), and the
# bench's exit status is kept; a setup failure (status 2) leaves no results to plot.
bench: deps-bench $(BENCH_BIN)
	@rc=0; $(BENCH_BIN) --out '$(BENCH_OUT)' --commit '$(BENCH_COMMIT)' \
	    $(if $(filter 1,$(QUICK)),--quick) $(BENCH_ARGS) || rc=$$?; \
	if [ $$rc -le 1 ]; then sh bench/plot.sh '$(BENCH_OUT)' || rc=1; fi; exit $$rc

bench-plot:
	sh bench/plot.sh '$(BENCH_OUT)'

# `make test` builds the bench (it does not run it: timing never goes in a test).
TEST_TARGETS += bench-build
