# CUDA backend checks.
#
#   make memcheck     (needs a GPU) runs the Criterion suite's CUDA tests under each of
#                     compute-sanitizer's tools (memcheck with leak checking, racecheck,
#                     initcheck, synccheck); fails unless every tool reports 0 errors and every
#                     test passes. Logs: $(BUILD)/sanitize/<tool>.log and sweep-<tool>.log.
#                     SANITIZE_FILTER picks the tests (Criterion --filter glob). The default
#                     is every CUDA test except the bad-input cases: each sanitized process
#                     costs seconds to start, so the 837 separate bad_input/cuda cases run
#                     instead in one process, bad_input/cuda_sweep (MEMRA_TEST_SWEEP=1), in a
#                     second pass. Two of those cases ask for more memory than any device has,
#                     to check the OUT_OF_MEMORY status, and memcheck would report the failing
#                     cudaMalloc they provoke as an API error: that pass runs memcheck with
#                     --report-api-errors no (memory access and leak checking stay on), the
#                     first pass with API errors reported. Left out of both:
#                     engine/explicit_cuda_without_device_is_no_device, which hides every
#                     device from its process, so it runs nothing on a GPU for the tools to
#                     watch, and its deliberate cudaErrorNoDevice would count as an API error.
#   make cuda-link-check   (part of `make test`) checks that libmemra.so does not load the CUDA
#                     runtime or driver at load time: the runtime is linked statically and the
#                     driver is opened on first use, so the library loads where CUDA is absent.
#
# On the GPU machine, tools/device/gpu-check.sh runs the suite, the sanitizers, the probe and
# the bench from a carried build folder (see kernels/cuda/NOTES.md).

SANITIZE_FILTER ?= @(*/*_cuda|bad_input/cuda_good*|engine/auto_*cuda*|engine/env_cuda_*)

.PHONY: memcheck cuda-link-check
memcheck: test-c-build
	tools/device/sanitize.sh $(BUILD)/tests/memra_tests $(BUILD)/sanitize \
	    --filter='$(SANITIZE_FILTER)'
	MEMRA_TEST_SWEEP=1 SANITIZE_TAG=sweep SANITIZE_MEMCHECK_FLAGS='--report-api-errors no' \
	    tools/device/sanitize.sh $(BUILD)/tests/memra_tests $(BUILD)/sanitize \
	    --filter='bad_input/cuda_sweep'

cuda-link-check: lib
	@if readelf -d $(LIB_REAL) | grep -E 'NEEDED.*\[(libcudart|libcuda)\.'; then \
	    echo "cuda-link-check: FAIL: $(LIB_REAL) needs a CUDA library at load time" >&2; \
	    exit 1; \
	fi
	@echo "cuda-link-check: OK: $(LIB_REAL) (CUDA=$(CUDA)) loads without any CUDA library"

TEST_TARGETS += cuda-link-check
