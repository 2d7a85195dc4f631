# `make bench`: builds $(BUILD)/bench/memra_bench against the public ABI, runs it (GPU when a
# CUDA device is usable, else the CPU backend), writes $(BENCH_OUT)/bench.{csv,json} and draws
# $(BENCH_OUT)/bench.png with gnuplot. `make bench QUICK=1` runs the reduced sweep CI smoke-tests;
# BENCH_ARGS passes more options (see `memra_bench --help`). `make bench-plot` redraws the plot
# from an existing $(BENCH_OUT)/bench.csv and bench.json (for results fetched from a GPU machine).
#
# `make bench-compare BASE=old/bench.json` runs the bench, then prints this run beside BASE;
# with NEW=other/bench.json it compares the two files and runs nothing. FAIL_ON_REGRESSION=1
# makes a flagged regression the exit status (3); THRESHOLD=PCT sets the least slowdown flagged.
#
# The binary finds libmemra next to itself through an $ORIGIN-relative run path, so a build
# directory carried to another machine runs there as is: $(BUILD)/bench/memra_bench --out DIR.
# It carries its own build description (commit, compilers, flags) in build_info.h, written here.

BENCH_OUT ?= results
BENCH_BIN := $(BUILD)/bench/memra_bench
BENCH_SRC := $(wildcard bench/*.c)
BENCH_OBJ := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/obj/%.o)
BENCH_HDR := $(wildcard bench/*.h) bench/variants.def abi/memra.h $(SUPPORT_HDR)
BENCH_INFO := $(BUILD)/bench/build_info.h

# -Itests for the test-support library (mk/support.mk): the generator, views and 1.0 programs.
BENCH_CPPFLAGS := -Iabi -Ibench -Itests -I$(BUILD)/bench -D_GNU_SOURCE
BENCH_CFLAGS := -std=c11 -O2 -g $(WARN) $(EXTRA_CFLAGS)
BENCH_LDLIBS := -L$(BUILD) -lmemra -Wl,-rpath,'$$ORIGIN/..' -lm
ifeq ($(CUDA),1)
# CUDA events and the device-to-device copy; the runtime is linked statically, as libmemra's is.
BENCH_CPPFLAGS += -DMEMRA_BENCH_CUDA=1 -I$(CUDA_HOME)/include
BENCH_LDLIBS += -L$(CUDA_HOME)/lib64 -lcudart_static -ldl -lrt -lpthread
endif

# The build description as C string literals. Recursive variables: the commands run only when
# build_info.h is brought up to date, which happens only for a build of the bench.
bench_cstr = "$(subst ",\",$(subst \,\\,$(strip $(1))))"
define BENCH_INFO_TEXT
/* Written by mk/bench.mk: how this build of libmemra and memra_bench was made. */
#define MEMRA_BENCH_COMMIT $(call bench_cstr,$(shell git describe --always --dirty 2>/dev/null || echo unknown))
#define MEMRA_BENCH_CC $(call bench_cstr,$(shell $(CC) --version 2>/dev/null | head -n 1))
#define MEMRA_BENCH_CFLAGS_LIB $(call bench_cstr,$(CFLAGS_LIB))
#define MEMRA_BENCH_CFLAGS $(call bench_cstr,$(BENCH_CFLAGS))
#define MEMRA_BENCH_NVCC $(call bench_cstr,$(if $(filter 1,$(CUDA)),$(shell $(NVCC) --version 2>/dev/null | grep release)))
#define MEMRA_BENCH_NVCCFLAGS $(call bench_cstr,$(if $(filter 1,$(CUDA)),$(NVCCFLAGS)))
#define MEMRA_BENCH_CUDA_ARCHS $(call bench_cstr,$(if $(filter 1,$(CUDA)),$(CUDA_ARCHS)))
#define MEMRA_BENCH_LIB_CUDA $(if $(filter 1,$(CUDA)),1,0)
endef

# Rewritten only when its text changes, so that an unchanged build does not recompile main.c.
$(BENCH_INFO): FORCE
	$(shell mkdir -p $(dir $@))$(file > $@.new,$(BENCH_INFO_TEXT))
	@cmp -s $@.new $@ && rm -f $@.new || mv -f $@.new $@

$(BENCH_OBJ): $(BUILD)/bench/obj/%.o: bench/%.c $(BENCH_HDR) $(BUILD)/.config
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CPPFLAGS) $(BENCH_CFLAGS) -c $< -o $@

$(BUILD)/bench/obj/main.o: $(BENCH_INFO)

# The library first: under -j its CUDA objects, the slowest to build, start first.
$(BENCH_BIN): $(LIB_DEV) $(BENCH_OBJ) $(SUPPORT_LIB)
	$(CC) -o $@ $(BENCH_OBJ) $(SUPPORT_LIB) $(BENCH_LDLIBS) $(EXTRA_LDFLAGS)

.PHONY: bench-build bench-plot bench-compare bench-test
bench-build: $(BENCH_BIN)

# The plot is drawn even when some configuration FAILED (its points are missing), and the
# bench's exit status is kept; a setup failure (status 2) leaves no results to plot.
# The build runs BENCH_JOBS compiles at a time (default: one per CPU), since a first build is
# mostly waiting for nvcc, and `make bench` is the first command a newcomer runs.
BENCH_JOBS ?= $(shell nproc 2>/dev/null || echo 1)
bench: deps-bench
	@$(MAKE) --no-print-directory -j$(BENCH_JOBS) bench-build
	@rc=0; $(BENCH_BIN) --out '$(BENCH_OUT)' \
	    $(if $(filter 1,$(QUICK)),--quick) $(BENCH_ARGS) || rc=$$?; \
	if [ $$rc -le 1 ]; then sh bench/plot.sh '$(BENCH_OUT)' || rc=1; fi; exit $$rc

bench-plot:
	sh bench/plot.sh '$(BENCH_OUT)'

BENCH_COMPARE_ARGS = --compare '$(BASE)' $(if $(filter 1,$(FAIL_ON_REGRESSION)),--fail-on-regression) \
                     $(if $(THRESHOLD),--threshold '$(THRESHOLD)')
bench-compare: deps-bench
	@if [ -z '$(BASE)' ]; then \
	    echo 'make bench-compare: set BASE=path/to/bench.json (and NEW=... to compare two files)' >&2; \
	    exit 2; fi
	@$(MAKE) --no-print-directory -j$(BENCH_JOBS) bench-build
ifneq ($(NEW),)
	$(BENCH_BIN) $(BENCH_COMPARE_ARGS) --against '$(NEW)'
else
	@rc=0; $(BENCH_BIN) --out '$(BENCH_OUT)' $(if $(filter 1,$(QUICK)),--quick) $(BENCH_ARGS) \
	    $(BENCH_COMPARE_ARGS) || rc=$$?; \
	if [ $$rc -le 1 ] || [ $$rc -eq 3 ]; then sh bench/plot.sh '$(BENCH_OUT)' || rc=1; fi; exit $$rc
endif

# The report and compare code on canned bench.json files: a Criterion program of its own, since
# it links the bench's sources, which the library's test binary does not.
BENCH_TEST_BIN := $(BUILD)/tests/bench_report_tests
BENCH_TEST_OBJ := $(BUILD)/bench/test/bench_report.o
BENCH_TEST_LINK := $(addprefix $(BUILD)/bench/obj/,util.o report.o compare.o json.o workload.o)

$(BENCH_TEST_OBJ): tests/bench_report.c $(BENCH_HDR) $(BUILD)/.config
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CPPFLAGS) $(BENCH_CFLAGS) -c $< -o $@

$(BENCH_TEST_BIN): $(BENCH_TEST_OBJ) $(BENCH_TEST_LINK) $(SUPPORT_LIB) $(LIB_DEV)
	@mkdir -p $(dir $@)
	$(CC) -Wl,-rpath,'$$ORIGIN/..' -o $@ $(BENCH_TEST_OBJ) $(BENCH_TEST_LINK) $(SUPPORT_LIB) $(LIB_DEV) \
	    -lcriterion -lm $(EXTRA_LDFLAGS)

bench-test: $(BENCH_TEST_BIN)
	tests/run-criterion.sh $(BENCH_TEST_BIN) $(if $(TEST_JOBS),--jobs=$(TEST_JOBS))

# `make test` builds the bench (it does not run it: timing never goes in a test) and runs the
# tests of its report and compare code.
TEST_TARGETS += bench-build bench-test
