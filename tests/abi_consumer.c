/*
 * A downstream program, built the way a packager's users build: against an INSTALLED libmemra,
 * with nothing but `pkg-config --cflags --libs memra` (`make abi-install-check` installs into a
 * temporary prefix, builds and runs this, then uninstalls). It does what every host must do at
 * load time, checks the ABI version, then drives one small operation through the CPU backend
 * and checks its result, so a broken install (wrong header, wrong library, wrong symlinks or
 * .pc file) cannot pass. Exit status 0 means the installed library is usable.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memra.h>

#define CONV_DIM 16
#define D_CONV 4
#define PAD (D_CONV - 1)

static uint64_t seed;

static int fail(const char *what, MemraStatus status)
{
    fprintf(stderr, "abi_consumer (seed 0x%016llx): %s: %s (%s)\n", (unsigned long long)seed, what,
            memra_status_string(status), memra_last_error_message());
    return 1;
}

/* Inputs nobody chose, reproducible with MEMRA_TEST_SEED as the Criterion suites do. */
static int pick_seed(void)
{
    const char *env = getenv("MEMRA_TEST_SEED");
    if (env != NULL) {
        seed = strtoull(env, NULL, 0);
        return seed != 0 ? 0 : -1;
    }
    FILE *f = fopen("/dev/urandom", "rb");
    if (f == NULL) {
        return -1;
    }
    size_t got = fread(&seed, sizeof seed, 1, f);
    fclose(f);
    seed |= 1; /* xorshift must not start at zero */
    return got == 1 ? 0 : -1;
}

/* xorshift64 mapped to [-1, 1). */
static float next_value(void)
{
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    return (float)((double)(seed >> 11) / 4503599627370496.0 - 1.0);
}

int main(void)
{
    if (pick_seed() != 0) {
        fprintf(stderr, "abi_consumer: no seed (set MEMRA_TEST_SEED to a non-zero value)\n");
        return 1;
    }

    /* The load-time check every host makes: same major, at least the header's minor (with the
     * major equal, that is the whole version word not below the header's). */
    uint32_t abi = memra_abi_version();
    if ((abi >> 16) != MEMRA_VERSION_MAJOR || abi < MEMRA_ABI_VERSION) {
        fprintf(stderr, "abi_consumer: library ABI %u.%u, header %d.%d\n", abi >> 16, abi & 0xffffu,
                MEMRA_VERSION_MAJOR, MEMRA_VERSION_MINOR);
        return 1;
    }
    /* Header and library were installed together, so the full versions must agree exactly. */
    char expected_version[32];
    snprintf(expected_version, sizeof expected_version, "%d.%d.%d", MEMRA_VERSION_MAJOR,
             MEMRA_VERSION_MINOR, MEMRA_VERSION_PATCH);
    if (strcmp(memra_version_string(), expected_version) != 0) {
        fprintf(stderr, "abi_consumer: library version '%s', header %s\n", memra_version_string(),
                expected_version);
        return 1;
    }

    /* A refused call reports through the status and the per-thread message. */
    MemraStatus st = memra_engine_create(NULL, NULL);
    if (st != MEMRA_STATUS_INVALID_ARGUMENT || memra_last_error_message()[0] == '\0' ||
        strcmp(memra_status_string(st), "MEMRA_STATUS_INVALID_ARGUMENT") != 0) {
        return fail("memra_engine_create(NULL, NULL) should be INVALID_ARGUMENT", st);
    }

    MemraEngineOptions options;
    st = memra_engine_options_init(&options);
    if (st != MEMRA_STATUS_OK || options.struct_size != sizeof options) {
        return fail("memra_engine_options_init", st);
    }
    options.backend = MEMRA_BACKEND_CPU;
    options.flags = MEMRA_ENGINE_FLAG_IGNORE_ENV;
    MemraEngine *engine = NULL;
    st = memra_engine_create(&options, &engine);
    if (st != MEMRA_STATUS_OK) {
        return fail("memra_engine_create(CPU)", st);
    }
    MemraBackend backend = MEMRA_BACKEND_AUTO;
    st = memra_engine_backend(engine, &backend);
    if (st != MEMRA_STATUS_OK || backend != MEMRA_BACKEND_CPU) {
        return fail("memra_engine_backend should be CPU", st);
    }

    /* One conv step of one sequence: y[c] = silu(ring[c] . w[c][0..pad) + x[c] * w[c][pad]). */
    float x[CONV_DIM], w[CONV_DIM * D_CONV], ring[CONV_DIM * PAD];
    for (size_t i = 0; i < CONV_DIM; i++) {
        x[i] = next_value();
    }
    for (size_t i = 0; i < CONV_DIM * D_CONV; i++) {
        w[i] = next_value();
    }
    for (size_t i = 0; i < CONV_DIM * PAD; i++) {
        ring[i] = next_value();
    }

    MemraSliceMutF32 x_dev, w_dev, ring_dev, y_dev;
    MemraSliceMutU64 table_dev;
    if ((st = memra_htod_f32(engine, (MemraSliceF32){x, CONV_DIM}, &x_dev)) != MEMRA_STATUS_OK ||
        (st = memra_htod_f32(engine, (MemraSliceF32){w, CONV_DIM * D_CONV}, &w_dev)) !=
            MEMRA_STATUS_OK ||
        (st = memra_htod_f32(engine, (MemraSliceF32){ring, CONV_DIM * PAD}, &ring_dev)) !=
            MEMRA_STATUS_OK ||
        (st = memra_alloc_f32(engine, CONV_DIM, MEMRA_ALLOC_INIT_UNINIT, &y_dev)) !=
            MEMRA_STATUS_OK) {
        return fail("uploading the inputs", st);
    }
    uint64_t table = (uint64_t)(uintptr_t)ring_dev.ptr;
    if ((st = memra_htod_u64(engine, (MemraSliceU64){&table, 1}, &table_dev)) != MEMRA_STATUS_OK) {
        return fail("uploading the table", st);
    }
    /* Poison the output so that an element the operation does not write cannot pass. */
    float poison[CONV_DIM];
    for (size_t i = 0; i < CONV_DIM; i++) {
        poison[i] = NAN;
    }
    if ((st = memra_htod_f32_into(engine, (MemraSliceF32){poison, CONV_DIM}, y_dev)) !=
        MEMRA_STATUS_OK) {
        return fail("poisoning the output", st);
    }

    st = memra_ssm_conv1d_fused_decode_b_view(engine, (MemraSliceF32){x_dev.ptr, x_dev.len},
                                              (MemraSliceU64){table_dev.ptr, table_dev.len},
                                              (MemraSliceF32){w_dev.ptr, w_dev.len}, y_dev,
                                              CONV_DIM, D_CONV, 1);
    if (st != MEMRA_STATUS_OK) {
        return fail("memra_ssm_conv1d_fused_decode_b_view", st);
    }

    float y[CONV_DIM], ring_after[CONV_DIM * PAD];
    if ((st = memra_dtoh_f32(engine, (MemraSliceF32){y_dev.ptr, y_dev.len},
                             (MemraSliceMutF32){y, CONV_DIM})) != MEMRA_STATUS_OK ||
        (st = memra_dtoh_f32(engine, (MemraSliceF32){ring_dev.ptr, ring_dev.len},
                             (MemraSliceMutF32){ring_after, CONV_DIM * PAD})) != MEMRA_STATUS_OK) {
        return fail("reading back", st);
    }

    /* The float64 reference; the CPU backend must agree within 1e-5 relative
     * (docs/arithmetic.md). */
    double err2 = 0.0, ref2 = 0.0;
    int ring_ok = 1;
    for (size_t c = 0; c < CONV_DIM; c++) {
        double acc = (double)x[c] * (double)w[c * D_CONV + PAD];
        for (size_t j = 0; j < PAD; j++) {
            acc += (double)ring[c * PAD + j] * (double)w[c * D_CONV + j];
        }
        double ref = acc / (1.0 + exp(-acc));
        err2 += ((double)y[c] - ref) * ((double)y[c] - ref);
        ref2 += ref * ref;
        /* The ring rolls by one column: a copy, so it must be bit-exact. */
        for (size_t j = 0; j < PAD; j++) {
            float want = j + 1 < PAD ? ring[c * PAD + j + 1] : x[c];
            ring_ok &= memcmp(&ring_after[c * PAD + j], &want, sizeof want) == 0;
        }
    }
    double rel = sqrt(err2 / ref2);
    if (!(rel <= 1e-5) || !ring_ok) {
        fprintf(stderr,
                "abi_consumer (seed 0x%016llx): conv result wrong: relative error %g, ring %s\n",
                (unsigned long long)seed, rel, ring_ok ? "rolled" : "NOT rolled");
        return 1;
    }

    MemraSliceMutF32 f32_bufs[] = {x_dev, w_dev, ring_dev, y_dev};
    for (size_t i = 0; i < sizeof f32_bufs / sizeof f32_bufs[0]; i++) {
        if ((st = memra_free(engine, f32_bufs[i].ptr)) != MEMRA_STATUS_OK) {
            return fail("memra_free", st);
        }
    }
    if ((st = memra_free(engine, table_dev.ptr)) != MEMRA_STATUS_OK) {
        return fail("memra_free", st);
    }
    if ((st = memra_engine_destroy(engine)) != MEMRA_STATUS_OK) {
        return fail("memra_engine_destroy", st);
    }
    printf("abi_consumer: libmemra %s (ABI %u.%u) loaded, CPU conv step correct (relative error "
           "%.2g)\n",
           memra_version_string(), abi >> 16, abi & 0xffffu, rel);
    return 0;
}
