# The test-support library (tests/support/): the generator, seeds, views, shapes, buffer sets,
# the 1.0 reference programs and the comparisons that the Criterion suites, the bench and the
# GPU checks share. Plain C11 over the public ABI, no Criterion: built once per BUILD as a
# static archive that $(BUILD)/tests/memra_tests (mk/test.mk) and $(BUILD)/bench/memra_bench
# (mk/bench.mk) link. The Makefile reads this fragment before the others, which name
# $(SUPPORT_LIB) among their prerequisites.

SUPPORT_SRC := $(sort $(wildcard tests/support/*.c))
SUPPORT_HDR := $(wildcard tests/support/*.h) abi/memra.h
SUPPORT_OBJ := $(SUPPORT_SRC:%.c=$(BUILD)/support/obj/%.o)
SUPPORT_LIB := $(BUILD)/support/libmemra_test_support.a
SUPPORT_CPPFLAGS := -Iabi -Itests -D_GNU_SOURCE
SUPPORT_CFLAGS := -std=c11 -O2 -g $(WARN) $(EXTRA_CFLAGS)

$(SUPPORT_OBJ): $(BUILD)/support/obj/%.o: %.c $(SUPPORT_HDR) $(BUILD)/.config
	@mkdir -p $(dir $@)
	$(CC) $(SUPPORT_CPPFLAGS) $(SUPPORT_CFLAGS) -c $< -o $@

$(SUPPORT_LIB): $(SUPPORT_OBJ)
	@rm -f $@
	$(AR) rcs $@ $(SUPPORT_OBJ)

.PHONY: support-build
support-build: $(SUPPORT_LIB)
