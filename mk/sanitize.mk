# Reliability checks: sanitizers, leak checks and fuzzing, each in its own build folder, all on the
# CPU backend (CUDA=0; the CUDA backend's fault handling is tests/test_device_fault.c's job).
#
#   make asan        library + Criterion suite with AddressSanitizer, UBSan and LeakSanitizer
#                    ($(ASAN_BUILD)); runs the whole CPU suite
#   make tsan        the library with ThreadSanitizer ($(TSAN_BUILD)); runs the thread scenarios
#                    of the threads and handles suites
#   make leakcheck   valgrind memcheck over the CPU suite on an uninstrumented build
#                    ($(VG_BUILD)): no leak, no invalid access, no use of uninitialised memory,
#                    also on every error path (the numerical sweeps: see VG_TEST_ARGS); then
#                    the fuzz corpus, replayed on the same build under valgrind
#   make jemalloc    the bad-input suites (1.0 and 1.1), the handles suite and the fuzz corpus
#                    on the same uninstrumented build with jemalloc preloaded (JEMALLOC)
#   make fuzz        libFuzzer over the ABI for FUZZ_SECONDS (default 60) ($(FUZZ_BUILD))
#   make fuzz-regress  every input of tests/fuzz/corpus once (what `make test` runs)
#
# Why three allocators: a check that reads memory the library may have freed (a destroyed
# handle) can pass with glibc, whose free() overwrites the start of a block, and fail with any
# other. AddressSanitizer reports the read itself; valgrind and jemalloc give the plain build
# the allocators a host may really have.
#
# A sanitizer report fails the target even when it comes from a test process that Criterion
# counted as passed: reports go to per-process log files (log_path), and any file there fails.
# Each target first proves that it sees the library at all: a test that leaks on purpose
# (bad_input_canary/leak, enabled only by MEMRA_LEAK_CANARY=1) must be reported.

ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
VG_BUILD ?= build-vg
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
VALGRIND ?= $(or $(shell command -v valgrind 2>/dev/null),valgrind)
# libFuzzer comes with clang (Debian: clang-14 and libclang-rt-14-dev).
FUZZ_CC ?= $(or $(shell command -v clang-14 2>/dev/null),clang)

SAN_ASAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
SAN_TSAN_FLAGS := -fsanitize=thread -fno-omit-frame-pointer
# Extra Criterion arguments for `make asan`; by default the whole suite runs (the CUDA variants
# skip on these CPU-only builds).
SAN_TEST_ARGS ?=

# allocator_may_return_null: the suite asks for absurd allocations on purpose and expects
# OUT_OF_MEMORY, not a sanitizer abort.
san_asan_env = ASAN_OPTIONS=log_path=$(abspath $(1))/asan:detect_leaks=1:abort_on_error=1:allocator_may_return_null=1:detect_stack_use_after_return=1:strict_string_checks=1:check_initialization_order=1 \
               UBSAN_OPTIONS=log_path=$(abspath $(1))/ubsan:print_stacktrace=1:halt_on_error=1
san_tsan_env = TSAN_OPTIONS=log_path=$(abspath $(1))/tsan:halt_on_error=1:abort_on_error=1:second_deadlock_stack=1

# $(call san_no_reports,DIR,WHAT): fails, showing them, when DIR holds any report. The one line
# that is not a report: the warning ASan logs when allocator_may_return_null turns an absurd
# allocation into NULL (the suite's OUT_OF_MEMORY cases).
san_no_reports = set -e; if ls $(1)/* >/dev/null 2>&1 && \
    grep -hv -e 'WARNING: AddressSanitizer failed to allocate 0x' $(1)/* | grep -q .; then \
    cat $(1)/*; echo "$(2): sanitizer reports above (in $(1))" >&2; exit 1; fi

# $(call san_canary,DIR,PATTERN,WHAT): fails unless a report file in DIR matches PATTERN.
san_canary = set -e; if ! grep -qs -e '$(2)' $(1)/*; then \
    echo "$(3): the leak canary was not reported: the check does not see the library" >&2; \
    exit 1; fi; echo "$(3): the leak canary was reported, as it must be"

.PHONY: asan asan-build tsan tsan-build leakcheck leakcheck-build jemalloc fuzz fuzz-build \
        fuzz-regress

asan-build:
	$(MAKE) --no-print-directory BUILD=$(ASAN_BUILD) CUDA=0 \
	    EXTRA_CFLAGS="$(SAN_ASAN_FLAGS)" EXTRA_LDFLAGS="$(SAN_ASAN_FLAGS)" test-c-build

asan: asan-build
	@rm -rf $(ASAN_BUILD)/san-canary $(ASAN_BUILD)/san-logs
	@mkdir -p $(ASAN_BUILD)/san-canary $(ASAN_BUILD)/san-logs
	MEMRA_LEAK_CANARY=1 $(call san_asan_env,$(ASAN_BUILD)/san-canary) \
	    $(ASAN_BUILD)/tests/memra_tests --filter 'bad_input_canary/leak' >/dev/null 2>&1 || true
	@$(call san_canary,$(ASAN_BUILD)/san-canary,engine_create,asan)
	$(call san_asan_env,$(ASAN_BUILD)/san-logs) \
	    tests/run-criterion.sh $(ASAN_BUILD)/tests/memra_tests $(SAN_TEST_ARGS)
	@$(call san_no_reports,$(ASAN_BUILD)/san-logs,asan)
	@echo "asan: no sanitizer report"

# Criterion's runner cannot start under ThreadSanitizer (it maps its shared arena at addresses
# TSan reserves), so the suites with thread scenarios are also built as plain programs: the
# same scenarios, a main() instead of Criterion (tests/test_threads.c with
# -DMEMRA_THREADS_STANDALONE, tests/test_handles.c with -DMEMRA_HANDLES_STANDALONE), compiled
# with the test-support library's sources (mk/support.mk), which need no Criterion.
TSAN_THREADS := $(TSAN_BUILD)/tests/threads_standalone
TSAN_HANDLES := $(TSAN_BUILD)/tests/handles_standalone
tsan_standalone = $(CC) -std=c11 -O1 -g -pthread $(WARN) $(SAN_TSAN_FLAGS) -Iabi -Itests \
    -D_GNU_SOURCE -D$(1) $(2) $(SUPPORT_SRC) -o $(3) -Wl,-rpath,'$$ORIGIN/..' \
    $(TSAN_BUILD)/libmemra.so -lm

tsan-build:
	$(MAKE) --no-print-directory BUILD=$(TSAN_BUILD) CUDA=0 \
	    EXTRA_CFLAGS="$(SAN_TSAN_FLAGS)" EXTRA_LDFLAGS="$(SAN_TSAN_FLAGS)" lib
	@mkdir -p $(TSAN_BUILD)/tests
	$(call tsan_standalone,MEMRA_THREADS_STANDALONE,tests/test_threads.c,$(TSAN_THREADS))
	$(call tsan_standalone,MEMRA_HANDLES_STANDALONE,tests/test_handles.c,$(TSAN_HANDLES))

tsan: tsan-build
	@rm -rf $(TSAN_BUILD)/san-logs && mkdir -p $(TSAN_BUILD)/san-logs
	$(call san_tsan_env,$(TSAN_BUILD)/san-logs) $(TSAN_THREADS)
	$(call san_tsan_env,$(TSAN_BUILD)/san-logs) $(TSAN_HANDLES)
	@$(call san_no_reports,$(TSAN_BUILD)/san-logs,tsan)
	@echo "tsan: no sanitizer report"

# valgrind follows Criterion's workers (each test runs in a fresh exec of the binary) with
# --trace-children. The generated bad-input cases would cost a valgrind start each; they run
# instead in one process through bad_input/cpu_sweep and bad_input_verify/cpu_sweep (enabled by
# MEMRA_TEST_SWEEP=1), and bad_input_copy/cpu_sweep for the 1.2 copies.
# The numerical sweeps (gdn_packed, gdn_verify, journal, rollback, multi_device, reference,
# kernel_grid) are left to `make asan`, whose LeakSanitizer and AddressSanitizer check the same
# tests for leaks and invalid accesses: under valgrind they take minutes each, and Criterion
# 2.4's runner does not survive them there (seen here: the runner aborting with "Could not spawn
# test instance", workers faulting inside libcriterion).
VG_FLAGS := --trace-children=yes --leak-check=full --show-leak-kinds=definite,indirect \
            --errors-for-leak-kinds=definite,indirect --track-origins=yes --error-exitcode=1 \
            --num-callers=30
VG_TEST_ARGS ?= --filter '!(bad_input/cpu|bad_input/cuda|bad_input_verify/cpu|bad_input_verify/cuda|gdn_packed/*|gdn_verify/*|journal/*|rollback/*|multi_device/*|reference/*|kernel_grid/*|bad_input_copy/cpu|bad_input_copy/cuda)'

# The fuzz target without libFuzzer and without sanitizers, linked with the plain library: it
# replays the corpus under valgrind (leakcheck) and with jemalloc (jemalloc).
FUZZ_REPLAY := $(VG_BUILD)/tests/fuzz_replay

leakcheck-build:
	$(MAKE) --no-print-directory BUILD=$(VG_BUILD) CUDA=0 test-c-build
	$(CC) -std=c11 -O1 -g $(WARN) -Iabi -D_GNU_SOURCE tests/fuzz/fuzz_abi.c tests/fuzz/replay.c \
	    -o $(FUZZ_REPLAY) -Wl,-rpath,'$$ORIGIN/..' $(VG_BUILD)/libmemra.so -lm

# Every process's log must end with "ERROR SUMMARY: 0 errors" (leaks of kind definite or
# indirect count as errors).
leakcheck: leakcheck-build
	@rm -rf $(VG_BUILD)/vg-canary $(VG_BUILD)/vg-logs
	@mkdir -p $(VG_BUILD)/vg-canary $(VG_BUILD)/vg-logs
	MEMRA_LEAK_CANARY=1 $(VALGRIND) $(VG_FLAGS) --log-file=$(VG_BUILD)/vg-canary/vg.%p.log \
	    $(VG_BUILD)/tests/memra_tests --filter 'bad_input_canary/leak' >/dev/null 2>&1 || true
	@$(call san_canary,$(VG_BUILD)/vg-canary,engine_create,leakcheck)
	MEMRA_TEST_SWEEP=1 tests/run-criterion.sh $(VALGRIND) $(VG_FLAGS) \
	    --log-file=$(VG_BUILD)/vg-logs/vg.%p.log $(VG_BUILD)/tests/memra_tests $(VG_TEST_ARGS)
	$(VALGRIND) $(VG_FLAGS) --log-file=$(VG_BUILD)/vg-logs/fuzz.%p.log $(FUZZ_REPLAY) \
	    tests/fuzz/corpus/*
	@set -e; logs=$$(ls $(VG_BUILD)/vg-logs/*.log | wc -l); \
	    if [ "$$logs" -lt 2 ]; then echo "leakcheck: valgrind did not follow the test workers" >&2; exit 1; fi; \
	    bad=$$(grep -L 'ERROR SUMMARY: 0 errors' $(VG_BUILD)/vg-logs/*.log || true); \
	    if [ -n "$$bad" ]; then cat $$bad; echo "leakcheck: valgrind errors in: $$bad" >&2; exit 1; fi; \
	    echo "leakcheck: $$logs processes, no leak and no memory error"

# jemalloc, preloaded into the uninstrumented build: the bad-input and handles suites (every
# case in its own process, as `make test-c` runs them) and the fuzz corpus. The lookup is
# deferred, so that `make test` finds the library its installer step has just put there. A
# preload that the dynamic loader cannot honour is ignored with a warning, and the run would
# quietly use glibc: jemalloc's own exit statistics prove it is the allocator first.
JEMALLOC ?= $(firstword $(wildcard /usr/lib/*/libjemalloc.so.2 /usr/lib/libjemalloc.so.2 \
                                   /usr/local/lib/libjemalloc.so.2))
JEMALLOC_TEST_ARGS ?= --filter '@(bad_input|bad_input_verify|handles|bad_input_copy)/*'

jemalloc: leakcheck-build
	@if [ -z "$(JEMALLOC)" ]; then \
	    echo "jemalloc: libjemalloc.so.2 not found (Debian: libjemalloc2)" >&2; exit 1; fi
	@if ! MALLOC_CONF=stats_print:true LD_PRELOAD=$(JEMALLOC) $(FUZZ_REPLAY) \
	    tests/fuzz/corpus/memory 2>&1 | grep -q 'jemalloc statistics'; then \
	    echo "jemalloc: preloading $(JEMALLOC) did not replace the allocator" >&2; exit 1; fi
	@echo "jemalloc: $(JEMALLOC) is the allocator of the runs below"
	LD_PRELOAD=$(JEMALLOC) tests/run-criterion.sh $(VG_BUILD)/tests/memra_tests \
	    $(JEMALLOC_TEST_ARGS)
	LD_PRELOAD=$(JEMALLOC) $(FUZZ_REPLAY) tests/fuzz/corpus/*

# The fuzzer links an instrumented build of the library's CPU sources (never the CUDA backend).
FUZZ_CFLAGS := -std=c11 -g -O1 -ffp-contract=off -fno-omit-frame-pointer \
               -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_CPPFLAGS := -Iabi -Isrc -Ikernels -D_GNU_SOURCE
FUZZ_LIB_SRC := $(wildcard src/*.c) $(wildcard kernels/cpu/*.c)
FUZZ_LIB_OBJ := $(FUZZ_LIB_SRC:%.c=$(FUZZ_BUILD)/obj/%.o)
FUZZ_BIN := $(FUZZ_BUILD)/fuzz_abi
FUZZ_OPTIONS := -timeout=20 -rss_limit_mb=4096 -max_len=2048 -print_final_stats=1
FUZZ_ENV := ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1 \
            UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

$(FUZZ_BUILD)/obj/%.o: %.c $(HEADERS) mk/sanitize.mk
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CPPFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(FUZZ_BIN): tests/fuzz/fuzz_abi.c tests/bad_input/op_args.h tests/bad_input/op_args.def \
              abi/memra.h mk/sanitize.mk $(FUZZ_LIB_OBJ)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -Iabi -D_GNU_SOURCE $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ \
	    tests/fuzz/fuzz_abi.c $(FUZZ_LIB_OBJ) -lm -lpthread

fuzz-build: $(FUZZ_BIN)

# New inputs go to tests/fuzz/corpus-run (ignored by git), crashes to tests/fuzz/artifacts/;
# libFuzzer exits non-zero on any crash, leak or sanitizer report.
fuzz: $(FUZZ_BIN)
	@mkdir -p tests/fuzz/corpus-run tests/fuzz/artifacts
	$(FUZZ_ENV) $(FUZZ_BIN) $(FUZZ_OPTIONS) -max_total_time=$(FUZZ_SECONDS) \
	    -artifact_prefix=tests/fuzz/artifacts/ tests/fuzz/corpus-run tests/fuzz/corpus

fuzz-regress: $(FUZZ_BIN)
	$(FUZZ_ENV) $(FUZZ_BIN) $(FUZZ_OPTIONS) tests/fuzz/corpus/*

TEST_TARGETS += asan tsan leakcheck jemalloc fuzz-regress
