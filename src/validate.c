/*
 * Argument validation shared by both backends. Each op validator checks, in this order: the
 * scalar shape parameters, the size products (overflow), every view (NULL, length, alignment,
 * address wrap-around), then overlaps between outputs and everything else; only then does it
 * fill the kernel argument struct. A validator never touches memory behind a pointer.
 */
#include "validate.h"

#include <math.h>
#include <string.h>

#include "engine.h"
#include "status.h"

#define MEMRA__MAX_ARGS 24

/* One argument's byte range, kept until the overlap check. */
typedef struct memra__range {
    const char *name;
    uintptr_t lo;
    uintptr_t hi;
    bool output;
} memra__range;

/* The validation state of one call. */
typedef struct memra__vctx {
    const char *fn;
    size_t n;
    memra__range r[MEMRA__MAX_ARGS];
} memra__vctx;

MemraStatus memra__check_engine_handle(const char *fn, const MemraEngine *engine)
{
    /* MEMRA__ENTER has refused every handle that does not name a live engine and replaced the
     * handle by the engine; what is left to check is that it ran, for this very function (not
     * only for an enclosing call of a graph step). Nothing is read through `engine`. */
    const memra__call *c = memra__current_call();
    MEMRA__FAIL_IF(c == NULL || c->fn != fn || c->engine != engine || engine == NULL,
                   MEMRA_STATUS_INTERNAL, fn,
                   "the entry point checks its engine without holding it: MEMRA__ENTER(engine) "
                   "must be its first statement");
    return MEMRA_STATUS_OK;
}

MemraStatus memra__check_engine(const char *fn, const MemraEngine *engine)
{
    MEMRA__TRY(memra__check_engine_handle(fn, engine));
    return memra__engine_check_fault(engine, fn);
}

MemraStatus memra__check_graph(const char *fn, const MemraEngine *engine, const MemraGraph *graph,
                               MemraGraph **out)
{
    MEMRA__TRY(memra__check_engine_handle(fn, engine));
    return memra__resolve_graph(fn, engine, graph, out);
}

MemraStatus memra__check_out(const char *fn, const char *name, const void *out)
{
    MEMRA__FAIL_IF(out == NULL, MEMRA_STATUS_INVALID_ARGUMENT, fn,
                   "parameter '%s': expected a non-NULL pointer to store the result", name);
    return MEMRA_STATUS_OK;
}

/* Multiplies up to four factors; fails with a message naming `what` on overflow. */
static MemraStatus size_of(memra__vctx *v, const char *what, size_t *out, size_t a, size_t b,
                           size_t c, size_t d)
{
    size_t ab, abc, abcd;
    if (__builtin_mul_overflow(a, b, &ab) || __builtin_mul_overflow(ab, c, &abc) ||
        __builtin_mul_overflow(abc, d, &abcd))
        return memra__fail(MEMRA_STATUS_INVALID_ARGUMENT, v->fn,
                           "the element count of %s = %zu x %zu x %zu x %zu overflows size_t", what,
                           a, b, c, d);
    *out = abcd;
    return MEMRA_STATUS_OK;
}

/* Checks one view: NULL only with len == 0, at least `need` elements, aligned to `elem`, no
 * wrap-around of its used extent; records the used extent for the overlap check. */
static MemraStatus view(memra__vctx *v, const char *name, const void *ptr, size_t len, size_t need,
                        size_t elem, bool output, const char *shape)
{
    const char *fn = v->fn;
    uintptr_t lo = (uintptr_t)ptr;
    size_t bytes;
    MEMRA__FAIL_IF(ptr == NULL && len > 0, MEMRA_STATUS_INVALID_ARGUMENT, fn,
                   "parameter '%s': expected a non-NULL pointer for len %zu, got NULL", name, len);
    MEMRA__FAIL_IF(len < need, MEMRA_STATUS_INVALID_ARGUMENT, fn,
                   "parameter '%s': expected at least %zu elements (%s), got %zu", name, need,
                   shape, len);
    MEMRA__FAIL_IF(lo % elem != 0, MEMRA_STATUS_INVALID_ARGUMENT, fn,
                   "parameter '%s': expected a %zu-byte aligned address, got %p", name, elem, ptr);
    MEMRA__FAIL_IF(__builtin_mul_overflow(need, elem, &bytes) || lo + bytes < lo,
                   MEMRA_STATUS_INVALID_ARGUMENT, fn,
                   "parameter '%s': %zu elements at %p run past the end of the address space", name,
                   need, ptr);
    if (need == 0)
        return MEMRA_STATUS_OK;
    MEMRA__FAIL_IF(v->n == MEMRA__MAX_ARGS, MEMRA_STATUS_INTERNAL, fn,
                   "too many arguments for the overlap check");
    v->r[v->n++] = (memra__range){name, lo, lo + bytes, output};
    return MEMRA_STATUS_OK;
}

static MemraStatus in_f32(memra__vctx *v, const char *name, MemraSliceF32 s, size_t need,
                          const char *shape)
{
    return view(v, name, s.ptr, s.len, need, sizeof(float), false, shape);
}

static MemraStatus out_f32(memra__vctx *v, const char *name, MemraSliceMutF32 s, size_t need,
                           const char *shape)
{
    return view(v, name, s.ptr, s.len, need, sizeof(float), true, shape);
}

static MemraStatus in_u64(memra__vctx *v, const char *name, MemraSliceU64 s, size_t need,
                          const char *shape)
{
    return view(v, name, s.ptr, s.len, need, sizeof(uint64_t), false, shape);
}

/* Optional outputs (snapshots): {NULL, 0} means "not wanted"; anything else must hold `need`. */
static MemraStatus opt_out_f32(memra__vctx *v, const char *name, MemraSliceMutF32 s, size_t need,
                               const char *shape, bool *wanted)
{
    *wanted = !(s.ptr == NULL && s.len == 0);
    if (!*wanted)
        return MEMRA_STATUS_OK;
    return out_f32(v, name, s, need, shape);
}

/* Refuses any output whose used extent intersects another argument's. Inputs may alias each
 * other: reading the same memory twice is harmless. */
static MemraStatus no_overlaps(const memra__vctx *v)
{
    for (size_t i = 0; i < v->n; i++) {
        for (size_t j = i + 1; j < v->n; j++) {
            const memra__range *a = &v->r[i], *b = &v->r[j];
            if (!a->output && !b->output)
                continue;
            MEMRA__FAIL_IF(a->lo < b->hi && b->lo < a->hi, MEMRA_STATUS_INVALID_ARGUMENT, v->fn,
                           "parameter '%s' overlaps parameter '%s': outputs must not share "
                           "memory with any other argument",
                           a->output ? a->name : b->name, a->output ? b->name : a->name);
        }
    }
    return MEMRA_STATUS_OK;
}

static MemraStatus nonzero(memra__vctx *v, const char *name, size_t value)
{
    MEMRA__FAIL_IF(value == 0, MEMRA_STATUS_INVALID_ARGUMENT, v->fn,
                   "parameter '%s': expected >= 1, got 0", name);
    return MEMRA_STATUS_OK;
}

static MemraStatus finite_scalar(memra__vctx *v, const char *name, float value)
{
    MEMRA__FAIL_IF(!isfinite(value), MEMRA_STATUS_INVALID_ARGUMENT, v->fn,
                   "parameter '%s': expected a finite value, got %g", name, (double)value);
    return MEMRA_STATUS_OK;
}

MemraStatus memra__validate_copy(const char *fn, const void *src, size_t len, const void *dst,
                                 size_t dst_len, size_t elem, bool host_overlap)
{
    memra__vctx v = {.fn = fn};
    MEMRA__TRY(view(&v, "src", src, len, len, elem, false, "src.len"));
    MEMRA__TRY(view(&v, "dst", dst, dst_len, len, elem, true, "src.len"));
    return host_overlap ? no_overlaps(&v) : MEMRA_STATUS_OK;
}

MemraStatus memra__validate_source(const char *fn, const void *src, size_t len, size_t elem)
{
    memra__vctx v = {.fn = fn};
    return view(&v, "src", src, len, len, elem, false, "src.len");
}

/* The channel count and window of the conv entry points (the 1.1 operations check theirs as
 * args->d_conv). */
static MemraStatus conv_shape(memra__vctx *v, size_t conv_dim, size_t d_conv)
{
    MEMRA__TRY(nonzero(v, "conv_dim", conv_dim));
    MEMRA__FAIL_IF(d_conv < 1 || d_conv > MEMRA_D_CONV_MAX, MEMRA_STATUS_INVALID_ARGUMENT, v->fn,
                   "parameter 'd_conv': expected 1..=%d, got %zu", MEMRA_D_CONV_MAX, d_conv);
    return MEMRA_STATUS_OK;
}

MemraStatus memra__validate_conv(const char *fn, bool packed, MemraSliceF32 qkv,
                                 MemraSliceU64 table, MemraSliceF32 w, MemraSliceMutF32 conv_out,
                                 MemraSliceMutF32 snap, size_t conv_dim, size_t d_conv, size_t t,
                                 size_t b_n, memra__conv_args *out)
{
    memra__vctx v = {.fn = fn};
    const char *table_name = packed ? "table" : "conv_ptrs";
    const char *out_name = packed ? "conv_outs" : "conv_out";
    size_t width = packed ? MEMRA_TABLE_WIDTH : 1, pad, n_rows = 0, n_table = 0, n_w = 0,
           n_snap = 0;
    bool want_snap = false;

    MEMRA__TRY(conv_shape(&v, conv_dim, d_conv));
    if (packed)
        MEMRA__TRY(nonzero(&v, "t", t));
    MEMRA__TRY(nonzero(&v, "b_n", b_n));
    pad = d_conv - 1;

    MEMRA__TRY(size_of(&v, packed ? "[b_n, t, conv_dim]" : "[b_n, conv_dim]", &n_rows, b_n, t,
                       conv_dim, 1));
    MEMRA__TRY(size_of(&v, "the table", &n_table, b_n, width, 1, 1));
    MEMRA__TRY(size_of(&v, "[conv_dim, d_conv]", &n_w, conv_dim, d_conv, 1, 1));
    MEMRA__TRY(size_of(&v, "[b_n, t-1, conv_dim, d_conv-1]", &n_snap, b_n, t - 1, conv_dim, pad));

    MEMRA__TRY(in_f32(&v, "qkv", qkv, n_rows, packed ? "[b_n, t, conv_dim]" : "[b_n, conv_dim]"));
    MEMRA__TRY(in_u64(&v, table_name, table, n_table, packed ? "[b_n, 3]" : "[b_n]"));
    MEMRA__TRY(in_f32(&v, "w", w, n_w, "[conv_dim, d_conv]"));
    MEMRA__TRY(
        out_f32(&v, out_name, conv_out, n_rows, packed ? "[b_n, t, conv_dim]" : "[b_n, conv_dim]"));
    if (packed)
        MEMRA__TRY(opt_out_f32(&v, "snap_conv", snap, n_snap, "[b_n, t-1, conv_dim, d_conv-1]",
                               &want_snap));
    MEMRA__TRY(no_overlaps(&v));

    *out = (memra__conv_args){
        .qkv = qkv.ptr,
        .rings = table.ptr,
        .ring_stride = width,
        .w = w.ptr,
        .conv_out = conv_out.ptr,
        .snap = want_snap && n_snap > 0 ? snap.ptr : NULL,
        .conv_dim = conv_dim,
        .d_conv = d_conv,
        .t = t,
        .b_n = b_n,
    };
    return MEMRA_STATUS_OK;
}

MemraStatus memra__validate_prep(const char *fn, MemraSliceF32 conv_out, MemraSliceF32 beta_raw,
                                 MemraSliceF32 alpha, MemraSliceF32 dt_bias, MemraSliceF32 a,
                                 MemraSliceMutF32 q_l2, MemraSliceMutF32 k_l2, MemraSliceMutF32 v_g,
                                 MemraSliceMutF32 beta, MemraSliceMutF32 g_log, size_t d_state,
                                 size_t num_v, size_t num_k, size_t key_dim, float eps,
                                 size_t conv_dim, size_t b_n, memra__prep_args *out)
{
    memra__vctx v = {.fn = fn};
    size_t want_key_dim = 0, value_dim = 0, want_conv_dim = 0, n_in = 0, n_heads = 0, n_out = 0;

    MEMRA__TRY(nonzero(&v, "d_state", d_state));
    MEMRA__FAIL_IF(d_state != MEMRA_D_STATE, MEMRA_STATUS_UNSUPPORTED, fn,
                   "parameter 'd_state': only %d is supported, got %zu", MEMRA_D_STATE, d_state);
    MEMRA__TRY(nonzero(&v, "num_k", num_k));
    MEMRA__TRY(nonzero(&v, "num_v", num_v));
    MEMRA__FAIL_IF(num_v % num_k != 0, MEMRA_STATUS_INVALID_ARGUMENT, fn,
                   "parameter 'num_v': expected a multiple of num_k = %zu, got %zu", num_k, num_v);
    MEMRA__TRY(nonzero(&v, "b_n", b_n));
    MEMRA__TRY(finite_scalar(&v, "eps", eps));

    MEMRA__TRY(size_of(&v, "key_dim = d_state * num_k", &want_key_dim, d_state, num_k, 1, 1));
    MEMRA__TRY(size_of(&v, "value_dim = d_state * num_v", &value_dim, d_state, num_v, 1, 1));
    MEMRA__FAIL_IF(key_dim != want_key_dim, MEMRA_STATUS_INVALID_ARGUMENT, fn,
                   "parameter 'key_dim': expected d_state * num_k = %zu, got %zu", want_key_dim,
                   key_dim);
    MEMRA__FAIL_IF(__builtin_mul_overflow(key_dim, 2, &want_conv_dim) ||
                       __builtin_add_overflow(want_conv_dim, value_dim, &want_conv_dim),
                   MEMRA_STATUS_INVALID_ARGUMENT, fn,
                   "the element count of conv_dim = 2 * key_dim + value_dim overflows size_t");
    MEMRA__FAIL_IF(conv_dim != want_conv_dim, MEMRA_STATUS_INVALID_ARGUMENT, fn,
                   "parameter 'conv_dim': expected 2 * key_dim + d_state * num_v = %zu, got %zu",
                   want_conv_dim, conv_dim);

    MEMRA__TRY(size_of(&v, "[b_n, conv_dim]", &n_in, b_n, conv_dim, 1, 1));
    MEMRA__TRY(size_of(&v, "[b_n, num_v]", &n_heads, b_n, num_v, 1, 1));
    MEMRA__TRY(size_of(&v, "[b_n, num_v, d_state]", &n_out, b_n, num_v, d_state, 1));

    MEMRA__TRY(in_f32(&v, "conv_out", conv_out, n_in, "[b_n, conv_dim]"));
    MEMRA__TRY(in_f32(&v, "beta_raw", beta_raw, n_heads, "[b_n, num_v]"));
    MEMRA__TRY(in_f32(&v, "alpha", alpha, n_heads, "[b_n, num_v]"));
    MEMRA__TRY(in_f32(&v, "dt_bias", dt_bias, num_v, "[num_v]"));
    MEMRA__TRY(in_f32(&v, "a", a, num_v, "[num_v]"));
    MEMRA__TRY(out_f32(&v, "q_l2", q_l2, n_out, "[b_n, num_v, d_state]"));
    MEMRA__TRY(out_f32(&v, "k_l2", k_l2, n_out, "[b_n, num_v, d_state]"));
    MEMRA__TRY(out_f32(&v, "v_g", v_g, n_out, "[b_n, num_v, d_state]"));
    MEMRA__TRY(out_f32(&v, "beta", beta, n_heads, "[b_n, num_v]"));
    MEMRA__TRY(out_f32(&v, "g_log", g_log, n_heads, "[b_n, num_v]"));
    MEMRA__TRY(no_overlaps(&v));

    *out = (memra__prep_args){
        .conv_out = conv_out.ptr,
        .beta_raw = beta_raw.ptr,
        .alpha = alpha.ptr,
        .dt_bias = dt_bias.ptr,
        .a = a.ptr,
        .q_l2 = q_l2.ptr,
        .k_l2 = k_l2.ptr,
        .v_g = v_g.ptr,
        .beta = beta.ptr,
        .g_log = g_log.ptr,
        .num_v = num_v,
        .num_k = num_k,
        .key_dim = key_dim,
        .conv_dim = conv_dim,
        .rows = b_n,
        .eps = eps,
    };
    return MEMRA_STATUS_OK;
}

/* The per-row inputs of every scan, checked in this order: q, k, v of `act` shape ([..., num_v,
 * 128], n_act elements), g_log and beta of `heads` shape (n_heads). Fills those five fields of
 * *a and zeroes the others. */
static MemraStatus scan_inputs(memra__vctx *v, MemraSliceF32 q, MemraSliceF32 k, MemraSliceF32 v_in,
                               MemraSliceF32 g_log, MemraSliceF32 beta, size_t n_act,
                               const char *act, size_t n_heads, const char *heads,
                               memra__scan_args *a)
{
    MEMRA__TRY(in_f32(v, "q", q, n_act, act));
    MEMRA__TRY(in_f32(v, "k", k, n_act, act));
    MEMRA__TRY(in_f32(v, "v", v_in, n_act, act));
    MEMRA__TRY(in_f32(v, "g_log", g_log, n_heads, heads));
    MEMRA__TRY(in_f32(v, "beta", beta, n_heads, heads));
    *a = (memra__scan_args){
        .q = q.ptr, .k = k.ptr, .v = v_in.ptr, .g_log = g_log.ptr, .beta = beta.ptr};
    return MEMRA_STATUS_OK;
}

MemraStatus memra__validate_scan(const char *fn, bool packed, MemraSliceF32 q, MemraSliceF32 k,
                                 MemraSliceF32 v_in, MemraSliceF32 g_log, MemraSliceF32 beta,
                                 MemraSliceU64 in_tab, MemraSliceU64 out_tab, MemraSliceMutF32 o,
                                 MemraSliceMutF32 snap, size_t num_v, size_t t, size_t b_n,
                                 float scale, memra__scan_args *out)
{
    memra__vctx v = {.fn = fn};
    const char *act = packed ? "[b_n, t, num_v, 128]" : "[b_n, num_v, 128]";
    const char *heads = packed ? "[b_n, t, num_v]" : "[b_n, num_v]";
    size_t n_act = 0, n_heads = 0, n_table = 0, n_snap = 0;
    bool want_snap = false;
    memra__scan_args s;

    MEMRA__TRY(nonzero(&v, "num_v", num_v));
    if (packed)
        MEMRA__TRY(nonzero(&v, "t", t));
    MEMRA__TRY(nonzero(&v, "b_n", b_n));
    MEMRA__TRY(finite_scalar(&v, "scale", scale));

    MEMRA__TRY(size_of(&v, act, &n_act, b_n, t, num_v, MEMRA_D_STATE));
    MEMRA__TRY(size_of(&v, heads, &n_heads, b_n, t, num_v, 1));
    MEMRA__TRY(size_of(&v, "the table", &n_table, b_n, packed ? MEMRA_TABLE_WIDTH : 1, 1, 1));
    MEMRA__TRY(size_of(&v, "[b_n, t-1, num_v, 128, 128]", &n_snap, b_n, t - 1, num_v,
                       (size_t)MEMRA_D_STATE * MEMRA_D_STATE));

    MEMRA__TRY(scan_inputs(&v, q, k, v_in, g_log, beta, n_act, act, n_heads, heads, &s));
    if (packed) {
        MEMRA__TRY(in_u64(&v, "table", in_tab, n_table, "[b_n, 3]"));
    } else {
        MEMRA__TRY(in_u64(&v, "in_ptrs", in_tab, n_table, "[b_n]"));
        MEMRA__TRY(in_u64(&v, "out_ptrs", out_tab, n_table, "[b_n]"));
    }
    MEMRA__TRY(out_f32(&v, packed ? "o_all" : "o", o, n_act, act));
    if (packed)
        MEMRA__TRY(
            opt_out_f32(&v, "snap_ssm", snap, n_snap, "[b_n, t-1, num_v, 128, 128]", &want_snap));
    MEMRA__TRY(no_overlaps(&v));

    s.o = o.ptr;
    s.snap = want_snap && n_snap > 0 ? snap.ptr : NULL;
    s.num_v = num_v;
    s.qk_heads = num_v;
    s.t = t;
    s.b_n = b_n;
    s.scale = scale;
    /* Which entries of a packed table the scan reads and writes is what the operation means,
     * not what valid arguments are: memra_gdn_scan_s128_tsnap (api_ops.c) chooses them. */
    if (!packed) {
        s.in_table = in_tab.ptr;
        s.out_table = out_tab.ptr;
        s.in_stride = 1;
        s.out_stride = 1;
    }
    *out = s;
    return MEMRA_STATUS_OK;
}

/* ---- 1.1: the one-launch verify, journal commit, rollback -------------------------------- */

static MemraStatus in_u32(memra__vctx *v, const char *name, MemraSliceU32 s, size_t need,
                          const char *shape)
{
    return view(v, name, s.ptr, s.len, need, sizeof(uint32_t), false, shape);
}

/* The kernel layer has no access to the public header; its copies of the public constants must
 * agree with it. */
_Static_assert(MEMRA__TABLE_WIDTH == MEMRA_TABLE_WIDTH, "table width");
_Static_assert(MEMRA__MODE_SNAPSHOTS == MEMRA_VERIFY_MODE_SNAPSHOTS, "verify mode");
_Static_assert(MEMRA__MODE_FINAL_ONLY == MEMRA_VERIFY_MODE_FINAL_ONLY, "verify mode");
_Static_assert(MEMRA__MODE_JOURNAL == MEMRA_VERIFY_MODE_JOURNAL, "verify mode");
_Static_assert(MEMRA__S == MEMRA_D_STATE && MEMRA__D_CONV_MAX == MEMRA_D_CONV_MAX, "shapes");

/* The smallest MemraVerifyArgs a caller may pass: the struct as 1.1 first shipped it (1.2
 * appended journal_t_max and workspace). */
#define MEMRA__VERIFY_ARGS_SIZE_1_1 offsetof(MemraVerifyArgs, journal_t_max)

/* The struct itself: present, a size this library knows, known enum values. Copies the
 * caller's fields into *out (zero beyond what the caller knows) so that later checks read one
 * local struct. */
static MemraStatus verify_struct(const char *fn, const MemraVerifyArgs *in, bool uses_head_order,
                                 MemraVerifyArgs *out)
{
    MEMRA__FAIL_IF(in == NULL, MEMRA_STATUS_INVALID_ARGUMENT, fn,
                   "parameter 'args': expected a MemraVerifyArgs filled by "
                   "memra_verify_args_init, got NULL");
    memset(out, 0, sizeof *out);
    /* Only the layouts a release defined: a size between two of them would cut a field. */
    MEMRA__FAIL_IF(in->struct_size > MEMRA__VERIFY_ARGS_SIZE_1_1 && in->struct_size < sizeof *out,
                   MEMRA_STATUS_INVALID_ARGUMENT, fn,
                   "parameter 'args->struct_size': expected %zu (1.1) or %zu (1.2; call "
                   "memra_verify_args_init), got %zu",
                   (size_t)MEMRA__VERIFY_ARGS_SIZE_1_1, sizeof *out, in->struct_size);
    MEMRA__TRY(memra__read_versioned(fn, "args->struct_size", "MemraVerifyArgs",
                                     "memra_verify_args_init", in, in->struct_size,
                                     MEMRA__VERIFY_ARGS_SIZE_1_1, out, sizeof *out));
    MEMRA__FAIL_IF(out->mode != MEMRA_VERIFY_MODE_SNAPSHOTS &&
                       out->mode != MEMRA_VERIFY_MODE_FINAL_ONLY &&
                       out->mode != MEMRA_VERIFY_MODE_JOURNAL,
                   MEMRA_STATUS_INVALID_ARGUMENT, fn,
                   "parameter 'args->mode': expected a MemraVerifyMode (0, 1 or 2), got %u",
                   (unsigned)out->mode);
    /* The rollback copies states and rings and never reads head_order (the header says so). */
    MEMRA__FAIL_IF(uses_head_order && out->head_order != MEMRA_HEAD_ORDER_TILED &&
                       out->head_order != MEMRA_HEAD_ORDER_GROUPED,
                   MEMRA_STATUS_INVALID_ARGUMENT, fn,
                   "parameter 'args->head_order': expected a MemraHeadOrder (0 or 1), got %u",
                   (unsigned)out->head_order);
    return MEMRA_STATUS_OK;
}

/* The model shape shared by every 1.1 operation: d_state, heads, conv width; derives key_dim
 * and conv_dim. */
static MemraStatus verify_shape(memra__vctx *v, size_t d_state, size_t num_k, size_t num_v,
                                size_t *key_dim, size_t *conv_dim)
{
    const char *fn = v->fn;
    size_t value_dim = 0;
    MEMRA__TRY(nonzero(v, "d_state", d_state));
    MEMRA__FAIL_IF(d_state != MEMRA_D_STATE, MEMRA_STATUS_UNSUPPORTED, fn,
                   "parameter 'd_state': only %d is supported, got %zu", MEMRA_D_STATE, d_state);
    MEMRA__TRY(nonzero(v, "num_k", num_k));
    MEMRA__TRY(nonzero(v, "num_v", num_v));
    MEMRA__FAIL_IF(num_v % num_k != 0, MEMRA_STATUS_INVALID_ARGUMENT, fn,
                   "parameter 'num_v': expected a multiple of num_k = %zu, got %zu", num_k, num_v);
    MEMRA__TRY(size_of(v, "key_dim = d_state * num_k", key_dim, d_state, num_k, 1, 1));
    MEMRA__TRY(size_of(v, "value_dim = d_state * num_v", &value_dim, d_state, num_v, 1, 1));
    MEMRA__FAIL_IF(__builtin_mul_overflow(*key_dim, 2, conv_dim) ||
                       __builtin_add_overflow(*conv_dim, value_dim, conv_dim),
                   MEMRA_STATUS_INVALID_ARGUMENT, fn,
                   "the element count of conv_dim = 2 * key_dim + value_dim overflows size_t");
    return MEMRA_STATUS_OK;
}

static MemraStatus d_conv_range(memra__vctx *v, size_t d_conv)
{
    MEMRA__FAIL_IF(d_conv < 1 || d_conv > MEMRA_D_CONV_MAX, MEMRA_STATUS_INVALID_ARGUMENT, v->fn,
                   "parameter 'args->d_conv': expected 1..=%d, got %zu", MEMRA_D_CONV_MAX, d_conv);
    return MEMRA_STATUS_OK;
}

/* A slice that the operation does not read in this mode must be left empty, so that a caller
 * who believes it is used learns otherwise. */
static MemraStatus must_be_empty(memra__vctx *v, const char *name, const void *ptr, size_t len,
                                 const char *why)
{
    MEMRA__FAIL_IF(ptr != NULL || len != 0, MEMRA_STATUS_INVALID_ARGUMENT, v->fn,
                   "parameter '%s': expected {NULL, 0} (%s), got %zu elements at %p", name, why,
                   len, ptr);
    return MEMRA_STATUS_OK;
}

MemraStatus memra__validate_verify(const char *fn, bool commit, const MemraVerifyArgs *in,
                                   memra__verify_args *out)
{
    memra__vctx v = {.fn = fn};
    MemraVerifyArgs x;
    size_t key_dim = 0, conv_dim = 0, pad, t, n_rows = 0, n_table = 0, n_w = 0, n_heads = 0,
           n_act = 0, n_snap_conv = 0, n_snap_ssm = 0;
    bool want_conv = false, want_q = false, want_k = false, want_v = false, want_beta = false,
         want_g = false, want_ws = false, snaps;

    MEMRA__TRY(verify_struct(fn, in, true, &x));
    MEMRA__TRY(verify_shape(&v, x.d_state, x.num_k, x.num_v, &key_dim, &conv_dim));
    MEMRA__TRY(d_conv_range(&v, x.d_conv));
    if (commit)
        MEMRA__FAIL_IF(x.mode != MEMRA_VERIFY_MODE_JOURNAL, MEMRA_STATUS_INVALID_ARGUMENT, fn,
                       "parameter 'args->mode': a commit folds journals; expected "
                       "MEMRA_VERIFY_MODE_JOURNAL, got %u",
                       (unsigned)x.mode);
    else
        MEMRA__TRY(nonzero(&v, "args->t", x.t));
    MEMRA__TRY(nonzero(&v, "args->b_n", x.b_n));
    MEMRA__TRY(finite_scalar(&v, "args->eps", x.eps));
    if (!commit)
        MEMRA__TRY(finite_scalar(&v, "args->scale", x.scale));
    pad = x.d_conv - 1;
    /* A commit runs no new rows: it reads no activations and writes no outputs. */
    t = commit ? 0 : x.t;
    snaps = x.mode == MEMRA_VERIFY_MODE_SNAPSHOTS && t >= 2;

    MEMRA__TRY(size_of(&v, "[b_n, t, conv_dim]", &n_rows, x.b_n, t, conv_dim, 1));
    MEMRA__TRY(size_of(&v, "the table [b_n, 3]", &n_table, x.b_n, MEMRA_TABLE_WIDTH, 1, 1));
    MEMRA__TRY(size_of(&v, "[conv_dim, d_conv]", &n_w, conv_dim, x.d_conv, 1, 1));
    MEMRA__TRY(size_of(&v, "[b_n, t, num_v]", &n_heads, x.b_n, t, x.num_v, 1));
    MEMRA__TRY(size_of(&v, "[b_n, t, num_v, 128]", &n_act, x.b_n, t, x.num_v, MEMRA_D_STATE));
    if (snaps) {
        MEMRA__TRY(size_of(&v, "[b_n, t-1, conv_dim, d_conv-1]", &n_snap_conv, x.b_n, t - 1,
                           conv_dim, pad));
        MEMRA__TRY(size_of(&v, "[b_n, t-1, num_v, 128, 128]", &n_snap_ssm, x.b_n, t - 1, x.num_v,
                           (size_t)MEMRA_D_STATE * MEMRA_D_STATE));
    }

    MEMRA__TRY(in_u64(&v, "args->table", x.table, n_table, "[b_n, 3]"));
    MEMRA__TRY(in_f32(&v, "args->w", x.w, n_w, "[conv_dim, d_conv]"));
    MEMRA__TRY(in_f32(&v, "args->dt_bias", x.dt_bias, x.num_v, "[num_v]"));
    MEMRA__TRY(in_f32(&v, "args->a", x.a, x.num_v, "[num_v]"));
    if (x.mode == MEMRA_VERIFY_MODE_JOURNAL)
        MEMRA__TRY(in_u32(&v, "args->accepted", x.accepted, x.b_n, "[b_n]"));
    else
        MEMRA__TRY(must_be_empty(&v, "args->accepted", x.accepted.ptr, x.accepted.len,
                                 "only JOURNAL mode and rollback read accepted counts"));
    if (!commit) {
        MEMRA__TRY(in_f32(&v, "args->qkv", x.qkv, n_rows, "[b_n, t, conv_dim]"));
        MEMRA__TRY(in_f32(&v, "args->beta_raw", x.beta_raw, n_heads, "[b_n, t, num_v]"));
        MEMRA__TRY(in_f32(&v, "args->alpha", x.alpha, n_heads, "[b_n, t, num_v]"));
        MEMRA__TRY(out_f32(&v, "args->o", x.o, n_act, "[b_n, t, num_v, 128]"));
        MEMRA__TRY(opt_out_f32(&v, "args->conv_outs", x.conv_outs, n_rows, "[b_n, t, conv_dim]",
                               &want_conv));
        MEMRA__TRY(opt_out_f32(&v, "args->q_l2", x.q_l2, n_act, "[b_n, t, num_v, 128]", &want_q));
        MEMRA__TRY(opt_out_f32(&v, "args->k_l2", x.k_l2, n_act, "[b_n, t, num_v, 128]", &want_k));
        MEMRA__TRY(opt_out_f32(&v, "args->v_g", x.v_g, n_act, "[b_n, t, num_v, 128]", &want_v));
        MEMRA__TRY(opt_out_f32(&v, "args->beta", x.beta, n_heads, "[b_n, t, num_v]", &want_beta));
        MEMRA__TRY(opt_out_f32(&v, "args->g_log", x.g_log, n_heads, "[b_n, t, num_v]", &want_g));
    }
    if (snaps) {
        MEMRA__TRY(out_f32(&v, "args->snap_conv", x.snap_conv, n_snap_conv,
                           "[b_n, t-1, conv_dim, d_conv-1]"));
        MEMRA__TRY(
            out_f32(&v, "args->snap_ssm", x.snap_ssm, n_snap_ssm, "[b_n, t-1, num_v, 128, 128]"));
    } else if (!commit && x.mode == MEMRA_VERIFY_MODE_SNAPSHOTS) {
        /* t == 1 has no snapshots: any view is long enough, and none is written. */
        bool unused;
        MEMRA__TRY(opt_out_f32(&v, "args->snap_conv", x.snap_conv, 0,
                               "[b_n, t-1, conv_dim, d_conv-1]", &unused));
        MEMRA__TRY(opt_out_f32(&v, "args->snap_ssm", x.snap_ssm, 0, "[b_n, t-1, num_v, 128, 128]",
                               &unused));
    } else if (!commit) {
        const char *why = "only SNAPSHOTS mode writes snapshots";
        MEMRA__TRY(must_be_empty(&v, "args->snap_conv", x.snap_conv.ptr, x.snap_conv.len, why));
        MEMRA__TRY(must_be_empty(&v, "args->snap_ssm", x.snap_ssm.ptr, x.snap_ssm.len, why));
    }
    if (x.mode == MEMRA_VERIFY_MODE_JOURNAL && x.journal_t_max != 0 && t > x.journal_t_max)
        return memra__fail(MEMRA_STATUS_INVALID_ARGUMENT, fn,
                           "parameter 'args->t': the journals hold at most journal_t_max = %zu "
                           "rows, got t = %zu",
                           x.journal_t_max, t);
    MEMRA__FAIL_IF(x.journal_t_max > UINT32_MAX, MEMRA_STATUS_INVALID_ARGUMENT, fn,
                   "parameter 'args->journal_t_max': expected at most %u, got %zu", UINT32_MAX,
                   x.journal_t_max);
    want_ws = !(x.workspace.ptr == NULL && x.workspace.len == 0);
    if (want_ws) {
        const size_t n_ws = memra__verify_workspace_words(x.b_n, t, x.num_k, x.num_v);
        MEMRA__FAIL_IF(n_ws == 0, MEMRA_STATUS_INVALID_ARGUMENT, fn,
                       "the workspace size of b_n = %zu, t = %zu overflows size_t", x.b_n, t);
        MEMRA__TRY(
            out_f32(&v, "args->workspace", x.workspace, n_ws, "memra_gdn_verify_workspace_len()"));
        MEMRA__FAIL_IF((uintptr_t)x.workspace.ptr % 16 != 0, MEMRA_STATUS_INVALID_ARGUMENT, fn,
                       "parameter 'args->workspace': expected a 16-byte aligned address, got %p",
                       (void *)x.workspace.ptr);
    }
    MEMRA__TRY(no_overlaps(&v));

    *out = (memra__verify_args){
        .qkv = x.qkv.ptr,
        .table = x.table.ptr,
        .w = x.w.ptr,
        .beta_raw = x.beta_raw.ptr,
        .alpha = x.alpha.ptr,
        .dt_bias = x.dt_bias.ptr,
        .a = x.a.ptr,
        .accepted = x.mode == MEMRA_VERIFY_MODE_JOURNAL ? x.accepted.ptr : NULL,
        .o = commit ? NULL : x.o.ptr,
        .conv_out = want_conv && n_rows > 0 ? x.conv_outs.ptr : NULL,
        .q_l2 = want_q && n_act > 0 ? x.q_l2.ptr : NULL,
        .k_l2 = want_k && n_act > 0 ? x.k_l2.ptr : NULL,
        .v_g = want_v && n_act > 0 ? x.v_g.ptr : NULL,
        .beta = want_beta && n_heads > 0 ? x.beta.ptr : NULL,
        .g_log = want_g && n_heads > 0 ? x.g_log.ptr : NULL,
        .snap_conv = snaps && n_snap_conv > 0 ? x.snap_conv.ptr : NULL,
        .snap_ssm = snaps ? x.snap_ssm.ptr : NULL,
        .num_v = x.num_v,
        .num_k = x.num_k,
        .key_dim = key_dim,
        .conv_dim = conv_dim,
        .d_conv = x.d_conv,
        .t = t,
        .b_n = x.b_n,
        .mode = x.mode,
        .op = commit ? MEMRA__OP_COMMIT : MEMRA__OP_VERIFY,
        .grouped = x.head_order == MEMRA_HEAD_ORDER_GROUPED,
        .eps = x.eps,
        .scale = commit ? 1.0f : x.scale,
        .cap = x.mode == MEMRA_VERIFY_MODE_JOURNAL ? x.journal_t_max : 0,
        .workspace = want_ws ? x.workspace.ptr : NULL,
    };
    return MEMRA_STATUS_OK;
}

MemraStatus memra__validate_workspace_len(const char *fn, const MemraVerifyArgs *in, bool commit,
                                          size_t *out_len)
{
    memra__vctx v = {.fn = fn};
    MemraVerifyArgs x;
    size_t key_dim = 0, conv_dim = 0, words;
    MEMRA__TRY(memra__check_out(fn, "out_len", out_len));
    MEMRA__TRY(verify_struct(fn, in, true, &x));
    MEMRA__TRY(verify_shape(&v, x.d_state, x.num_k, x.num_v, &key_dim, &conv_dim));
    if (!commit)
        MEMRA__TRY(nonzero(&v, "args->t", x.t));
    MEMRA__TRY(nonzero(&v, "args->b_n", x.b_n));
    words = memra__verify_workspace_words(x.b_n, commit ? 0 : x.t, x.num_k, x.num_v);
    MEMRA__FAIL_IF(words == 0, MEMRA_STATUS_INVALID_ARGUMENT, fn,
                   "the workspace size of b_n = %zu, t = %zu overflows size_t", x.b_n, x.t);
    *out_len = words;
    return MEMRA_STATUS_OK;
}

MemraStatus memra__validate_rollback(const char *fn, const MemraVerifyArgs *in,
                                     memra__rollback_args *out)
{
    memra__vctx v = {.fn = fn};
    MemraVerifyArgs x;
    size_t key_dim = 0, conv_dim = 0, n_table = 0, n_snap_conv = 0, n_snap_ssm = 0;

    MEMRA__TRY(verify_struct(fn, in, false, &x));
    MEMRA__TRY(verify_shape(&v, x.d_state, x.num_k, x.num_v, &key_dim, &conv_dim));
    MEMRA__TRY(d_conv_range(&v, x.d_conv));
    MEMRA__FAIL_IF(x.mode != MEMRA_VERIFY_MODE_SNAPSHOTS, MEMRA_STATUS_INVALID_ARGUMENT, fn,
                   "parameter 'args->mode': rollback restores snapshots; expected "
                   "MEMRA_VERIFY_MODE_SNAPSHOTS, got %u",
                   (unsigned)x.mode);
    MEMRA__TRY(nonzero(&v, "args->t", x.t));
    MEMRA__TRY(nonzero(&v, "args->b_n", x.b_n));
    MEMRA__TRY(size_of(&v, "the table [b_n, 3]", &n_table, x.b_n, MEMRA_TABLE_WIDTH, 1, 1));
    MEMRA__TRY(size_of(&v, "[b_n, t-1, conv_dim, d_conv-1]", &n_snap_conv, x.b_n, x.t - 1, conv_dim,
                       x.d_conv - 1));
    MEMRA__TRY(size_of(&v, "[b_n, t-1, num_v, 128, 128]", &n_snap_ssm, x.b_n, x.t - 1, x.num_v,
                       (size_t)MEMRA_D_STATE * MEMRA_D_STATE));
    MEMRA__TRY(in_u64(&v, "args->table", x.table, n_table, "[b_n, 3]"));
    MEMRA__TRY(in_u32(&v, "args->accepted", x.accepted, x.b_n, "[b_n]"));
    /* The snapshots are read here, so they are inputs; views of zero need (t == 1) may be
     * empty. */
    MEMRA__TRY(view(&v, "args->snap_conv", x.snap_conv.ptr, x.snap_conv.len, n_snap_conv,
                    sizeof(float), false, "[b_n, t-1, conv_dim, d_conv-1]"));
    MEMRA__TRY(view(&v, "args->snap_ssm", x.snap_ssm.ptr, x.snap_ssm.len, n_snap_ssm, sizeof(float),
                    false, "[b_n, t-1, num_v, 128, 128]"));

    *out = (memra__rollback_args){
        .table = x.table.ptr,
        .snap_conv = n_snap_conv > 0 ? x.snap_conv.ptr : NULL,
        .snap_ssm = n_snap_ssm > 0 ? x.snap_ssm.ptr : NULL,
        .accepted = x.accepted.ptr,
        .num_v = x.num_v,
        .conv_dim = conv_dim,
        .d_conv = x.d_conv,
        .t = x.t,
        .b_n = x.b_n,
        .op = MEMRA__OP_ROLLBACK,
    };
    return MEMRA_STATUS_OK;
}

MemraStatus memra__validate_journal_len(const char *fn, size_t d_state, size_t num_k, size_t num_v,
                                        size_t t_max, size_t *out_len)
{
    memra__vctx v = {.fn = fn};
    size_t key_dim = 0, conv_dim = 0, row = 0, rows = 0, total = 0;
    MEMRA__TRY(memra__check_out(fn, "out_len", out_len));
    MEMRA__TRY(verify_shape(&v, d_state, num_k, num_v, &key_dim, &conv_dim));
    MEMRA__TRY(nonzero(&v, "t_max", t_max));
    /* The header + 2 * t_max rows of MEMRA__JOURNAL_ROW words (two slots of t_max rows: see
     * kernels.h), each computed without overflow. */
    MEMRA__FAIL_IF(
        __builtin_add_overflow(conv_dim, (num_k + num_v) * (size_t)MEMRA_D_STATE, &row) ||
            __builtin_add_overflow(row, num_v + 3, &row) ||
            __builtin_mul_overflow(row / 4 * 4, t_max, &rows) ||
            __builtin_mul_overflow(rows, 2, &rows) ||
            __builtin_add_overflow(rows, MEMRA__JOURNAL_HEADER, &total) ||
            total > SIZE_MAX / sizeof(float) || t_max > UINT32_MAX,
        MEMRA_STATUS_INVALID_ARGUMENT, fn,
        "the journal length for t_max = %zu rows overflows size_t", t_max);
    *out_len = total;
    return MEMRA_STATUS_OK;
}

MemraStatus memra__validate_conv_direct(const char *fn, MemraSliceF32 qkv,
                                        MemraSliceMutF32 conv_state, MemraSliceF32 w,
                                        MemraSliceMutF32 conv_out, size_t conv_dim, size_t d_conv,
                                        memra__conv_args *out)
{
    memra__vctx v = {.fn = fn};
    size_t n_w = 0, n_ring = 0;

    MEMRA__TRY(conv_shape(&v, conv_dim, d_conv));
    MEMRA__TRY(size_of(&v, "[conv_dim, d_conv]", &n_w, conv_dim, d_conv, 1, 1));
    MEMRA__TRY(size_of(&v, "[conv_dim, d_conv-1]", &n_ring, conv_dim, d_conv - 1, 1, 1));

    MEMRA__TRY(in_f32(&v, "qkv", qkv, conv_dim, "[conv_dim]"));
    /* The ring is read and written: an output, so that nothing else may share its memory. */
    MEMRA__TRY(out_f32(&v, "conv_state", conv_state, n_ring, "[conv_dim, d_conv-1]"));
    MEMRA__TRY(in_f32(&v, "w", w, n_w, "[conv_dim, d_conv]"));
    MEMRA__TRY(out_f32(&v, "conv_out", conv_out, conv_dim, "[conv_dim]"));
    MEMRA__TRY(no_overlaps(&v));

    *out = (memra__conv_args){
        .qkv = qkv.ptr,
        .rings = NULL,
        .ring = n_ring > 0 ? conv_state.ptr : NULL,
        .w = w.ptr,
        .conv_out = conv_out.ptr,
        .conv_dim = conv_dim,
        .d_conv = d_conv,
        .t = 1,
        .b_n = 1,
    };
    return MEMRA_STATUS_OK;
}

MemraStatus memra__validate_scan_direct(const char *fn, MemraSliceF32 q, MemraSliceF32 k,
                                        MemraSliceF32 v_in, MemraSliceF32 g_log, MemraSliceF32 beta,
                                        MemraSliceF32 state_in, MemraSliceMutF32 state_out,
                                        MemraSliceMutF32 o, size_t num_v, size_t t, float scale,
                                        memra__scan_args *out)
{
    memra__vctx v = {.fn = fn};
    const char *act = "[t, num_v, 128]", *heads = "[t, num_v]", *shape = "[num_v, 128, 128]";
    size_t n_act = 0, n_heads = 0, n_state = 0;
    /* In place means the very same address; a partial overlap would have the scan read state
     * it has already overwritten, and is refused by the overlap check like any other. */
    const bool in_place = (const void *)state_in.ptr == (const void *)state_out.ptr;
    memra__scan_args s;

    MEMRA__TRY(nonzero(&v, "num_v", num_v));
    MEMRA__TRY(nonzero(&v, "t", t));
    MEMRA__TRY(finite_scalar(&v, "scale", scale));

    MEMRA__TRY(size_of(&v, act, &n_act, t, num_v, MEMRA_D_STATE, 1));
    MEMRA__TRY(size_of(&v, heads, &n_heads, t, num_v, 1, 1));
    MEMRA__TRY(size_of(&v, shape, &n_state, num_v, MEMRA_D_STATE, MEMRA_D_STATE, 1));

    MEMRA__TRY(scan_inputs(&v, q, k, v_in, g_log, beta, n_act, act, n_heads, heads, &s));
    if (in_place) {
        /* Checked as a view, but its extent is state_out's, recorded once (as the output). */
        memra__vctx alone = {.fn = fn};
        MEMRA__TRY(in_f32(&alone, "state_in", state_in, n_state, shape));
    } else {
        MEMRA__TRY(in_f32(&v, "state_in", state_in, n_state, shape));
    }
    MEMRA__TRY(out_f32(&v, "state_out", state_out, n_state, shape));
    MEMRA__TRY(out_f32(&v, "o", o, n_act, act));
    MEMRA__TRY(no_overlaps(&v));

    s.state_in = state_in.ptr;
    s.state_out = state_out.ptr;
    s.o = o.ptr;
    s.num_v = num_v;
    s.qk_heads = num_v;
    s.t = t;
    s.b_n = 1;
    s.scale = scale;
    *out = s;
    return MEMRA_STATUS_OK;
}

/* ---- 1.2: the state copies ---------------------------------------------------------------- */

MemraStatus memra__validate_copy_batch(const char *fn, MemraSliceU64 table, size_t n, size_t words,
                                       memra__copy_args *out)
{
    memra__vctx v = {.fn = fn};
    size_t n_table = 0, n_bytes = 0;

    MEMRA__TRY(nonzero(&v, "n", n));
    MEMRA__TRY(nonzero(&v, "words", words));
    MEMRA__TRY(size_of(&v, "the table [2, n]", &n_table, 2, n, 1, 1));
    /* Each copy moves words * 4 bytes; the device checks that none of them wraps. */
    MEMRA__TRY(
        size_of(&v, "the bytes of one copy (words * 4)", &n_bytes, words, sizeof(float), 1, 1));
    MEMRA__TRY(in_u64(&v, "table", table, n_table, "[2, n]: n sources, then n destinations"));

    *out = (memra__copy_args){
        .table = table.ptr,
        .items = n,
        .words = words,
        .op = MEMRA__OP_COPY_BATCH,
    };
    return MEMRA_STATUS_OK;
}

MemraStatus memra__validate_copy_indirect(const char *fn, MemraSliceU64 src_ptr,
                                          MemraSliceMutF32 dst, size_t dst_off, size_t n,
                                          memra__copy_args *out)
{
    memra__vctx v = {.fn = fn};
    memra__vctx whole = {.fn = fn};
    size_t n_dst = 0;

    MEMRA__TRY(nonzero(&v, "n", n));
    MEMRA__FAIL_IF(__builtin_add_overflow(dst_off, n, &n_dst), MEMRA_STATUS_INVALID_ARGUMENT, fn,
                   "parameter 'dst_off': dst_off + n = %zu + %zu overflows size_t", dst_off, n);
    MEMRA__TRY(in_u64(&v, "src_ptr", src_ptr, 1, "[1]: the source address"));
    /* The whole view is checked for length, alignment and wrap-around; only the part the copy
     * writes counts for the overlap check, so a table may sit in dst before dst_off. */
    MEMRA__TRY(out_f32(&whole, "dst", dst, n_dst, "dst_off + n"));
    v.r[v.n++] = (memra__range){"dst", whole.r[0].hi - n * sizeof(float), whole.r[0].hi, true};
    MEMRA__TRY(no_overlaps(&v));

    *out = (memra__copy_args){
        .table = src_ptr.ptr,
        .items = 1,
        .words = n,
        .dst = dst.ptr + dst_off,
        .op = MEMRA__OP_COPY_INDIRECT,
    };
    return MEMRA_STATUS_OK;
}
