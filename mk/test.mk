# Criterion suites: every tests/test_*.c plus tests/testutil.c (the Criterion layer over the
# test-support library, mk/support.mk) make ONE binary, $(BUILD)/tests/memra_tests, so a suite
# added by anyone joins `make test-c` by existing.
#
#   make test-c                                  run every suite
#   make test-c TEST_ARGS="--filter 'gdn_packed/*'"   run a subset (any Criterion option works)
#   make test-c TEST_JOBS=8                      run 8 test processes at a time
#   MEMRA_TEST_SEED=0x... make test-c ...        replay the random inputs a failure printed
#
# The binary finds the library through an rpath of $ORIGIN/.., so the whole $(BUILD) folder can
# be carried to another machine (the GPU box) and run there as $(BUILD)/tests/memra_tests.

TEST_C_SRC := $(sort $(wildcard tests/test_*.c)) tests/testutil.c $(wildcard tests/bad_input/*.c)
TEST_C_OBJ := $(TEST_C_SRC:%.c=$(BUILD)/tests/obj/%.o)
# The bad-input framework and the operations' argument table (which the fuzzer shares).
$(TEST_C_OBJ): $(wildcard tests/bad_input/*.h tests/bad_input/*.def)
TEST_C_BIN := $(BUILD)/tests/memra_tests
# Tests include only the public header and their helpers. _GNU_SOURCE exposes setenv and the
# pthread declarations that -std=c11 hides.
TEST_C_CPPFLAGS := -Iabi -Itests -D_GNU_SOURCE
TEST_C_CFLAGS := -std=c11 -O2 -g -pthread $(WARN) $(EXTRA_CFLAGS)
TEST_C_LDFLAGS := -pthread -Wl,-rpath,'$$ORIGIN/..' $(EXTRA_LDFLAGS)
TEST_C_LDLIBS := -lcriterion -lm

# Extra Criterion arguments, and how many test processes run at once (Criterion's default is
# one per CPU).
TEST_ARGS ?=
TEST_JOBS ?=

$(BUILD)/tests/obj/%.o: %.c abi/memra.h tests/testutil.h $(SUPPORT_HDR) $(BUILD)/.config
	@mkdir -p $(dir $@)
	$(CC) $(TEST_C_CPPFLAGS) $(TEST_C_CFLAGS) -c $< -o $@

$(TEST_C_BIN): $(TEST_C_OBJ) $(SUPPORT_LIB) $(LIB_DEV)
	@mkdir -p $(dir $@)
	$(CC) $(TEST_C_LDFLAGS) -o $@ $(TEST_C_OBJ) $(SUPPORT_LIB) $(LIB_DEV) $(TEST_C_LDLIBS)

.PHONY: test-c-build test-c
test-c-build: $(TEST_C_BIN)

test-c: $(TEST_C_BIN)
	tests/run-criterion.sh $(TEST_C_BIN) $(if $(TEST_JOBS),--jobs=$(TEST_JOBS)) $(TEST_ARGS)

TEST_TARGETS += test-c
