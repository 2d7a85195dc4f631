#include "testutil.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tu_varied(float *out, size_t len, uint64_t seed, float spread)
{
    uint64_t x = (seed * UINT64_C(0x9E3779B97F4A7C15)) | 1;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out[i] = (float)((double)(x >> 11) / (double)(UINT64_C(1) << 53) * 2.0 - 1.0) * spread;
    }
}

uint64_t tu_fresh_seed(void)
{
    const char *env = getenv("MEMRA_TEST_SEED");
    if (env && *env)
        return strtoull(env, NULL, 0);
    uint64_t s = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    if (f) {
        if (fread(&s, sizeof s, 1, f) != 1)
            s = 0;
        fclose(f);
    }
    return s ? s : UINT64_C(0x1234567887654321);
}

MemraEngine *tu_engine(MemraBackend backend)
{
    MemraEngineOptions opt;
    cr_assert_eq(memra_engine_options_init(&opt), MEMRA_STATUS_OK);
    opt.backend = backend;
    opt.flags = MEMRA_ENGINE_FLAG_IGNORE_ENV;
    MemraEngine *e = NULL;
    MemraStatus st = memra_engine_create(&opt, &e);
    if (backend == MEMRA_BACKEND_CUDA && st == MEMRA_STATUS_NO_DEVICE)
        cr_skip_test("no usable CUDA device: %s", memra_last_error_message());
    cr_assert_eq(st, MEMRA_STATUS_OK, "memra_engine_create: %s", memra_last_error_message());
    return e;
}

MemraSliceMutF32 tu_upload(MemraEngine *e, const float *host, size_t len)
{
    MemraSliceMutF32 s;
    MemraSliceF32 src = {host, len};
    cr_assert_eq(memra_htod_f32(e, src, &s), MEMRA_STATUS_OK, "memra_htod_f32: %s",
                 memra_last_error_message());
    return s;
}

MemraSliceMutU64 tu_upload_u64(MemraEngine *e, const uint64_t *host, size_t len)
{
    MemraSliceMutU64 s;
    MemraSliceU64 src = {host, len};
    cr_assert_eq(memra_htod_u64(e, src, &s), MEMRA_STATUS_OK, "memra_htod_u64: %s",
                 memra_last_error_message());
    return s;
}

void tu_poison(MemraEngine *e, MemraSliceMutF32 s)
{
    uint32_t *h = malloc(s.len * sizeof *h);
    cr_assert_not_null(h);
    for (size_t i = 0; i < s.len; i++)
        h[i] = TU_POISON_BITS;
    MemraSliceF32 src = {(const float *)(const void *)h, s.len};
    cr_assert_eq(memra_htod_f32_into(e, src, s), MEMRA_STATUS_OK, "poison: %s",
                 memra_last_error_message());
    free(h);
}

MemraSliceMutF32 tu_poisoned(MemraEngine *e, size_t len)
{
    MemraSliceMutF32 s;
    cr_assert_eq(memra_alloc_f32(e, len, MEMRA_ALLOC_INIT_UNINIT, &s), MEMRA_STATUS_OK,
                 "memra_alloc_f32: %s", memra_last_error_message());
    tu_poison(e, s);
    return s;
}

float *tu_download(MemraEngine *e, MemraSliceMutF32 s)
{
    float *h = malloc(s.len * sizeof *h);
    cr_assert_not_null(h);
    MemraSliceMutF32 dst = {h, s.len};
    cr_assert_eq(memra_dtoh_f32(e, tu_view(s), dst), MEMRA_STATUS_OK, "memra_dtoh_f32: %s",
                 memra_last_error_message());
    return h;
}

MemraSliceF32 tu_view(MemraSliceMutF32 s)
{
    MemraSliceF32 v = {s.ptr, s.len};
    return v;
}

MemraSliceF32 tu_sub(MemraSliceMutF32 s, size_t start, size_t len)
{
    cr_assert(start + len <= s.len);
    MemraSliceF32 v = {s.ptr + start, len};
    return v;
}

MemraSliceMutF32 tu_sub_mut(MemraSliceMutF32 s, size_t start, size_t len)
{
    cr_assert(start + len <= s.len);
    MemraSliceMutF32 v = {s.ptr + start, len};
    return v;
}

MemraSliceU64 tu_view_u64(MemraSliceMutU64 s)
{
    MemraSliceU64 v = {s.ptr, s.len};
    return v;
}

MemraSliceU64 tu_sub_u64(MemraSliceMutU64 s, size_t start, size_t len)
{
    cr_assert(start + len <= s.len);
    MemraSliceU64 v = {s.ptr + start, len};
    return v;
}

size_t tu_bit_diffs(const float *a, const float *b, size_t len)
{
    /* The common, passing case in one pass; count word by word only when something differs. */
    if (len == 0 || memcmp(a, b, len * sizeof(float)) == 0)
        return 0;
    size_t d = 0;
    for (size_t i = 0; i < len; i++)
        d += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return d;
}

bool tu_all_finite(const float *a, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (!isfinite(a[i]))
            return false;
    return true;
}

double tu_rel_err(const float *a, const double *ref, size_t len)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < len; i++) {
        double d = (double)a[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    if (!isfinite(num))
        return INFINITY;
    return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

double tu_rel_err_f32(const float *a, const float *ref, size_t len)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < len; i++) {
        double d = (double)a[i] - (double)ref[i];
        num += d * d;
        den += (double)ref[i] * (double)ref[i];
    }
    if (!isfinite(num))
        return INFINITY;
    return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

uint64_t tu_mix_seed(uint64_t base, uint64_t stream)
{
    uint64_t z = base + (stream + 1) * UINT64_C(0x9E3779B97F4A7C15);
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

uint64_t tu_addr(MemraSliceMutF32 s)
{
    return (uint64_t)(uintptr_t)s.ptr;
}

MemraSliceMutF32 tu_zeros(MemraEngine *e, size_t len)
{
    MemraSliceMutF32 s;
    cr_assert_eq(memra_alloc_f32(e, len, MEMRA_ALLOC_INIT_ZEROED, &s), MEMRA_STATUS_OK,
                 "memra_alloc_f32: %s", memra_last_error_message());
    return s;
}

void tu_free(MemraEngine *e, void *ptr)
{
    cr_assert_eq(memra_free(e, ptr), MEMRA_STATUS_OK, "memra_free: %s", memra_last_error_message());
}

void tu_download_into(MemraEngine *e, MemraSliceF32 src, float *dst)
{
    MemraSliceMutF32 d = {dst, src.len};
    cr_assert_eq(memra_dtoh_f32(e, src, d), MEMRA_STATUS_OK, "memra_dtoh_f32: %s",
                 memra_last_error_message());
}
