# CUDA backend checks.
#
#   make memcheck     (needs a GPU) runs the Criterion suite's CUDA tests under each of
#                     compute-sanitizer's tools (memcheck with leak checking, racecheck,
#                     initcheck, synccheck); fails unless every tool reports 0 errors and every
#                     test passes. tools/gpu/sanitize-suite.sh says which tests run, in
#                     which two passes, and why; SANITIZE_FILTER picks those of the first pass
#                     (Criterion --filter glob). Logs: $(BUILD)/sanitize/.
#   make cuda-link-check   (part of `make test`) checks that libmemra.so does not load the CUDA
#                     runtime or driver at load time: the runtime is linked statically and the
#                     driver is opened on first use, so the library loads where CUDA is absent.
#
# On a machine with a GPU, tools/gpu/gpu-check.sh runs the suite, the sanitizers, the bench's
# fingerprints (memra_bench --mode hash, against tools/gpu/hash-1.0.0.txt), its per-operation
# timings (--mode per-op) and the bench from a build folder or from a staged copy of one
# (tools/gpu/stage.sh; see kernels/cuda/NOTES.md, "Checking and profiling on a GPU").

.PHONY: memcheck cuda-link-check
memcheck: test-c-build
	tools/gpu/sanitize-suite.sh $(BUILD)/tests/memra_tests $(BUILD)/sanitize

cuda-link-check: lib
	@if readelf -d $(LIB_REAL) | grep -E 'NEEDED.*\[(libcudart|libcuda)\.'; then \
	    echo "cuda-link-check: FAIL: $(LIB_REAL) needs a CUDA library at load time" >&2; \
	    exit 1; \
	fi
	@echo "cuda-link-check: OK: $(LIB_REAL) (CUDA=$(CUDA)) loads without any CUDA library"

TEST_TARGETS += cuda-link-check
