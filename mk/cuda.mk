# CUDA backend checks.
#
#   make memcheck     (needs a GPU) runs the kernel grid (suite kernel_grid: every CUDA kernel
#                     of the library in every template instantiation, on small grids) under
#                     each of compute-sanitizer's tools (memcheck with leak checking, racecheck,
#                     initcheck, synccheck); fails unless every tool reports 0 errors and every
#                     test passes. SANITIZE_SCOPE=suite runs every CUDA test of the suite instead,
#                     in two passes (with SANITIZER_TOOLS=memcheck: racecheck does not finish
#                     that scope in minutes). tools/gpu/sanitize-suite.sh says which tests each
#                     scope runs, and why; SANITIZE_FILTER replaces the Criterion --filter glob of
#                     its (first) pass. Logs: $(BUILD)/sanitize/.
#   make cuda-link-check   (part of `make test`) checks that libmemra.so does not load the CUDA
#                     runtime or driver at load time: the runtime is linked statically and the
#                     driver is opened on first use, so the library loads where CUDA is absent.
#
# On a machine with a GPU, tools/gpu/gpu-check.sh runs the suite, the sanitizers over the kernel
# grid and the proof that the grid launches every kernel (tools/gpu/kernel-coverage.sh), the bench's
# fingerprints (memra_bench --mode hash, against tools/gpu/hash-1.0.0.txt), its per-operation
# timings (--mode per-op) and the bench from a build folder or from a staged copy of one
# (tools/gpu/stage.sh; see kernels/cuda/NOTES.md, "Checking and profiling on a GPU").

SANITIZE_SCOPE ?= grid

.PHONY: memcheck cuda-link-check
memcheck: test-c-build
	tools/gpu/sanitize-suite.sh $(BUILD)/tests/memra_tests $(BUILD)/sanitize $(SANITIZE_SCOPE)

cuda-link-check: lib
	@if readelf -d $(LIB_REAL) | grep -E 'NEEDED.*\[(libcudart|libcuda)\.'; then \
	    echo "cuda-link-check: FAIL: $(LIB_REAL) needs a CUDA library at load time" >&2; \
	    exit 1; \
	fi
	@echo "cuda-link-check: OK: $(LIB_REAL) (CUDA=$(CUDA)) loads without any CUDA library"

TEST_TARGETS += cuda-link-check
