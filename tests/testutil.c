#include "testutil.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Formats the printf-style `what` and the arguments after it into the array `buf`. */
#define TU_FORMAT_WHAT(buf, what)                                                                  \
    do {                                                                                           \
        va_list ap_;                                                                               \
        va_start(ap_, what);                                                                       \
        vsnprintf(buf, sizeof buf, what, ap_);                                                     \
        va_end(ap_);                                                                               \
    } while (0)

/* A broken contract of a support helper fails the running test, wherever it was called from. */
static void tu_fail_test(const char *message)
{
    cr_assert_fail("%s", message);
}

__attribute__((constructor)) static void tu_install_fail_handler(void)
{
    tu_set_fail_handler(tu_fail_test);
}

/* Fails the test unless a library call returned OK, naming `what` and the library's message. */
static void tu_check(MemraStatus st, const char *what)
{
    cr_assert_eq(st, MEMRA_STATUS_OK, "%s: %s", what, memra_last_error_message());
}

MemraEngine *tu_engine(MemraBackend backend)
{
    return tu_engine_at(backend, 0);
}

MemraEngine *tu_engine_at(MemraBackend backend, int32_t ordinal)
{
    MemraEngine *e = NULL;
    MemraStatus st = tu_engine_try(backend, ordinal, &e);
    if (backend == MEMRA_BACKEND_CUDA && st == MEMRA_STATUS_NO_DEVICE)
        cr_skip_test("no usable CUDA device at ordinal %" PRId32 ": %s", ordinal,
                     memra_last_error_message());
    tu_check(st, "memra_engine_create");
    return e;
}

MemraSliceMutF32 tu_upload(MemraEngine *e, const float *host, size_t len)
{
    MemraSliceMutF32 s;
    MemraSliceF32 src = {host, len};
    tu_check(memra_htod_f32(e, src, &s), "memra_htod_f32");
    return s;
}

MemraSliceMutU64 tu_upload_u64(MemraEngine *e, const uint64_t *host, size_t len)
{
    MemraSliceMutU64 s;
    MemraSliceU64 src = {host, len};
    tu_check(memra_htod_u64(e, src, &s), "memra_htod_u64");
    return s;
}

MemraSliceMutF32 tu_upload_varied(MemraEngine *e, size_t len, uint64_t seed, float spread)
{
    float *h = tu_host_array(len);
    tu_varied(h, len, seed, spread);
    MemraSliceMutF32 s = tu_upload(e, h, len);
    free(h);
    return s;
}

void tu_poison(MemraEngine *e, MemraSliceMutF32 s)
{
    uint32_t *h = malloc(s.len * sizeof *h);
    cr_assert_not_null(h);
    for (size_t i = 0; i < s.len; i++)
        h[i] = TU_POISON_BITS;
    MemraSliceF32 src = {(const float *)(const void *)h, s.len};
    tu_check(memra_htod_f32_into(e, src, s), "poison");
    free(h);
}

MemraSliceMutF32 tu_poisoned(MemraEngine *e, size_t len)
{
    MemraSliceMutF32 s;
    tu_check(memra_alloc_f32(e, len, MEMRA_ALLOC_INIT_UNINIT, &s), "memra_alloc_f32");
    tu_poison(e, s);
    return s;
}

float *tu_download(MemraEngine *e, MemraSliceMutF32 s)
{
    float *h = malloc(s.len * sizeof *h);
    cr_assert_not_null(h);
    MemraSliceMutF32 dst = {h, s.len};
    tu_check(memra_dtoh_f32(e, tu_view(s), dst), "memra_dtoh_f32");
    return h;
}

MemraSliceMutF32 tu_zeros(MemraEngine *e, size_t len)
{
    MemraSliceMutF32 s;
    tu_check(memra_alloc_f32(e, len, MEMRA_ALLOC_INIT_ZEROED, &s), "memra_alloc_f32");
    return s;
}

void tu_free(MemraEngine *e, void *ptr)
{
    tu_check(memra_free(e, ptr), "memra_free");
}

void tu_download_into(MemraEngine *e, MemraSliceF32 src, float *dst)
{
    MemraSliceMutF32 d = {dst, src.len};
    tu_check(memra_dtoh_f32(e, src, d), "memra_dtoh_f32");
}

void tu_write(MemraEngine *e, const float *host, size_t len, MemraSliceMutF32 dst)
{
    MemraSliceF32 src = {host, len};
    tu_check(memra_htod_f32_into(e, src, dst), "memra_htod_f32_into");
}

void tu_write_u32(MemraEngine *e, const uint32_t *host, size_t len, MemraSliceMutU32 dst)
{
    MemraSliceU32 src = {host, len};
    tu_check(memra_htod_u32_into(e, src, dst), "memra_htod_u32_into");
}

void tu_write_u64(MemraEngine *e, const uint64_t *host, size_t len, MemraSliceMutU64 dst)
{
    MemraSliceU64 src = {host, len};
    tu_check(memra_htod_u64_into(e, src, dst), "memra_htod_u64_into");
}

/* Both expectations are tu_check_items of one item, the check the bench runs too. */
static void tu_expect_item(const tu_check_item *item)
{
    char why[1024];
    if (!tu_check_items(item, 1, "bit identity", "the reference", why, sizeof why, NULL))
        cr_assert_fail("%s", why);
}

void tu_expect_bits(const float *got, const float *ref, size_t len, const char *what, ...)
{
    char buf[768];
    TU_FORMAT_WHAT(buf, what);
    const tu_check_item item = {buf, ref, got, len, true};
    tu_expect_item(&item);
}

void tu_expect_poison(const float *got, size_t len, const char *what, ...)
{
    char buf[768];
    TU_FORMAT_WHAT(buf, what);
    const tu_check_item item = {buf, NULL, got, len, false};
    tu_expect_item(&item);
}

void tu_gdn_weights(const tu_gdn_shape *sh, uint64_t seed, float *w, float *dt_bias, float *a)
{
    tu_varied(w, sh->conv_dim * sh->d_conv, tu_mix_seed(seed, 1), 0.5f);
    tu_varied(dt_bias, sh->num_v, tu_mix_seed(seed, 2), 0.5f);
    tu_varied(a, sh->num_v, tu_mix_seed(seed, 3), 1.0f);
    for (size_t h = 0; h < sh->num_v; h++)
        a[h] = -0.05f - fabsf(a[h]);
}

void tu_gdn_rows(const tu_gdn_shape *sh, size_t rows, uint64_t seed, float *qkv, float *beta_raw,
                 float *alpha)
{
    tu_varied(qkv, rows * sh->conv_dim, tu_mix_seed(seed, 1), 1.0f);
    tu_varied(beta_raw, rows * sh->num_v, tu_mix_seed(seed, 2), 2.0f);
    tu_varied(alpha, rows * sh->num_v, tu_mix_seed(seed, 3), 2.0f);
}

void tu_gdn_sequence(const tu_gdn_shape *sh, uint64_t seed, float *ring, float *state)
{
    tu_varied(ring, sh->ring_words, tu_mix_seed(seed, 1), 1.0f);
    tu_varied(state, sh->state_words, tu_mix_seed(seed, 2), 0.3f);
}

size_t tu_tiled_head(size_t num_k, size_t num_v, size_t vh)
{
    const size_t group = num_v / num_k;
    return (vh % group) * num_k + vh / group;
}

void tu_to_tiled(float *dst, const float *src, size_t rows, size_t row_words, size_t offset,
                 size_t block, size_t num_k, size_t num_v)
{
    cr_assert(offset + num_v * block <= row_words, "tu_to_tiled: the head blocks leave the row");
    for (size_t r = 0; r < rows; r++) {
        const float *s = src + r * row_words;
        float *d = dst + r * row_words;
        memcpy(d, s, row_words * sizeof *d);
        for (size_t vh = 0; vh < num_v; vh++)
            memcpy(d + offset + tu_tiled_head(num_k, num_v, vh) * block, s + offset + vh * block,
                   block * sizeof *d);
    }
}

/* ---- A whole verify ---- */

const char *const tu_gdn_tensor_name[TU_GDN_N_TENSORS] = {
    "conv_outs",
    "q_l2",
    "k_l2",
    "v_g",
    "beta",
    "g_log",
    "o",
    "conv snapshots",
    "state snapshots",
    "final ring",
    "canonical state",
    "alternate state",
};

size_t tu_gdn_tensor_len(const tu_gdn_shape *sh, size_t t, size_t b, int tensor)
{
    const size_t rows = b * t, snaps = t >= 1 ? b * (t - 1) : 0;
    switch (tensor) {
    case TU_GDN_CONV_OUTS:
        return rows * sh->conv_dim;
    case TU_GDN_Q_L2:
    case TU_GDN_K_L2:
    case TU_GDN_V_G:
    case TU_GDN_O:
        return rows * sh->value_dim;
    case TU_GDN_BETA:
    case TU_GDN_G_LOG:
        return rows * sh->num_v;
    case TU_GDN_SNAP_CONV:
        return snaps * sh->ring_words;
    case TU_GDN_SNAP_SSM:
        return snaps * sh->state_words;
    case TU_GDN_RING:
        return b * sh->ring_words;
    case TU_GDN_CANONICAL:
    case TU_GDN_ALTERNATE:
        return b * sh->state_words;
    }
    cr_assert_fail("tu_gdn_tensor_len: unknown tensor %d", tensor);
    return 0;
}

float *tu_host_array(size_t words)
{
    float *p = malloc((words ? words : 1) * sizeof *p);
    cr_assert_not_null(p);
    return p;
}

void tu_gdn_inputs_alloc(const tu_gdn_shape *sh, size_t t, size_t b, tu_gdn_inputs *in)
{
    in->w = tu_host_array(sh->conv_dim * sh->d_conv);
    in->dt_bias = tu_host_array(sh->num_v);
    in->a = tu_host_array(sh->num_v);
    in->ring0 = tu_host_array(b * sh->ring_words);
    in->state0 = tu_host_array(b * sh->state_words);
    in->alt0 = tu_host_array(b * sh->state_words);
    in->qkv = tu_host_array(b * t * sh->conv_dim);
    in->beta_raw = tu_host_array(b * t * sh->num_v);
    in->alpha = tu_host_array(b * t * sh->num_v);
}

void tu_gdn_inputs_make(const tu_gdn_shape *sh, size_t t, size_t b, uint64_t seed,
                        tu_gdn_inputs *in)
{
    tu_gdn_inputs_alloc(sh, t, b, in);
    tu_gdn_weights(sh, tu_mix_seed(seed, 0), in->w, in->dt_bias, in->a);
    tu_gdn_rows(sh, b * t, tu_mix_seed(seed, 1), in->qkv, in->beta_raw, in->alpha);
    for (size_t s = 0; s < b; s++) {
        tu_gdn_sequence(sh, tu_mix_seed(seed, 100 + s), in->ring0 + s * sh->ring_words,
                        in->state0 + s * sh->state_words);
        tu_varied(in->alt0 + s * sh->state_words, sh->state_words, tu_mix_seed(seed, 200 + s),
                  0.3f);
    }
}

void tu_gdn_inputs_free(tu_gdn_inputs *in)
{
    TU_FREE_HOST(in->w, in->dt_bias, in->a, in->ring0, in->state0, in->alt0, in->qkv, in->beta_raw,
                 in->alpha);
}

void tu_gdn_outputs_make(const tu_gdn_shape *sh, size_t t, size_t b, tu_gdn_outputs *out)
{
    const uint32_t poison = TU_POISON_BITS;
    for (int i = 0; i < TU_GDN_N_TENSORS; i++) {
        out->len[i] = tu_gdn_tensor_len(sh, t, b, i);
        out->t[i] = tu_host_array(out->len[i]);
        for (size_t j = 0; j < out->len[i]; j++)
            memcpy(&out->t[i][j], &poison, sizeof poison);
    }
}

void tu_gdn_outputs_free(tu_gdn_outputs *out)
{
    for (int i = 0; i < TU_GDN_N_TENSORS; i++)
        free(out->t[i]);
}

void tu_gdn_expect_outputs(const tu_gdn_outputs *got, const tu_gdn_outputs *ref, const char *what)
{
    for (int i = 0; i < TU_GDN_N_TENSORS; i++) {
        cr_assert_eq(got->len[i], ref->len[i], "%s: %s has %zu words, the reference %zu", what,
                     tu_gdn_tensor_name[i], got->len[i], ref->len[i]);
        cr_assert(tu_all_finite(ref->t[i], ref->len[i]), "%s: the reference %s is not finite", what,
                  tu_gdn_tensor_name[i]);
        tu_expect_bits(got->t[i], ref->t[i], ref->len[i], "%s: %s", what, tu_gdn_tensor_name[i]);
    }
}

static MemraSliceMutF32 tu_view_or_none(MemraSliceMutF32 s, size_t len)
{
    const MemraSliceMutF32 none = {NULL, 0};
    return len ? tu_sub_mut(s, 0, len) : none;
}

void tu_gdn_upload(MemraEngine *e, const tu_gdn_shape *sh, size_t t, size_t b,
                   const tu_gdn_inputs *in, tu_gdn_device *d)
{
    const size_t cd = sh->conv_dim, nv = sh->num_v;
    d->w = tu_upload(e, in->w, cd * sh->d_conv);
    d->dt_bias = tu_upload(e, in->dt_bias, nv);
    d->a = tu_upload(e, in->a, nv);
    d->qkv = tu_upload(e, in->qkv, b * t * cd);
    d->beta_raw = tu_upload(e, in->beta_raw, b * t * nv);
    d->alpha = tu_upload(e, in->alpha, b * t * nv);
}

void tu_gdn_device_free(MemraEngine *e, const tu_gdn_device *d)
{
    const MemraSliceMutF32 bufs[] = {d->w, d->dt_bias, d->a, d->qkv, d->beta_raw, d->alpha};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        tu_free(e, bufs[i].ptr);
}

void tu_gdn_args_init(MemraVerifyArgs *v, const tu_gdn_shape *sh, size_t t, size_t b,
                      MemraVerifyMode mode, MemraHeadOrder order, const tu_gdn_device *d)
{
    TU_OK(tu_verify_args_sizes(v, sh, t, b, mode, order));
    v->qkv = tu_view(d->qkv);
    v->w = tu_view(d->w);
    v->beta_raw = tu_view(d->beta_raw);
    v->alpha = tu_view(d->alpha);
    v->dt_bias = tu_view(d->dt_bias);
    v->a = tu_view(d->a);
}

void tu_gdn_views(MemraVerifyArgs *v, MemraSliceMutF32 *views[TU_GDN_N_VIEWS])
{
    MemraSliceMutF32 *const all[TU_GDN_N_VIEWS] = {
        &v->conv_outs, &v->q_l2, &v->k_l2,      &v->v_g,      &v->beta,
        &v->g_log,     &v->o,    &v->snap_conv, &v->snap_ssm,
    };
    memcpy(views, all, sizeof all);
}

void tu_gdn_bind(MemraEngine *e, const tu_gdn_shape *sh, size_t t, size_t b, MemraHeadOrder order,
                 const tu_gdn_inputs *in, tu_gdn_bound *bd)
{
    cr_assert(t >= 1 && b >= 1, "tu_gdn_bind: t and b must be at least 1");
    bd->e = e;
    bd->sh = *sh;
    bd->t = t;
    bd->b = b;
    tu_gdn_upload(e, sh, t, b, in, &bd->in);
    for (int i = 0; i < TU_GDN_N_VIEWS; i++) {
        const size_t len = tu_gdn_tensor_len(sh, t, b, i);
        bd->out[i] = tu_poisoned(e, len ? len : 1);
    }
    bd->ring = malloc(3 * b * sizeof *bd->ring);
    cr_assert_not_null(bd->ring);
    bd->canonical = bd->ring + b;
    bd->alternate = bd->ring + 2 * b;
    uint64_t *host = malloc(3 * b * sizeof *host);
    cr_assert_not_null(host);
    for (size_t s = 0; s < b; s++) {
        /* A ring of d_conv = 1 holds no word; the table still needs a buffer to point at. */
        bd->ring[s] = sh->ring_words ? tu_upload(e, in->ring0 + s * sh->ring_words, sh->ring_words)
                                     : tu_poisoned(e, 1);
        bd->canonical[s] = tu_upload(e, in->state0 + s * sh->state_words, sh->state_words);
        bd->alternate[s] = tu_upload(e, in->alt0 + s * sh->state_words, sh->state_words);
        host[3 * s + 0] = tu_addr(bd->ring[s]);
        host[3 * s + 1] = tu_addr(bd->canonical[s]);
        host[3 * s + 2] = tu_addr(bd->alternate[s]);
    }
    bd->table = tu_upload_u64(e, host, 3 * b);
    free(host);

    tu_gdn_args_init(&bd->args, sh, t, b, MEMRA_VERIFY_MODE_SNAPSHOTS, order, &bd->in);
    bd->args.table = tu_view_u64(bd->table);
    MemraSliceMutF32 *views[TU_GDN_N_VIEWS];
    tu_gdn_views(&bd->args, views);
    for (int i = 0; i < TU_GDN_N_VIEWS; i++)
        *views[i] = tu_view_or_none(bd->out[i], tu_gdn_tensor_len(sh, t, b, i));
}

void tu_gdn_rebind_inputs(tu_gdn_bound *bd, const tu_gdn_inputs *in)
{
    const tu_gdn_shape *sh = &bd->sh;
    for (size_t s = 0; s < bd->b; s++) {
        if (sh->ring_words)
            tu_write(bd->e, in->ring0 + s * sh->ring_words, sh->ring_words, bd->ring[s]);
        tu_write(bd->e, in->state0 + s * sh->state_words, sh->state_words, bd->canonical[s]);
        tu_write(bd->e, in->alt0 + s * sh->state_words, sh->state_words, bd->alternate[s]);
    }
    for (int i = 0; i < TU_GDN_N_VIEWS; i++)
        tu_poison(bd->e, bd->out[i]);
}

void tu_gdn_collect(tu_gdn_bound *bd, tu_gdn_outputs *out)
{
    const tu_gdn_shape *sh = &bd->sh;
    for (int i = 0; i < TU_GDN_N_VIEWS; i++)
        if (out->len[i])
            tu_download_into(bd->e, tu_sub(bd->out[i], 0, out->len[i]), out->t[i]);
    for (size_t s = 0; s < bd->b; s++) {
        if (sh->ring_words)
            tu_download_into(bd->e, tu_view(bd->ring[s]), out->t[TU_GDN_RING] + s * sh->ring_words);
        tu_download_into(bd->e, tu_view(bd->canonical[s]),
                         out->t[TU_GDN_CANONICAL] + s * sh->state_words);
        tu_download_into(bd->e, tu_view(bd->alternate[s]),
                         out->t[TU_GDN_ALTERNATE] + s * sh->state_words);
    }
}

void tu_gdn_unbind(tu_gdn_bound *bd)
{
    tu_gdn_device_free(bd->e, &bd->in);
    for (int i = 0; i < TU_GDN_N_VIEWS; i++)
        tu_free(bd->e, bd->out[i].ptr);
    for (size_t s = 0; s < 3 * bd->b; s++)
        tu_free(bd->e, bd->ring[s].ptr);
    tu_free(bd->e, bd->table.ptr);
    free(bd->ring);
}

MemraStatus tu_gdn_program_step(MemraEngine *e, void *bound)
{
    const tu_gdn_bound *bd = bound;
    return tu_packed_program(e, &bd->args, NULL);
}

MemraStatus tu_gdn_verify_step(MemraEngine *e, void *bound)
{
    const tu_gdn_bound *bd = bound;
    return memra_gdn_verify(e, &bd->args);
}

MemraStatus tu_counted_step(MemraEngine *e, void *counted)
{
    tu_counted *c = counted;
    c->calls++;
    return c->step(e, c->user);
}
