# examples/: the programs a user copies (examples/README.md), built and run the way a user
# builds them: against an INSTALLED libmemra (`make install` into a temporary prefix), with
# nothing but pkg-config, memra.pc's run path flag and, for the Rust crate, the RUSTFLAGS line
# `make install` prints for such a prefix. They start without LD_LIBRARY_PATH.
#
#   make examples          install, build examples/speculative.c and examples/rust, run each on
#                          the CPU backend and with the default backend choice (CUDA when a
#                          device is usable), require `bit-identical: yes` from every run and the
#                          same checksum from C and Rust on the CPU, uninstall
#   make excerpts-check    the C blocks README.md tags as excerpts are exactly those parts of
#                          the examples (tools/check-excerpts.sh)

EX_INST := $(abspath $(BUILD))/examples
EX_PREFIX := $(EX_INST)/prefix
EX_PC := $(EX_PREFIX)/lib/pkgconfig
EX_VARS = --no-print-directory BUILD='$(BUILD)' CUDA='$(CUDA)' PREFIX='$(EX_PREFIX)' \
    LIBDIR='$(EX_PREFIX)/lib' INCLUDEDIR='$(EX_PREFIX)/include' PKGCONFIGDIR='$(EX_PC)' DESTDIR=
EX_PKG = PKG_CONFIG_PATH='$(EX_PC)' $(PKG_CONFIG)
EX_C_BIN := $(EX_INST)/speculative
EX_RUST_BIN := $(EX_INST)/target/debug/speculative

# One run of a built example: its output kept in $(EX_INST)/NAME.log and shown, and its verdict
# line required. $(1) the binary, $(2) the log's name, $(3) the MEMRA_BACKEND value (empty: the
# library's own choice).
define ex_run
	env -u LD_LIBRARY_PATH $(if $(3),MEMRA_BACKEND=$(3),-u MEMRA_BACKEND) '$(1)' \
	  > '$(EX_INST)/$(2).log' || { cat '$(EX_INST)/$(2).log'; exit 1; }
	@cat '$(EX_INST)/$(2).log'
	@grep -q '^bit-identical: yes$$' '$(EX_INST)/$(2).log'
endef

.PHONY: examples excerpts-check
examples: lib rust-check-cargo
	rm -rf '$(EX_INST)'
	$(MAKE) $(EX_VARS) install >/dev/null
	$(CC) -std=c11 -Wall -Wextra -Werror -pedantic -O2 examples/speculative.c \
	  $$($(EX_PKG) --cflags --libs memra) $$($(EX_PKG) --variable=rpath memra) -lm -o '$(EX_C_BIN)'
	cd examples/rust && env -u MEMRA_LIB_DIR -u LD_LIBRARY_PATH PATH="$(dir $(CARGO)):$$PATH" \
	  PKG_CONFIG_PATH='$(EX_PC)' CARGO_TARGET_DIR='$(EX_INST)/target' \
	  RUSTFLAGS="-C link-arg=$$($(EX_PKG) --variable=rpath memra)" $(CARGO) build --offline -q
	@# The run path, not the build folder, must be what finds the library.
	@for b in '$(EX_C_BIN)' '$(EX_RUST_BIN)'; do \
	  env -u LD_LIBRARY_PATH ldd "$$b" | \
	    grep -q 'libmemra.so.$(VERSION_MAJOR) => $(EX_PREFIX)/lib/libmemra.so.$(VERSION_MAJOR) ' || \
	    { env -u LD_LIBRARY_PATH ldd "$$b" >&2; \
	      echo "examples: $$b does not load the installed libmemra" >&2; exit 1; }; \
	done
	$(call ex_run,$(EX_C_BIN),c-cpu,cpu)
	$(call ex_run,$(EX_C_BIN),c-auto,)
	$(call ex_run,$(EX_RUST_BIN),rust-cpu,cpu)
	$(call ex_run,$(EX_RUST_BIN),rust-auto,)
	@# The same inputs and the same CPU kernels: C and Rust must print the same checksums.
	@cmp -s '$(EX_INST)/c-cpu.log' '$(EX_INST)/rust-cpu.log' || \
	  { diff '$(EX_INST)/c-cpu.log' '$(EX_INST)/rust-cpu.log' >&2; \
	    echo "examples: the C and Rust programs disagree on the CPU backend" >&2; exit 1; }
	$(MAKE) $(EX_VARS) uninstall >/dev/null
	@echo "examples: C and Rust, built against the installed prefix, ran and agreed"

excerpts-check:
	@tools/check-excerpts.sh README.md

TEST_TARGETS += excerpts-check examples
