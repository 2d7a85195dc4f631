/*
 * The library against an independent float64 evaluation of the Gated DeltaNet decode math
 * (docs/arithmetic.md, rule 3: every backend within a relative error of 1e-5 per tensor).
 *
 * The evaluation below is written from the equations, not from the kernels: the causal conv is
 * a sliding dot product over each channel's history (ring followed by the new rows), the L2
 * norms and the recurrent update are plain double sums in the natural [head][row i][column c]
 * orientation of the state matrix, and nothing reproduces the GPU's lane order. It is compared
 * with the packed ops (B sequences x T rows, with snapshots) and with the per-row ops chained
 * over T rows for b_n independent sequences, both with the state updated in place (in == out)
 * and ping-ponged between two buffers. Shapes cover GQA ratios num_v / num_k of 1 and 4 besides
 * the suite's two, d_conv of 2, 4 and 8, T up to 8 and B up to 3, all on fresh random inputs.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memra.h"
#include "testutil.h"

#define RF_S MEMRA_D_STATE
#define RF_EPS 1e-6f
#define RF_TOL 1e-5
#define RF_B_MAX 3

typedef struct rf_param {
    size_t num_k, num_v, d_conv, t, b;
} rf_param;

typedef struct rf_dims {
    size_t num_k, num_v, d_conv, t, b;
    size_t key_dim, value_dim, conv_dim, pad, ring_words, state_words;
    float scale;
} rf_dims;

/* Every tensor the library produces, in the layouts of memra.h ([B, T, ...], snapshots
 * [B, T-1, ...], states transposed). */
enum rf_tensor {
    RF_CONV_OUT,
    RF_Q,
    RF_K,
    RF_V,
    RF_BETA,
    RF_G_LOG,
    RF_O,
    RF_STATE,
    RF_RING,
    RF_SNAP_CONV,
    RF_SNAP_STATE,
    RF_N_TENSORS
};

/* Names in failure messages: the first seven tensors are tests/testutil.h's first seven. */
static const char *rf_name(int tensor)
{
    static const char *const rest[] = {"final state", "final conv ring", "conv snapshots",
                                       "state snapshots"};
    return tensor < RF_STATE ? tu_gdn_tensor_name[tensor] : rest[tensor - RF_STATE];
}

typedef struct rf_host {
    float *w, *dt_bias, *a;
    float *ring0, *state0, *qkv, *beta_raw, *alpha;
} rf_host;

typedef struct rf_expect {
    double *t[RF_N_TENSORS];
    size_t len[RF_N_TENSORS];
} rf_expect;

typedef struct rf_got {
    float *t[RF_N_TENSORS];
} rf_got;

static rf_dims rf_make_dims(const rf_param *p)
{
    rf_dims d;
    d.num_k = p->num_k;
    d.num_v = p->num_v;
    d.d_conv = p->d_conv;
    d.t = p->t;
    d.b = p->b;
    d.key_dim = RF_S * p->num_k;
    d.value_dim = RF_S * p->num_v;
    d.conv_dim = 2 * d.key_dim + d.value_dim;
    d.pad = p->d_conv - 1;
    d.ring_words = d.conv_dim * d.pad;
    d.state_words = (size_t)RF_S * RF_S * p->num_v;
    d.scale = 1.0f / sqrtf((float)RF_S);
    return d;
}

static void *rf_alloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    cr_assert_not_null(p);
    return p;
}

static void rf_host_make(const rf_dims *d, uint64_t seed, rf_host *h)
{
    const size_t b = d->b, t = d->t;
    h->w = rf_alloc(d->conv_dim * d->d_conv * sizeof(float));
    h->dt_bias = rf_alloc(d->num_v * sizeof(float));
    h->a = rf_alloc(d->num_v * sizeof(float));
    h->ring0 = rf_alloc(b * d->ring_words * sizeof(float));
    h->state0 = rf_alloc(b * d->state_words * sizeof(float));
    h->qkv = rf_alloc(b * t * d->conv_dim * sizeof(float));
    h->beta_raw = rf_alloc(b * t * d->num_v * sizeof(float));
    h->alpha = rf_alloc(b * t * d->num_v * sizeof(float));
    /* The seed's spreads. */
    tu_varied(h->w, d->conv_dim * d->d_conv, tu_mix_seed(seed, 0), 0.5f);
    tu_varied(h->dt_bias, d->num_v, tu_mix_seed(seed, 1), 0.5f);
    tu_varied(h->a, d->num_v, tu_mix_seed(seed, 2), 1.0f);
    tu_varied(h->ring0, b * d->ring_words, tu_mix_seed(seed, 3), 1.0f);
    tu_varied(h->state0, b * d->state_words, tu_mix_seed(seed, 4), 0.3f);
    tu_varied(h->qkv, b * t * d->conv_dim, tu_mix_seed(seed, 5), 1.0f);
    tu_varied(h->beta_raw, b * t * d->num_v, tu_mix_seed(seed, 6), 2.0f);
    tu_varied(h->alpha, b * t * d->num_v, tu_mix_seed(seed, 7), 2.0f);
}

static void rf_host_free(rf_host *h)
{
    TU_FREE_HOST(h->w, h->dt_bias, h->a, h->ring0, h->state0, h->qkv, h->beta_raw, h->alpha);
}

static void rf_lengths(const rf_dims *d, size_t len[RF_N_TENSORS])
{
    const size_t rows = d->b * d->t;
    len[RF_CONV_OUT] = rows * d->conv_dim;
    len[RF_Q] = len[RF_K] = len[RF_V] = len[RF_O] = rows * d->value_dim;
    len[RF_BETA] = len[RF_G_LOG] = rows * d->num_v;
    len[RF_STATE] = d->b * d->state_words;
    len[RF_RING] = d->b * d->ring_words;
    len[RF_SNAP_CONV] = d->b * (d->t - 1) * d->ring_words;
    len[RF_SNAP_STATE] = d->b * (d->t - 1) * d->state_words;
}

static double rf_silu(double x)
{
    return x / (1.0 + exp(-x));
}

static double rf_softplus(double x)
{
    /* log(1 + e^x) without overflow for large x. */
    return x > 0.0 ? x + log1p(exp(-x)) : log1p(exp(x));
}

/*
 * The float64 evaluation of T rows of B sequences, from the equations:
 *   conv:  y_r[c] = silu(sum_j w[c][j] * h_c[r + j]), h_c = ring_c followed by the rows' x[c]
 *   prep:  q = q_raw / sqrt(|q_raw|^2 + eps), k likewise (value head vh uses key head
 *          vh % num_k), beta = sigmoid(beta_raw), g = a * softplus(alpha + dt_bias)
 *   scan:  with M the head's state matrix (M[i][c], i along k, c along v) and d = exp(g):
 *          u = M^T k;  M <- d M + k (beta (v - d u))^T;  o = scale M^T q
 */
static void rf_evaluate(const rf_dims *d, const rf_host *h, rf_expect *x)
{
    const size_t t = d->t, cd = d->conv_dim, nv = d->num_v, pad = d->pad, S = RF_S;
    rf_lengths(d, x->len);
    for (int i = 0; i < RF_N_TENSORS; i++)
        x->t[i] = rf_alloc(x->len[i] * sizeof(double));

    double *hist = rf_alloc((pad + t) * sizeof(double));
    double *m = rf_alloc(S * S * sizeof(double));
    double *u = rf_alloc(S * sizeof(double));

    for (size_t s = 0; s < d->b; s++) {
        /* Conv, channel by channel over its whole history. */
        for (size_t c = 0; c < cd; c++) {
            for (size_t j = 0; j < pad; j++)
                hist[j] = h->ring0[s * d->ring_words + c * pad + j];
            for (size_t r = 0; r < t; r++)
                hist[pad + r] = h->qkv[(s * t + r) * cd + c];
            for (size_t r = 0; r < t; r++) {
                double y = 0.0;
                for (size_t j = 0; j < d->d_conv; j++)
                    y += (double)h->w[c * d->d_conv + j] * hist[r + j];
                x->t[RF_CONV_OUT][(s * t + r) * cd + c] = rf_silu(y);
                /* After row r the ring holds the pad most recent columns h[r+1 .. r+pad]. */
                double *dst = r + 1 < t ? x->t[RF_SNAP_CONV] + (s * (t - 1) + r) * d->ring_words
                                        : x->t[RF_RING] + s * d->ring_words;
                for (size_t j = 0; j < pad; j++)
                    dst[c * pad + j] = hist[r + 1 + j];
            }
        }

        /* Prep, row by row and value head by value head. */
        for (size_t r = 0; r < t; r++) {
            const size_t row = s * t + r;
            const double *y = x->t[RF_CONV_OUT] + row * cd;
            for (size_t vh = 0; vh < nv; vh++) {
                const size_t kh = vh % d->num_k;
                const double *qr = y + kh * S;
                const double *kr = y + d->key_dim + kh * S;
                double qq = 0.0, kk = 0.0;
                for (size_t i = 0; i < S; i++) {
                    qq += qr[i] * qr[i];
                    kk += kr[i] * kr[i];
                }
                const double qn = sqrt(qq + (double)RF_EPS), kn = sqrt(kk + (double)RF_EPS);
                const size_t at = (row * nv + vh) * S;
                for (size_t i = 0; i < S; i++) {
                    x->t[RF_Q][at + i] = qr[i] / qn;
                    x->t[RF_K][at + i] = kr[i] / kn;
                    x->t[RF_V][at + i] = y[2 * d->key_dim + vh * S + i];
                }
                x->t[RF_BETA][row * nv + vh] =
                    1.0 / (1.0 + exp(-(double)h->beta_raw[row * nv + vh]));
                x->t[RF_G_LOG][row * nv + vh] =
                    (double)h->a[vh] *
                    rf_softplus((double)h->alpha[row * nv + vh] + (double)h->dt_bias[vh]);
            }
        }

        /* Scan, head by head; the state matrix is M[i][c] here and transposed in memory. */
        for (size_t hd = 0; hd < nv; hd++) {
            const float *st0 = h->state0 + s * d->state_words + hd * S * S;
            for (size_t i = 0; i < S; i++)
                for (size_t c = 0; c < S; c++)
                    m[i * S + c] = st0[c * S + i];
            for (size_t r = 0; r < t; r++) {
                const size_t row = s * t + r;
                const size_t at = (row * nv + hd) * S;
                const double *q = x->t[RF_Q] + at, *k = x->t[RF_K] + at, *v = x->t[RF_V] + at;
                const double decay = exp(x->t[RF_G_LOG][row * nv + hd]);
                const double beta = x->t[RF_BETA][row * nv + hd];
                for (size_t c = 0; c < S; c++) {
                    u[c] = 0.0;
                    for (size_t i = 0; i < S; i++)
                        u[c] += m[i * S + c] * k[i];
                }
                for (size_t i = 0; i < S; i++)
                    for (size_t c = 0; c < S; c++)
                        m[i * S + c] = decay * m[i * S + c] + k[i] * beta * (v[c] - decay * u[c]);
                for (size_t c = 0; c < S; c++) {
                    double oc = 0.0;
                    for (size_t i = 0; i < S; i++)
                        oc += m[i * S + c] * q[i];
                    x->t[RF_O][at + c] = (double)d->scale * oc;
                }
                double *dst = r + 1 < t ? x->t[RF_SNAP_STATE] + (s * (t - 1) + r) * d->state_words
                                        : x->t[RF_STATE] + s * d->state_words;
                dst += hd * S * S;
                for (size_t i = 0; i < S; i++)
                    for (size_t c = 0; c < S; c++)
                        dst[c * S + i] = m[i * S + c];
            }
        }
    }
    free(hist);
    free(m);
    free(u);
}

static void rf_expect_free(rf_expect *x)
{
    for (int i = 0; i < RF_N_TENSORS; i++)
        free(x->t[i]);
}

static void rf_got_make(const rf_expect *x, rf_got *g)
{
    for (int i = 0; i < RF_N_TENSORS; i++)
        g->t[i] = rf_alloc(x->len[i] * sizeof(float));
}

static void rf_got_free(rf_got *g)
{
    for (int i = 0; i < RF_N_TENSORS; i++)
        free(g->t[i]);
}

static void rf_compare(const char *what, const rf_param *p, uint64_t seed, const rf_expect *x,
                       const rf_got *g)
{
    for (int i = 0; i < RF_N_TENSORS; i++) {
        if (x->len[i] == 0)
            continue;
        cr_assert(tu_all_finite(g->t[i], x->len[i]),
                  "%s (num_k=%zu num_v=%zu d_conv=%zu T=%zu B=%zu, " TU_SEED_FMT
                  "): %s is not finite",
                  what, p->num_k, p->num_v, p->d_conv, p->t, p->b, seed, rf_name(i));
        const double err = tu_rel_err(g->t[i], x->t[i], x->len[i]);
        cr_assert(err <= RF_TOL,
                  "%s (num_k=%zu num_v=%zu d_conv=%zu T=%zu B=%zu, " TU_SEED_FMT
                  "): %s is %.3g from the float64 evaluation (relative, limit %g)",
                  what, p->num_k, p->num_v, p->d_conv, p->t, p->b, seed, rf_name(i), err, RF_TOL);
    }
}

/* The packed ops: conv tloop, prep over B*T rows, scan tsnap, one call each. */
static void rf_run_packed(MemraEngine *e, const rf_dims *d, const rf_host *h, rf_got *g)
{
    const size_t b = d->b, t = d->t, rows = b * t, cd = d->conv_dim, vd = d->value_dim;
    const size_t nv = d->num_v, rw = d->ring_words, sw = d->state_words;
    const MemraSliceMutF32 none = {NULL, 0};

    MemraSliceMutF32 w = tu_upload(e, h->w, cd * d->d_conv);
    MemraSliceMutF32 dt_bias = tu_upload(e, h->dt_bias, nv);
    MemraSliceMutF32 a = tu_upload(e, h->a, nv);
    MemraSliceMutF32 qkv = tu_upload(e, h->qkv, rows * cd);
    MemraSliceMutF32 beta_raw = tu_upload(e, h->beta_raw, rows * nv);
    MemraSliceMutF32 alpha = tu_upload(e, h->alpha, rows * nv);

    MemraSliceMutF32 ring[RF_B_MAX], canonical[RF_B_MAX], alternate[RF_B_MAX];
    uint64_t host_table[3 * RF_B_MAX];
    for (size_t s = 0; s < b; s++) {
        ring[s] = tu_upload(e, h->ring0 + s * rw, rw);
        canonical[s] = tu_upload(e, h->state0 + s * sw, sw);
        alternate[s] = tu_poisoned(e, sw);
        host_table[3 * s] = tu_addr(ring[s]);
        host_table[3 * s + 1] = tu_addr(canonical[s]);
        host_table[3 * s + 2] = tu_addr(alternate[s]);
    }
    MemraSliceMutU64 table = tu_upload_u64(e, host_table, 3 * b);

    MemraSliceMutF32 conv_out = tu_poisoned(e, rows * cd);
    MemraSliceMutF32 q = tu_poisoned(e, rows * vd), k = tu_poisoned(e, rows * vd);
    MemraSliceMutF32 v = tu_poisoned(e, rows * vd), o = tu_poisoned(e, rows * vd);
    MemraSliceMutF32 beta = tu_poisoned(e, rows * nv), g_log = tu_poisoned(e, rows * nv);
    /* With T == 1 there are no snapshots to take: {NULL, 0}. */
    MemraSliceMutF32 snap_conv = t > 1 ? tu_poisoned(e, b * (t - 1) * rw) : none;
    MemraSliceMutF32 snap_state = t > 1 ? tu_poisoned(e, b * (t - 1) * sw) : none;

    TU_OK(memra_ssm_conv1d_fused_decode_tloop(e, tu_view(qkv), tu_view_u64(table), tu_view(w),
                                              conv_out, snap_conv, cd, d->d_conv, t, b));
    TU_OK(memra_gdn_prep_decode_b(e, tu_view(conv_out), tu_view(beta_raw), tu_view(alpha),
                                  tu_view(dt_bias), tu_view(a), q, k, v, beta, g_log, RF_S, nv,
                                  d->num_k, d->key_dim, RF_EPS, cd, rows));
    TU_OK(memra_gdn_scan_s128_tsnap(e, tu_view(q), tu_view(k), tu_view(v), tu_view(g_log),
                                    tu_view(beta), tu_view_u64(table), o, nv, t, b, d->scale,
                                    snap_state));

    tu_download_into(e, tu_view(conv_out), g->t[RF_CONV_OUT]);
    tu_download_into(e, tu_view(q), g->t[RF_Q]);
    tu_download_into(e, tu_view(k), g->t[RF_K]);
    tu_download_into(e, tu_view(v), g->t[RF_V]);
    tu_download_into(e, tu_view(beta), g->t[RF_BETA]);
    tu_download_into(e, tu_view(g_log), g->t[RF_G_LOG]);
    tu_download_into(e, tu_view(o), g->t[RF_O]);
    for (size_t s = 0; s < b; s++) {
        /* T odd: the final state is in the alternate buffer; T even: back in canonical. */
        tu_download_into(e, tu_view(t % 2 == 1 ? alternate[s] : canonical[s]),
                         g->t[RF_STATE] + s * sw);
        tu_download_into(e, tu_view(ring[s]), g->t[RF_RING] + s * rw);
    }
    if (t > 1) {
        tu_download_into(e, tu_view(snap_conv), g->t[RF_SNAP_CONV]);
        tu_download_into(e, tu_view(snap_state), g->t[RF_SNAP_STATE]);
    }
}

/* Gathers row r of every sequence of a [B, T, width] host array into [B, width]. */
static void rf_gather_row(const float *src, float *dst, size_t b, size_t t, size_t r, size_t width)
{
    for (size_t s = 0; s < b; s++)
        memcpy(dst + s * width, src + (s * t + r) * width, width * sizeof(float));
}

/* Scatters [B, width] back into row r of a [B, T, width] host array. */
static void rf_scatter_row(const float *src, float *dst, size_t b, size_t t, size_t r, size_t width)
{
    for (size_t s = 0; s < b; s++)
        memcpy(dst + (s * t + r) * width, src + s * width, width * sizeof(float));
}

/*
 * The per-row ops chained over T rows, b_n = B independent sequences per call. With `in_place`
 * each sequence's state is read and written in one buffer (in_ptrs == out_ptrs); otherwise the
 * state ping-pongs between two buffers through two pointer tables.
 */
static void rf_run_per_row(MemraEngine *e, const rf_dims *d, const rf_host *h, bool in_place,
                           rf_got *g)
{
    const size_t b = d->b, t = d->t, cd = d->conv_dim, vd = d->value_dim, nv = d->num_v;
    const size_t rw = d->ring_words, sw = d->state_words;

    MemraSliceMutF32 w = tu_upload(e, h->w, cd * d->d_conv);
    MemraSliceMutF32 dt_bias = tu_upload(e, h->dt_bias, nv);
    MemraSliceMutF32 a = tu_upload(e, h->a, nv);

    MemraSliceMutF32 ring[RF_B_MAX], state[2][RF_B_MAX];
    uint64_t rings[RF_B_MAX], pa[RF_B_MAX], pb[RF_B_MAX];
    for (size_t s = 0; s < b; s++) {
        ring[s] = tu_upload(e, h->ring0 + s * rw, rw);
        state[0][s] = tu_upload(e, h->state0 + s * sw, sw);
        state[1][s] = in_place ? state[0][s] : tu_poisoned(e, sw);
        rings[s] = tu_addr(ring[s]);
        pa[s] = tu_addr(state[0][s]);
        pb[s] = tu_addr(state[1][s]);
    }
    MemraSliceMutU64 ring_table = tu_upload_u64(e, rings, b);
    MemraSliceMutU64 table_a = tu_upload_u64(e, pa, b);
    MemraSliceMutU64 table_b = tu_upload_u64(e, pb, b);

    float *row_host = rf_alloc(b * cd * sizeof(float));
    float *out_host = rf_alloc(b * cd * sizeof(float));
    MemraSliceMutF32 qkv = tu_poisoned(e, b * cd);
    MemraSliceMutF32 beta_raw = tu_poisoned(e, b * nv), alpha = tu_poisoned(e, b * nv);
    MemraSliceMutF32 conv_out = tu_poisoned(e, b * cd);
    MemraSliceMutF32 q = tu_poisoned(e, b * vd), k = tu_poisoned(e, b * vd);
    MemraSliceMutF32 v = tu_poisoned(e, b * vd), o = tu_poisoned(e, b * vd);
    MemraSliceMutF32 beta = tu_poisoned(e, b * nv), g_log = tu_poisoned(e, b * nv);

    for (size_t r = 0; r < t; r++) {
        rf_gather_row(h->qkv, row_host, b, t, r, cd);
        TU_OK(memra_htod_f32_into(e, (MemraSliceF32){row_host, b * cd}, qkv));
        rf_gather_row(h->beta_raw, row_host, b, t, r, nv);
        TU_OK(memra_htod_f32_into(e, (MemraSliceF32){row_host, b * nv}, beta_raw));
        rf_gather_row(h->alpha, row_host, b, t, r, nv);
        TU_OK(memra_htod_f32_into(e, (MemraSliceF32){row_host, b * nv}, alpha));
        const MemraSliceMutF32 outs[] = {conv_out, q, k, v, o, beta, g_log};
        for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++)
            tu_poison(e, outs[i]);

        /* Out of place, even rows read buffer 0 and write buffer 1, odd rows the reverse. */
        MemraSliceMutU64 in = (r % 2 == 0 || in_place) ? table_a : table_b;
        MemraSliceMutU64 out = (r % 2 == 0 && !in_place) ? table_b : table_a;
        if (in_place)
            out = in;

        TU_OK(memra_ssm_conv1d_fused_decode_b_view(e, tu_view(qkv), tu_view_u64(ring_table),
                                                   tu_view(w), conv_out, cd, d->d_conv, b));
        TU_OK(memra_gdn_prep_decode_b_view(e, tu_view(conv_out), tu_view(beta_raw), tu_view(alpha),
                                           tu_view(dt_bias), tu_view(a), q, k, v, beta, g_log, RF_S,
                                           nv, d->num_k, d->key_dim, RF_EPS, cd, b));
        TU_OK(memra_gdn_scan_s128_batched_view(e, tu_view(q), tu_view(k), tu_view(v),
                                               tu_view(g_log), tu_view(beta), tu_view_u64(in),
                                               tu_view_u64(out), o, nv, b, d->scale));

        const struct {
            MemraSliceMutF32 buf;
            enum rf_tensor which;
            size_t width;
        } rows[] = {{conv_out, RF_CONV_OUT, cd},
                    {q, RF_Q, vd},
                    {k, RF_K, vd},
                    {v, RF_V, vd},
                    {o, RF_O, vd},
                    {beta, RF_BETA, nv},
                    {g_log, RF_G_LOG, nv}};
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
            tu_download_into(e, tu_view(rows[i].buf), out_host);
            rf_scatter_row(out_host, g->t[rows[i].which], b, t, r, rows[i].width);
        }

        /* The state this row wrote: buffer 1 after even rows out of place, else buffer 0. */
        const int written = (!in_place && r % 2 == 0) ? 1 : 0;
        for (size_t s = 0; s < b; s++) {
            float *ring_dst =
                r + 1 < t ? g->t[RF_SNAP_CONV] + (s * (t - 1) + r) * rw : g->t[RF_RING] + s * rw;
            float *state_dst =
                r + 1 < t ? g->t[RF_SNAP_STATE] + (s * (t - 1) + r) * sw : g->t[RF_STATE] + s * sw;
            tu_download_into(e, tu_view(ring[s]), ring_dst);
            tu_download_into(e, tu_view(state[written][s]), state_dst);
        }
    }
    free(row_host);
    free(out_host);
}

typedef void (*rf_runner)(MemraEngine *e, const rf_dims *d, const rf_host *h, rf_got *g);

static void rf_packed_runner(MemraEngine *e, const rf_dims *d, const rf_host *h, rf_got *g)
{
    rf_run_packed(e, d, h, g);
}

static void rf_in_place_runner(MemraEngine *e, const rf_dims *d, const rf_host *h, rf_got *g)
{
    rf_run_per_row(e, d, h, true, g);
}

static void rf_ping_pong_runner(MemraEngine *e, const rf_dims *d, const rf_host *h, rf_got *g)
{
    rf_run_per_row(e, d, h, false, g);
}

static void rf_check(const char *what, const rf_param *p, MemraBackend backend, rf_runner run)
{
    MemraEngine *e = tu_engine(backend);
    const uint64_t seed = tu_fresh_seed();
    const rf_dims d = rf_make_dims(p);
    rf_host h;
    rf_host_make(&d, seed, &h);
    rf_expect x;
    rf_evaluate(&d, &h, &x);
    rf_got g;
    rf_got_make(&x, &g);
    run(e, &d, &h, &g);
    rf_compare(what, p, seed, &x, &g);
    TU_OK(memra_engine_destroy(e));
    rf_got_free(&g);
    rf_expect_free(&x);
    rf_host_free(&h);
}

/* {num_k, num_v, d_conv, T, B}: GQA ratio 1 and 4, the suite's (2, 4) and ornith (16, 32),
 * d_conv 2, 4, 8, T from 1 to 8, B from 1 to 3. */
static rf_param rf_packed_cases[] = {
    {1, 1, 4, 8, 1},   {2, 2, 2, 5, 3},   {4, 4, 8, 8, 2},   {1, 4, 4, 6, 3},
    {2, 8, 8, 8, 3},   {4, 16, 2, 3, 2},  {2, 4, 4, 8, 3},   {2, 4, 2, 1, 2},
    {16, 32, 4, 8, 1}, {16, 32, 8, 4, 3}, {16, 16, 2, 2, 2}, {4, 16, 4, 1, 1},
};

static rf_param rf_per_row_cases[] = {
    {1, 1, 2, 3, 3}, {2, 2, 8, 4, 2}, {1, 4, 4, 2, 3},
    {2, 8, 8, 5, 2}, {2, 4, 4, 3, 3}, {16, 32, 4, 2, 3},
};

#define RF_TEST(tname, cases, backend, runner)                                                     \
    TU_PARAM_TEST(rf_param, TU_PARAMS(rf_param, cases), reference, tname, p)                       \
    {                                                                                              \
        rf_check(#tname, p, backend, runner);                                                      \
    }

RF_TEST(packed_cpu, rf_packed_cases, MEMRA_BACKEND_CPU, rf_packed_runner)
RF_TEST(packed_cuda, rf_packed_cases, MEMRA_BACKEND_CUDA, rf_packed_runner)
RF_TEST(per_row_in_place_cpu, rf_per_row_cases, MEMRA_BACKEND_CPU, rf_in_place_runner)
RF_TEST(per_row_in_place_cuda, rf_per_row_cases, MEMRA_BACKEND_CUDA, rf_in_place_runner)
RF_TEST(per_row_ping_pong_cpu, rf_per_row_cases, MEMRA_BACKEND_CPU, rf_ping_pong_runner)
RF_TEST(per_row_ping_pong_cuda, rf_per_row_cases, MEMRA_BACKEND_CUDA, rf_ping_pong_runner)
