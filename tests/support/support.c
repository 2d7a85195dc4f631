#include "support.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static tu_fail_fn tu_fail_handler;

void tu_set_fail_handler(tu_fail_fn fn)
{
    tu_fail_handler = fn;
}

void tu_fail(const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (tu_fail_handler != NULL)
        tu_fail_handler(msg);
    /* A handler that returned, or none: nothing may continue past a broken contract. */
    fprintf(stderr, "test support: %s\n", msg);
    abort();
}

MemraStatus tu_engine_try(MemraBackend backend, int32_t ordinal, MemraEngine **out)
{
    MemraEngineOptions opt;
    MemraStatus st = memra_engine_options_init(&opt);
    *out = NULL;
    if (st != MEMRA_STATUS_OK)
        return st;
    opt.backend = backend;
    opt.device_ordinal = ordinal;
    opt.flags = MEMRA_ENGINE_FLAG_IGNORE_ENV;
    return memra_engine_create(&opt, out);
}

MemraStatus tu_call_handles(tu_handle_call c, MemraEngine *e, MemraGraph *g)
{
    switch (c) {
    case TU_CALL_SYNCHRONIZE:
        return memra_engine_synchronize(e);
    case TU_CALL_GRAPH_LAUNCH:
        return memra_graph_launch(e, g);
    case TU_CALL_GRAPH_DESTROY:
        return memra_graph_destroy(e, g);
    case TU_CALL_ENGINE_DESTROY:
        return memra_engine_destroy(e);
    default:
        tu_fail("tu_call_handles: there is no call %d", (int)c);
    }
}

const char *tu_handle_call_name(tu_handle_call c)
{
    static const char *const names[TU_N_HANDLE_CALLS] = {
        [TU_CALL_SYNCHRONIZE] = "memra_engine_synchronize",
        [TU_CALL_GRAPH_LAUNCH] = "memra_graph_launch",
        [TU_CALL_GRAPH_DESTROY] = "memra_graph_destroy",
        [TU_CALL_ENGINE_DESTROY] = "memra_engine_destroy",
    };
    if ((unsigned)c >= TU_N_HANDLE_CALLS)
        tu_fail("tu_handle_call_name: there is no call %d", (int)c);
    return names[c];
}

uint64_t tu_xorshift64(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

void tu_varied(float *out, size_t len, uint64_t seed, float spread)
{
    uint64_t x = (seed * UINT64_C(0x9E3779B97F4A7C15)) | 1;
    for (size_t i = 0; i < len; i++) {
        const uint64_t r = tu_xorshift64(&x);
        out[i] = (float)((double)(r >> 11) / (double)(UINT64_C(1) << 53) * 2.0 - 1.0) * spread;
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

uint64_t tu_mix_seed(uint64_t base, uint64_t stream)
{
    uint64_t z = base + (stream + 1) * UINT64_C(0x9E3779B97F4A7C15);
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

void tu_poison_host(float *out, size_t len)
{
    const uint32_t bits = TU_POISON_BITS;
    for (size_t i = 0; i < len; i++)
        memcpy(&out[i], &bits, sizeof bits);
}

void tu_free_host_n(void *const *arrays, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(arrays[i]);
}

/* Whether [start, start + len) lies inside a buffer of `have` elements, without overflow. */
static void tu_check_range(size_t start, size_t len, size_t have, const char *fn)
{
    if (start > have || len > have - start)
        tu_fail("%s: elements [%zu, %zu + %zu) leave a buffer of %zu", fn, start, start, len, have);
}

/* The views and sub-ranges of each slice type: one definition each, the same check and the
 * same arithmetic for all. */
#define TU_DEFINE_VIEW(name, Out, In)                                                              \
    Out name(In s)                                                                                 \
    {                                                                                              \
        return (Out){s.ptr, s.len};                                                                \
    }
#define TU_DEFINE_SUB(name, Out, In)                                                               \
    Out name(In s, size_t start, size_t len)                                                       \
    {                                                                                              \
        tu_check_range(start, len, s.len, #name);                                                  \
        return (Out){s.ptr + start, len};                                                          \
    }

TU_DEFINE_VIEW(tu_view, MemraSliceF32, MemraSliceMutF32)
TU_DEFINE_VIEW(tu_view_u64, MemraSliceU64, MemraSliceMutU64)
TU_DEFINE_VIEW(tu_view_u32, MemraSliceU32, MemraSliceMutU32)
TU_DEFINE_SUB(tu_sub_mut, MemraSliceMutF32, MemraSliceMutF32)
TU_DEFINE_SUB(tu_sub_u64, MemraSliceU64, MemraSliceMutU64)

MemraSliceF32 tu_sub(MemraSliceMutF32 s, size_t start, size_t len)
{
    return tu_view(tu_sub_mut(s, start, len));
}

uint64_t tu_addr(MemraSliceMutF32 s)
{
    return (uint64_t)(uintptr_t)s.ptr;
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

size_t tu_first_diff(const float *a, const float *b, size_t len)
{
    if (len == 0 || memcmp(a, b, len * sizeof(float)) == 0)
        return len;
    size_t i = 0;
    while (memcmp(&a[i], &b[i], sizeof(float)) == 0)
        i++;
    return i;
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

uint64_t tu_fnv1a(const float *a, size_t len)
{
    if (a == NULL)
        return 0;
    uint64_t h = UINT64_C(14695981039346656037);
    const unsigned char *c = (const unsigned char *)a;
    for (size_t i = 0; i < len * sizeof(float); i++) {
        h ^= c[i];
        h *= UINT64_C(1099511628211);
    }
    return h;
}

void tu_record(tu_failure *f, const char *fmt, ...)
{
    if (f->failed)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->text, sizeof f->text, fmt, ap);
    va_end(ap);
    f->failed = true;
}

static bool tu_ident_char(char ch)
{
    return isalnum((unsigned char)ch) || ch == '_';
}

bool tu_has_word(const char *msg, const char *word)
{
    size_t n = strlen(word);
    if (n == 0)
        return false;
    for (const char *p = strstr(msg, word); p != NULL; p = strstr(p + 1, word)) {
        bool left = p == msg || !tu_ident_char(p[-1]) || !tu_ident_char(word[0]);
        bool right = !tu_ident_char(p[n]) || !tu_ident_char(word[n - 1]);
        if (left && right)
            return true;
    }
    return false;
}

bool tu_names_any(const char *msg, const char *alts)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", alts);
    for (char *save = NULL, *alt = strtok_r(buf, "|", &save); alt != NULL;
         alt = strtok_r(NULL, "|", &save))
        if (tu_has_word(msg, alt))
            return true;
    return false;
}

const tu_shape_def tu_shapes[TU_N_SHAPES] = {{"small", TU_SMALL_NUM_K, TU_SMALL_NUM_V},
                                             {"ornith", TU_ORNITH_NUM_K, TU_ORNITH_NUM_V}};

tu_gdn_shape tu_gdn_shape_make(size_t num_k, size_t num_v, size_t d_conv)
{
    tu_gdn_shape sh;
    sh.num_k = num_k;
    sh.num_v = num_v;
    sh.d_conv = d_conv;
    sh.key_dim = MEMRA_D_STATE * num_k;
    sh.value_dim = MEMRA_D_STATE * num_v;
    sh.conv_dim = 2 * sh.key_dim + sh.value_dim;
    sh.pad = d_conv - 1;
    sh.ring_words = sh.conv_dim * sh.pad;
    sh.state_words = (size_t)MEMRA_D_STATE * MEMRA_D_STATE * num_v;
    return sh;
}

MemraStatus tu_verify_args_sizes(MemraVerifyArgs *v, const tu_gdn_shape *sh, size_t t, size_t b,
                                 MemraVerifyMode mode, MemraHeadOrder order)
{
    MemraStatus st = memra_verify_args_init(v);
    if (st != MEMRA_STATUS_OK)
        return st;
    v->mode = mode;
    v->head_order = order;
    v->num_k = sh->num_k;
    v->num_v = sh->num_v;
    v->d_conv = sh->d_conv;
    v->t = t;
    v->b_n = b;
    v->eps = TU_GDN_EPS;
    v->scale = TU_GDN_SCALE;
    return MEMRA_STATUS_OK;
}

size_t tu_state_slot(size_t rows)
{
    return rows % 2 == 1 ? 2 : 1;
}

size_t tu_snap_index(size_t b, size_t t, size_t r)
{
    if (t == 0 || r + 1 >= t)
        tu_fail("tu_snap_index: %zu rows have no snapshot of row %zu", t, r);
    return b * (t - 1) + r;
}

const float *tu_state_after(const float *finals, const float *snaps, size_t words, size_t b,
                            size_t t, size_t n)
{
    if (n == 0 || n > t)
        tu_fail("tu_state_after: %zu of %zu rows", n, t);
    return n == t ? finals + b * words : snaps + tu_snap_index(b, t, n - 1) * words;
}

static uint32_t tu_bits(const float *a, size_t i)
{
    uint32_t u;
    memcpy(&u, a + i, sizeof u);
    return u;
}

bool tu_check_items(const tu_check_item *items, size_t n, const char *who, const char *against,
                    char *why, size_t why_len, size_t *compared)
{
    for (size_t k = 0; k < n; k++) {
        const tu_check_item *it = &items[k];
        size_t diffs = 0, first = 0;
        if (it->given) {
            if (it->len > 0 && memcmp(it->want, it->got, it->len * sizeof(float)) != 0) {
                diffs = tu_bit_diffs(it->got, it->want, it->len);
                first = tu_first_diff(it->got, it->want, it->len);
            }
        } else {
            for (size_t i = 0; i < it->len; i++)
                if (tu_bits(it->got, i) != TU_POISON_BITS && diffs++ == 0)
                    first = i;
        }
        if (diffs == 0) {
            if (compared != NULL && it->given)
                *compared += it->len;
            continue;
        }
        if (it->given)
            snprintf(why, why_len,
                     "%s: %s differs from %s in %zu of %zu words, the first at index %zu (got %a, "
                     "bits 0x%08x, want %a, bits 0x%08x)",
                     who, it->what, against, diffs, it->len, first, (double)it->got[first],
                     (unsigned)tu_bits(it->got, first), (double)it->want[first],
                     (unsigned)tu_bits(it->want, first));
        else
            snprintf(why, why_len,
                     "%s: %s was written although the call was not given it: %zu of %zu words "
                     "lost the poison, the first at index %zu (got %a, bits 0x%08x, want bits "
                     "0x%08x)",
                     who, it->what, diffs, it->len, first, (double)it->got[first],
                     (unsigned)tu_bits(it->got, first), (unsigned)TU_POISON_BITS);
        return false;
    }
    return true;
}
