# libmemra build. `make` builds the library, `make test` runs every check CI runs, `make bench`
# runs the main benchmark. Area-specific rules live in mk/*.mk (tests, bench, Rust bindings,
# ABI checks, sanitizers) and are included below.

# The version is defined once: MEMRA_VERSION_MAJOR/MINOR/PATCH in bindings/rust/memra-abi, which
# cbindgen writes into abi/memra.h. Everything here reads it from the header (`.define` because a
# literal number sign would start a comment in older makes); `make test` checks that the crates'
# Cargo.toml versions agree (mk/standalone.mk).
memra_header_version = $(shell sed -n 's/^.define MEMRA_VERSION_$(1) \([0-9][0-9]*\)$$/\1/p' abi/memra.h)
VERSION_MAJOR := $(call memra_header_version,MAJOR)
VERSION_MINOR := $(call memra_header_version,MINOR)
VERSION_PATCH := $(call memra_header_version,PATCH)
ifeq ($(and $(VERSION_MAJOR),$(VERSION_MINOR),$(VERSION_PATCH)),)
$(error cannot read MEMRA_VERSION_MAJOR/MINOR/PATCH from abi/memra.h)
endif
VERSION := $(VERSION_MAJOR).$(VERSION_MINOR).$(VERSION_PATCH)

BUILD ?= build
CC ?= cc
ifeq ($(origin CC),default)
CC := gcc
endif

# CUDA: compiled in when nvcc is found (CUDA=0 forces a CPU-only build, CUDA=1 insists).
NVCC ?= $(or $(shell command -v nvcc 2>/dev/null),$(wildcard /usr/local/cuda/bin/nvcc))
ifeq ($(origin CUDA),undefined)
CUDA := $(if $(NVCC),1,0)
endif
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
# SASS for each listed architecture plus PTX for the newest, so newer GPUs JIT the PTX. The
# full list is the default of `make` and `make install` (a library to ship runs on every GPU
# of the list) and is what CUDA_ARCHS=all asks for.
CUDA_ARCHS_ALL := 80 89 90 100 120
# `make bench` and `make test` need only what can run here, and nvcc's time grows with every
# architecture (the verify kernel takes 20 s and more each): unless CUDA_ARCHS is given they
# build for this machine's GPU (nvidia-smi's compute capability) or, with no GPU, only the PTX
# of one architecture, since the CUDA code is then compiled but never run (and PTX skips the
# slowest step, ptxas). A build folder that already holds the full fat binary is kept as it is.
# The choice is exported, so that the sub-makes of the checks (the install round trips) build
# the same objects.
# Only when every goal runs here: a command that also builds to carry elsewhere (`make lib
# test-c-build bench-build` for a GPU machine, kernels/cuda/NOTES.md) keeps the full list.
MEMRA_QUICK_GOALS := bench bench-compare test test-c test-rust bench-test examples
ifeq ($(CUDA_ARCHS),all)
override CUDA_ARCHS := $(CUDA_ARCHS_ALL)
endif
ifeq ($(origin CUDA_ARCHS)$(CUDA),undefined1)
ifeq ($(filter-out $(MEMRA_QUICK_GOALS),$(MAKECMDGOALS))$(if $(MAKECMDGOALS),,none),)
memra_built_archs := $(shell sed -n 's/^CUDA=1 ARCHS=\([0-9 ]*\) SASS=\1 CC=.*/\1/p' \
                                   $(BUILD)/.config 2>/dev/null)
memra_gpu_arch := $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | \
                          head -n 1 | tr -d ' .')
ifeq ($(strip $(memra_built_archs)),$(CUDA_ARCHS_ALL))
CUDA_ARCHS := $(CUDA_ARCHS_ALL)
else ifneq ($(memra_gpu_arch),)
CUDA_ARCHS := $(memra_gpu_arch)
memra_arch_note := CUDA code built for this machine's GPU only (sm_$(memra_gpu_arch)); CUDA_ARCHS=all builds every architecture
else
CUDA_ARCHS := 90
CUDA_SASS_ARCHS :=
memra_arch_note := no GPU here (nvidia-smi finds none): the CUDA code is built (PTX for compute_90 only) but cannot run here, the CPU backend runs everything; CUDA_ARCHS=all builds every architecture, CUDA=0 none
endif
endif
endif
CUDA_ARCHS ?= $(CUDA_ARCHS_ALL)
# The architectures that get SASS (all of CUDA_ARCHS unless set apart, as above); the newest of
# CUDA_ARCHS always gets PTX too.
CUDA_SASS_ARCHS ?= $(CUDA_ARCHS)
export CUDA_ARCHS CUDA_SASS_ARCHS
ifneq ($(memra_arch_note),)
ifeq ($(MAKELEVEL),0)
$(info make: $(memra_arch_note))
endif
endif
CUDA_NEWEST := $(lastword $(CUDA_ARCHS))
NVCC_GENCODE := $(foreach a,$(CUDA_SASS_ARCHS),-gencode=arch=compute_$(a),code=sm_$(a)) \
                -gencode=arch=compute_$(CUDA_NEWEST),code=compute_$(CUDA_NEWEST)

comma := ,
WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter
CPPFLAGS_LIB := -Iabi -Isrc -Ikernels -D_GNU_SOURCE
# -ffp-contract=off: the CPU reference fuses a multiply-add only where it writes fmaf(): the
# accumulation chains that the arithmetic contract fuses on every backend (docs/arithmetic.md).
CFLAGS_LIB := -std=c11 -O2 -g -fPIC -fvisibility=hidden -ffp-contract=off $(WARN) $(EXTRA_CFLAGS)
NVCCFLAGS := -O3 -std=c++17 -Xcompiler -fPIC,-fvisibility=hidden -Iabi -Isrc -Ikernels \
             $(NVCC_GENCODE) $(EXTRA_NVCCFLAGS)
LDFLAGS_LIB := -shared -Wl,-soname,libmemra.so.$(VERSION_MAJOR) \
               -Wl,--version-script=abi/libmemra.map -Wl,--no-undefined $(EXTRA_LDFLAGS)
LDLIBS_LIB := -lm -lpthread

SRC_C := $(wildcard src/*.c) $(wildcard kernels/cpu/*.c)
# Largest first: under -j (as `make bench` builds) the longest nvcc run then starts first.
SRC_CU := $(shell ls -S kernels/cuda/*.cu 2>/dev/null)
ifeq ($(CUDA),1)
CPPFLAGS_LIB += -DMEMRA_WITH_CUDA=1 -I$(CUDA_HOME)/include
# The CUDA runtime is linked statically: libmemra.so must load on a machine without CUDA.
LDLIBS_LIB += -L$(CUDA_HOME)/lib64 -lcudart_static -ldl -lrt -lstdc++
OBJ_CU := $(SRC_CU:%.cu=$(BUILD)/obj/%.o)
endif
OBJ_C := $(SRC_C:%.c=$(BUILD)/obj/%.o)
HEADERS := abi/memra.h $(wildcard src/*.h) src/ops.def kernels/kernels.h $(wildcard kernels/cpu/*.h) \
           $(wildcard kernels/cuda/*.cuh)

LIB_REAL := $(BUILD)/libmemra.so.$(VERSION)
LIB_SONAME := $(BUILD)/libmemra.so.$(VERSION_MAJOR)
LIB_DEV := $(BUILD)/libmemra.so

.PHONY: all lib clean test bench format format-check
all: lib
lib: $(LIB_DEV)

$(BUILD)/obj/%.o: %.c $(HEADERS) $(BUILD)/.config
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS_LIB) $(CFLAGS_LIB) -c $< -o $@

# The CPU kernels are the reference: -O3 but still no contraction and no fast-math.
$(BUILD)/obj/kernels/cpu/%.o: kernels/cpu/%.c $(HEADERS) $(BUILD)/.config
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS_LIB) $(CFLAGS_LIB) -O3 -c $< -o $@

# nvcc takes seconds to a minute and a half per file; the line says what the wait is for.
$(BUILD)/obj/%.o: %.cu $(HEADERS) $(BUILD)/.config
	@mkdir -p $(dir $@)
	@echo "nvcc: compiling $< ($(if $(strip $(CUDA_SASS_ARCHS)),sm_$(subst $() ,$(comma)sm_,$(strip $(CUDA_SASS_ARCHS))) and )PTX for compute_$(CUDA_NEWEST)): seconds to a minute or more per architecture"
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

# Rebuild everything when the configuration (CUDA on/off, architectures, flags) changes.
$(BUILD)/.config: FORCE
	@mkdir -p $(BUILD)
	@echo "CUDA=$(CUDA) ARCHS=$(CUDA_ARCHS) SASS=$(CUDA_SASS_ARCHS) CC=$(CC) $(EXTRA_CFLAGS) $(EXTRA_NVCCFLAGS) $(EXTRA_LDFLAGS)" > $@.new
	@cmp -s $@.new $@ && rm $@.new || mv $@.new $@
.PHONY: FORCE
FORCE:

# The CUDA objects first: under -j (as `make bench` builds), the slowest compiles start first.
$(LIB_REAL): $(OBJ_CU) $(OBJ_C) abi/libmemra.map
	$(CC) $(LDFLAGS_LIB) -o $@ $(OBJ_C) $(OBJ_CU) $(LDLIBS_LIB)

$(LIB_SONAME): $(LIB_REAL)
	ln -sf $(notdir $<) $@
$(LIB_DEV): $(LIB_SONAME)
	ln -sf $(notdir $<) $@

# Area rules: each fragment appends its checks to TEST_TARGETS (run in order by `make test`).
TEST_TARGETS := format-check
# The test-support library first: the fragments after it link $(SUPPORT_LIB).
include mk/support.mk $(filter-out mk/support.mk,$(sort $(wildcard mk/*.mk)))

# On a fresh machine the Debian packages the checks need are installed first (as root; otherwise
# the command to run is printed). DEPS=0 skips that step.
DEPS ?= 1
.PHONY: deps-test deps-bench
deps-test:
	@$(if $(filter 1,$(DEPS)),tools/install-deps.sh test,true)
deps-bench:
	@$(if $(filter 1,$(DEPS)),tools/install-deps.sh bench,true)

test: deps-test $(TEST_TARGETS)
	@echo "make test: all checks passed"

# Every C and CUDA file of the tree, wherever it lies under these folders (abi/memra.h is
# cbindgen's output and is checked against it instead). .clang-format is written for
# clang-format 14, which is preferred when installed.
FORMAT_FILES = $(sort $(shell find src kernels tests bench tools examples \( -name '*.c' -o -name '*.h' \
                              -o -name '*.cu' -o -name '*.cuh' \) -type f 2>/dev/null))
CLANG_FORMAT ?= $(or $(shell command -v clang-format-14 2>/dev/null),clang-format)
format:
	$(CLANG_FORMAT) -i $(FORMAT_FILES)
format-check:
	@$(CLANG_FORMAT) --dry-run --Werror $(FORMAT_FILES) || { echo "format-check: the files" \
	    "above differ from .clang-format; run \`make format\` or $(CLANG_FORMAT) -i on them" >&2; \
	    exit 1; }
	@echo "format-check: $(words $(FORMAT_FILES)) C and CUDA files match .clang-format"

clean:
	rm -rf $(BUILD)
