# ABI stability and packaging (abi/README.md explains the pieces).
#
#   make header          regenerate abi/memra.h from bindings/rust/memra-abi (cbindgen; needs cargo)
#   make header-check    fail unless abi/memra.h is exactly what cbindgen generates
#   make abi-header      the header compiles cleanly as C99, C11, C++11 and C++17
#   make abi-layout      tests/abi_layout.c: struct sizes, offsets and enum values pinned
#   make abi-exports     exported symbols == header functions; versions, file name, SONAME agree
#   make abi-check       abidiff against abi/baseline/ with abi/abi.supp
#   make abi-baseline    rewrite abi/baseline/ from this build (a deliberate minor release only)
#   make install PREFIX=/usr/local [DESTDIR=...] / make uninstall (same variables); without
#                        DESTDIR, install ends with the line that makes programs find the
#                        library (abi/loader-hint.sh: ldconfig, or the run path flag)
#   make abi-install-check   install into a temporary prefix, build and run tests/abi_consumer.c
#                            with pkg-config, uninstall, check nothing is left
#
# Building the C library never needs cargo: only header and header-check run cbindgen.

ABI_BUILD = $(BUILD)/abi
ABI_BASELINE := abi/baseline/libmemra.so.$(VERSION_MAJOR).xml
ABI_SUPPRESSIONS := abi/abi.supp
ABI_CRATE := bindings/rust/memra-abi

CBINDGEN ?= cbindgen
PKG_CONFIG ?= pkg-config
# cbindgen runs `cargo metadata` on the declarations crate. cargo need not be on PATH (CI has it
# in ~/.cargo/bin only): its directory is put first on PATH, because cargo runs `rustc -vV`
# from there. CARGO_HOME and the target dir stay inside $(BUILD) and cargo is kept offline, so a
# fresh clone without network works.
ABI_CARGO ?= $(strip $(or $(CARGO),$(shell command -v cargo 2>/dev/null), \
                 $(wildcard $(HOME)/.cargo/bin/cargo),$(wildcard ~root/.cargo/bin/cargo)))
ABI_CBINDGEN_RUN = cd $(ABI_CRATE) && \
    PATH="$(dir $(ABI_CARGO)):$$PATH" CARGO='$(ABI_CARGO)' \
    CARGO_HOME='$(abspath $(ABI_BUILD))/cargo-home' \
    CARGO_TARGET_DIR='$(abspath $(ABI_BUILD))/cargo-target' CARGO_NET_OFFLINE=true \
    $(CBINDGEN) --quiet --config $(abspath abi/cbindgen.toml) --crate memra-abi \
    --lockfile $(abspath $(ABI_CRATE))/Cargo.lock

# Install locations (GNU names). libdir and includedir go into memra.pc relative to ${prefix}
# when they lie under it, so a relocated prefix keeps working.
PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
ABI_PC_PATH = $(if $(filter $(PREFIX)/%,$(1)),$${prefix}/$(patsubst $(PREFIX)/%,%,$(1)),$(1))

.PHONY: header header-check abi-header abi-layout abi-exports abi-check abi-baseline \
        install uninstall abi-install-check

header:
	@test -n '$(strip $(ABI_CARGO))' || \
	    { echo 'header: cargo not found (set ABI_CARGO=/path/to/cargo)' >&2; exit 1; }
	@mkdir -p $(ABI_BUILD)
	$(ABI_CBINDGEN_RUN) -o $(abspath abi/memra.h) .
	$(MAKE) rust-bindings

header-check:
	@test -n '$(strip $(ABI_CARGO))' || \
	    { echo 'header-check: cargo not found (set ABI_CARGO=/path/to/cargo)' >&2; exit 1; }
	@mkdir -p $(ABI_BUILD)
	$(ABI_CBINDGEN_RUN) -o $(abspath $(ABI_BUILD))/memra.h .
	@diff -u abi/memra.h $(ABI_BUILD)/memra.h || { \
	    echo 'header-check: abi/memra.h differs from what cbindgen generates from $(ABI_CRATE)' \
	         '(diff above); edit the Rust declarations and run `make header`.' >&2; exit 1; }
	@echo 'header-check: abi/memra.h is exactly the cbindgen output'

abi-header: lib
	CC='$(CC)' CXX='$(CXX)' abi/check-header.sh abi $(LIB_DEV) $(ABI_BUILD)/header

abi-layout:
	@mkdir -p $(ABI_BUILD)
	$(CC) -std=c11 -Wall -Wextra -Werror -pedantic -Iabi -c tests/abi_layout.c \
	    -o $(ABI_BUILD)/abi_layout_c11.o
	$(CXX) -x c++ -std=c++11 -Wall -Wextra -Werror -pedantic -Iabi -c tests/abi_layout.c \
	    -o $(ABI_BUILD)/abi_layout_cxx11.o
	@echo 'abi-layout: struct layouts and enum values match the 1.x pins'

abi-exports: lib
	CC='$(CC)' abi/check-exports.sh $(LIB_REAL) abi/memra.h abi/libmemra.map \
	    $(VERSION_MAJOR) $(VERSION_MINOR) $(VERSION_PATCH)

abi-check: lib
	abi/check-abi.sh check $(LIB_REAL) $(ABI_BASELINE) $(ABI_SUPPRESSIONS) $(ABI_BUILD)/diff

abi-baseline: lib
	@mkdir -p $(dir $(ABI_BASELINE))
	abi/check-abi.sh dump $(LIB_REAL) $(ABI_BASELINE)

install: lib
	install -d '$(DESTDIR)$(LIBDIR)' '$(DESTDIR)$(INCLUDEDIR)' '$(DESTDIR)$(PKGCONFIGDIR)'
	install -m 0755 $(LIB_REAL) '$(DESTDIR)$(LIBDIR)/libmemra.so.$(VERSION)'
	ln -sfn libmemra.so.$(VERSION) '$(DESTDIR)$(LIBDIR)/libmemra.so.$(VERSION_MAJOR)'
	ln -sfn libmemra.so.$(VERSION_MAJOR) '$(DESTDIR)$(LIBDIR)/libmemra.so'
	install -m 0644 abi/memra.h '$(DESTDIR)$(INCLUDEDIR)/memra.h'
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(call ABI_PC_PATH,$(LIBDIR))|' \
	    -e 's|@INCLUDEDIR@|$(call ABI_PC_PATH,$(INCLUDEDIR))|' -e 's|@VERSION@|$(VERSION)|' \
	    memra.pc.in > '$(DESTDIR)$(PKGCONFIGDIR)/memra.pc'
	chmod 0644 '$(DESTDIR)$(PKGCONFIGDIR)/memra.pc'
	@# A staged (DESTDIR) install is a package's payload: its installer runs ldconfig.
	@$(if $(DESTDIR),:,abi/loader-hint.sh '$(LIBDIR)')

uninstall:
	rm -f '$(DESTDIR)$(LIBDIR)/libmemra.so.$(VERSION)' \
	    '$(DESTDIR)$(LIBDIR)/libmemra.so.$(VERSION_MAJOR)' '$(DESTDIR)$(LIBDIR)/libmemra.so' \
	    '$(DESTDIR)$(INCLUDEDIR)/memra.h' '$(DESTDIR)$(PKGCONFIGDIR)/memra.pc'

# The install round trip, twice: into a real prefix (then a pkg-config consumer is built and
# run against it), and staged with DESTDIR (the layout a distribution package gets). Both
# prefixes hold a file of someone else's in every directory beforehand, so "uninstall removes
# exactly what install added" is checked by comparing the trees before and after.
ABI_INST = $(abspath $(ABI_BUILD))/install
ABI_INST_VARS = --no-print-directory BUILD='$(BUILD)' CUDA='$(CUDA)'
abi-install-check: lib
	rm -rf '$(ABI_INST)'
	abi/check-install.sh prepare '$(ABI_INST)/prefix' '$(ABI_INST)/before-prefix.txt'
	$(MAKE) $(ABI_INST_VARS) install PREFIX='$(ABI_INST)/prefix' DESTDIR= \
	    LIBDIR='$(ABI_INST)/prefix/lib' INCLUDEDIR='$(ABI_INST)/prefix/include' \
	    PKGCONFIGDIR='$(ABI_INST)/prefix/lib/pkgconfig' >/dev/null
	CC='$(CC)' PKG_CONFIG='$(PKG_CONFIG)' abi/check-install.sh installed '$(ABI_INST)/prefix' \
	    '$(ABI_INST)/before-prefix.txt' $(LIB_REAL) $(VERSION) '$(ABI_INST)/work'
	$(MAKE) $(ABI_INST_VARS) uninstall PREFIX='$(ABI_INST)/prefix' DESTDIR= \
	    LIBDIR='$(ABI_INST)/prefix/lib' INCLUDEDIR='$(ABI_INST)/prefix/include' \
	    PKGCONFIGDIR='$(ABI_INST)/prefix/lib/pkgconfig' >/dev/null
	abi/check-install.sh unchanged '$(ABI_INST)/prefix' '$(ABI_INST)/before-prefix.txt'
	abi/check-install.sh prepare '$(ABI_INST)/stage/opt/memra' '$(ABI_INST)/before-stage.txt'
	$(MAKE) $(ABI_INST_VARS) install PREFIX=/opt/memra DESTDIR='$(ABI_INST)/stage' \
	    LIBDIR=/opt/memra/lib INCLUDEDIR=/opt/memra/include \
	    PKGCONFIGDIR=/opt/memra/lib/pkgconfig >/dev/null
	PKG_CONFIG='$(PKG_CONFIG)' abi/check-install.sh staged '$(ABI_INST)/stage' /opt/memra \
	    '$(ABI_INST)/before-stage.txt' $(LIB_REAL) $(VERSION)
	$(MAKE) $(ABI_INST_VARS) uninstall PREFIX=/opt/memra DESTDIR='$(ABI_INST)/stage' \
	    LIBDIR=/opt/memra/lib INCLUDEDIR=/opt/memra/include \
	    PKGCONFIGDIR=/opt/memra/lib/pkgconfig >/dev/null
	abi/check-install.sh unchanged '$(ABI_INST)/stage/opt/memra' '$(ABI_INST)/before-stage.txt'
	@echo 'abi-install-check: install, pkg-config consumer and uninstall round trips passed'

TEST_TARGETS += header-check abi-header abi-layout abi-exports abi-check abi-install-check
