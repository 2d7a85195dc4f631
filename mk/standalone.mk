# The repository stands on its own, its version numbers agree, and its host runtime is layered.
# The checks take well under a second and need nothing but the source tree, so `make test` runs
# them first.
#
#   make standalone-check   tools/check-standalone.sh: no absolute machine path, no reference to
#                           a file outside the repository or to an outside specification, no
#                           development-history wording (the script's header lists the rules)
#   make version-check      the [package] version of every crate in bindings/rust is the
#                           header's MEMRA_VERSION_MAJOR.MINOR.PATCH, as are their entries in
#                           the Cargo.lock files
#   make layers-check       tools/check-layers.sh: the host runtime's files form the one-way
#                           layers that src/engine.h lists (no include or call goes up the
#                           list, so there is no cycle)

VERSION_CRATES := $(wildcard bindings/rust/*/Cargo.toml)
VERSION_LOCKS := $(wildcard bindings/rust/Cargo.lock bindings/rust/*/Cargo.lock)

.PHONY: standalone-check version-check layers-check

standalone-check:
	@tools/check-standalone.sh

layers-check:
	@tools/check-layers.sh

# A crate's version is the first `version = "..."` line of its Cargo.toml ([package] comes first
# in each). In a lock file, each of our crates is a `name = "memra-..."` line followed by its
# version line; crates from elsewhere would have other names (there are none).
version-check:
	@fail=0; \
	for t in $(VERSION_CRATES); do \
	  v=$$(sed -n 's/^version = "\(.*\)"$$/\1/p' $$t | head -n 1); \
	  if [ "$$v" != "$(VERSION)" ]; then \
	    echo "version-check: $$t has version '$$v', abi/memra.h says $(VERSION)" >&2; fail=1; \
	  fi; \
	done; \
	for l in $(VERSION_LOCKS); do \
	  bad=$$(sed -n '/^name = "memra-/{n;s/^version = "\(.*\)"$$/\1/p;}' $$l | grep -vx '$(VERSION)'); \
	  if [ -n "$$bad" ]; then \
	    echo "version-check: $$l records memra crates at $$bad, abi/memra.h says $(VERSION)" \
	         "(cargo rewrites it after a Cargo.toml change)" >&2; fail=1; \
	  fi; \
	done; \
	[ $$fail -eq 0 ] && echo "version-check: $(words $(VERSION_CRATES)) crates and" \
	  "$(words $(VERSION_LOCKS)) lock files at $(VERSION), the version of abi/memra.h"

# First in the list: they are the cheapest checks and need no build.
TEST_TARGETS := standalone-check version-check layers-check $(TEST_TARGETS)
