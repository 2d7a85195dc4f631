/*
 * Engine and graph behaviour through the ABI: versions and status names, option defaults, how
 * the backend is chosen (options, MEMRA_BACKEND, MEMRA_ENGINE_FLAG_IGNORE_ENV, no silent CPU
 * fallback), and the graph-capture contract of memra_graph_capture(): the step runs exactly
 * three times, buffers it allocates live as long as the graph, forbidden calls inside it yield
 * CAPTURE_ERROR without harming the engine, and handles are refused where they do not belong.
 *
 * Every test runs in its own process (Criterion forks), so setenv() here cannot leak into
 * another test. "Usable afterwards" is always checked by running an operation and comparing its
 * result bit for bit with the same operation on a fresh engine of the same backend.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <dlfcn.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memra.h"
#include "testutil.h"

/* The probe operation: one per-row conv step on the smallest shape, d_conv 8 so that up to
 * seven successive rolls of one ring stay distinguishable. */
#define EG_CONV_DIM (3 * MEMRA_D_STATE)
#define EG_D_CONV 8
#define EG_RING (EG_CONV_DIM * (EG_D_CONV - 1))

typedef struct eg_inputs {
    float qkv[EG_CONV_DIM];
    float ring[EG_RING];
    float w[EG_CONV_DIM * EG_D_CONV];
    uint64_t seed;
} eg_inputs;

static void eg_inputs_make(eg_inputs *in)
{
    in->seed = tu_fresh_seed();
    tu_varied(in->qkv, EG_CONV_DIM, tu_mix_seed(in->seed, 0), 1.0f);
    tu_varied(in->ring, EG_RING, tu_mix_seed(in->seed, 1), 1.0f);
    tu_varied(in->w, EG_CONV_DIM * EG_D_CONV, tu_mix_seed(in->seed, 2), 0.5f);
}

/* The probe's device side: inputs, a one-entry ring table, the output. */
typedef struct eg_probe {
    MemraSliceMutF32 qkv, w, ring, conv_out;
    MemraSliceMutU64 table;
} eg_probe;

static eg_probe eg_probe_make(MemraEngine *e, const eg_inputs *in)
{
    eg_probe p;
    p.qkv = tu_upload(e, in->qkv, EG_CONV_DIM);
    p.w = tu_upload(e, in->w, EG_CONV_DIM * EG_D_CONV);
    p.ring = tu_upload(e, in->ring, EG_RING);
    p.conv_out = tu_poisoned(e, EG_CONV_DIM);
    const uint64_t addr = tu_addr(p.ring);
    p.table = tu_upload_u64(e, &addr, 1);
    return p;
}

static MemraStatus eg_probe_step(MemraEngine *e, const eg_probe *p)
{
    return memra_ssm_conv1d_fused_decode_b_view(e, tu_view(p->qkv), tu_view_u64(p->table),
                                                tu_view(p->w), p->conv_out, EG_CONV_DIM, EG_D_CONV,
                                                1);
}

static void eg_probe_free(MemraEngine *e, const eg_probe *p)
{
    tu_free(e, p->qkv.ptr);
    tu_free(e, p->w.ptr);
    tu_free(e, p->ring.ptr);
    tu_free(e, p->conv_out.ptr);
    tu_free(e, p->table.ptr);
}

/* The ring after `rolls` probe steps, and the last step's output, on engine `e`. */
static void eg_probe_rolls(MemraEngine *e, const eg_inputs *in, int rolls, float *ring,
                           float *conv_out)
{
    eg_probe p = eg_probe_make(e, in);
    for (int i = 0; i < rolls; i++)
        TU_OK(eg_probe_step(e, &p));
    tu_download_into(e, tu_view(p.ring), ring);
    if (conv_out)
        tu_download_into(e, tu_view(p.conv_out), conv_out);
    eg_probe_free(e, &p);
}

/* Fails the test unless the probe's ring on `e` holds the bits `rolls` probe steps leave on a
 * fresh engine of `backend`. */
static void eg_expect_ring(MemraEngine *e, MemraBackend backend, const eg_probe *p,
                           const eg_inputs *in, int rolls, const char *what)
{
    static float ring[EG_RING], want[EG_RING];
    tu_download_into(e, tu_view(p->ring), ring);
    MemraEngine *ref = tu_engine(backend);
    eg_probe_rolls(ref, in, rolls, want, NULL);
    TU_OK(memra_engine_destroy(ref));
    tu_expect_bits(ring, want, EG_RING, "%s (" TU_SEED_FMT ")", what, in->seed);
}

/* Runs one probe step on `e` and requires the bits a fresh engine of `backend` produces. */
static void eg_expect_usable(MemraEngine *e, MemraBackend backend, const char *after)
{
    eg_inputs in;
    eg_inputs_make(&in);
    static float ring[EG_RING], out[EG_CONV_DIM], fresh_ring[EG_RING], fresh_out[EG_CONV_DIM];
    TU_OK(memra_engine_synchronize(e));
    eg_probe_rolls(e, &in, 1, ring, out);
    MemraEngine *fresh = tu_engine(backend);
    eg_probe_rolls(fresh, &in, 1, fresh_ring, fresh_out);
    TU_OK(memra_engine_destroy(fresh));
    cr_assert_eq(tu_bit_diffs(out, fresh_out, EG_CONV_DIM), 0,
                 "after %s the engine's conv output differs from a fresh engine's (" TU_SEED_FMT
                 ")",
                 after, in.seed);
    cr_assert_eq(tu_bit_diffs(ring, fresh_ring, EG_RING), 0,
                 "after %s the engine's rolled ring differs from a fresh engine's (" TU_SEED_FMT
                 ")",
                 after, in.seed);
}

/* ---- versions, status names, options ---------------------------------------------------- */

Test(engine, abi_version_matches_header)
{
    const uint32_t v = memra_abi_version();
    cr_assert_eq(v, (uint32_t)MEMRA_ABI_VERSION, "memra_abi_version() = 0x%08x, header 0x%08x", v,
                 (unsigned)MEMRA_ABI_VERSION);
    cr_assert_eq(v >> 16, (uint32_t)MEMRA_VERSION_MAJOR);
    cr_assert_eq(v & 0xffffu, (uint32_t)MEMRA_VERSION_MINOR);
}

Test(engine, version_string_matches_header)
{
    const char *s = memra_version_string();
    cr_assert_not_null(s);
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", MEMRA_VERSION_MAJOR, MEMRA_VERSION_MINOR,
             MEMRA_VERSION_PATCH);
    cr_assert_str_eq(s, want);
    cr_assert_eq(memra_version_string(), s, "the version string is not one static string");
}

Test(engine, status_string_names_every_code)
{
    static const struct {
        MemraStatus code;
        const char *name;
    } codes[] = {
        {MEMRA_STATUS_OK, "MEMRA_STATUS_OK"},
        {MEMRA_STATUS_INVALID_ARGUMENT, "MEMRA_STATUS_INVALID_ARGUMENT"},
        {MEMRA_STATUS_UNSUPPORTED, "MEMRA_STATUS_UNSUPPORTED"},
        {MEMRA_STATUS_OUT_OF_MEMORY, "MEMRA_STATUS_OUT_OF_MEMORY"},
        {MEMRA_STATUS_NO_DEVICE, "MEMRA_STATUS_NO_DEVICE"},
        {MEMRA_STATUS_DEVICE_ERROR, "MEMRA_STATUS_DEVICE_ERROR"},
        {MEMRA_STATUS_CAPTURE_ERROR, "MEMRA_STATUS_CAPTURE_ERROR"},
        {MEMRA_STATUS_ABI_MISMATCH, "MEMRA_STATUS_ABI_MISMATCH"},
        {MEMRA_STATUS_INTERNAL, "MEMRA_STATUS_INTERNAL"},
    };
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        /* The values are fixed forever (docs/abi.md). */
        cr_assert_eq(codes[i].code, (MemraStatus)i);
        const char *s = memra_status_string(codes[i].code);
        cr_assert_not_null(s);
        cr_assert_str_eq(s, codes[i].name);
    }
}

Test(engine, status_string_of_unknown_code)
{
    const MemraStatus unknown[] = {MEMRA_STATUS_INTERNAL + 1, 1000, UINT32_MAX};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        const char *s = memra_status_string(unknown[i]);
        cr_assert_not_null(s);
        cr_assert_str_eq(s, "MEMRA_STATUS_<unknown>", "code %u", (unsigned)unknown[i]);
    }
}

Test(engine, last_error_message_empty_until_a_failure)
{
    const char *m = memra_last_error_message();
    cr_assert_not_null(m);
    cr_assert_str_eq(m, "", "a fresh thread already has a message: %s", m);
    cr_assert_eq(memra_engine_options_init(NULL), MEMRA_STATUS_INVALID_ARGUMENT);
    m = memra_last_error_message();
    cr_assert_not_null(m);
    cr_assert(strstr(m, "memra_engine_options_init") != NULL,
              "the message does not name the function: %s", m);
    /* A successful call leaves the message alone. */
    char kept[512];
    snprintf(kept, sizeof kept, "%s", m);
    MemraEngineOptions opt;
    TU_OK(memra_engine_options_init(&opt));
    cr_assert_str_eq(memra_last_error_message(), kept);
}

Test(engine, options_init_defaults)
{
    MemraEngineOptions opt;
    memset(&opt, 0xa5, sizeof opt);
    TU_OK(memra_engine_options_init(&opt));
    cr_assert_eq(opt.struct_size, sizeof(MemraEngineOptions));
    cr_assert_eq(opt.backend, MEMRA_BACKEND_AUTO);
    cr_assert_eq(opt.device_ordinal, 0);
    cr_assert_null(opt.stream);
    cr_assert_eq(opt.flags, 0);
    cr_assert_eq(memra_engine_options_init(NULL), MEMRA_STATUS_INVALID_ARGUMENT);
}

/* ---- choosing the backend ----------------------------------------------------------------- */

/* Creates an engine from `opt` (NULL for the defaults); returns the status and stores the
 * engine's backend when it was created (destroying it again). */
static MemraStatus eg_create_backend(const MemraEngineOptions *opt, MemraBackend *backend)
{
    MemraEngine *sentinel = (MemraEngine *)(uintptr_t)0x5a5a5a50;
    MemraEngine *e = sentinel;
    MemraStatus st = memra_engine_create(opt, &e);
    if (st != MEMRA_STATUS_OK) {
        cr_assert_eq(e, sentinel, "a failed memra_engine_create wrote *out_engine");
        return st;
    }
    cr_assert_not_null(e);
    TU_OK(memra_engine_backend(e, backend));
    TU_OK(memra_engine_destroy(e));
    return st;
}

static MemraEngineOptions eg_options(MemraBackend backend, uint64_t flags)
{
    MemraEngineOptions opt;
    cr_assert_eq(memra_engine_options_init(&opt), MEMRA_STATUS_OK);
    opt.backend = backend;
    opt.flags = flags;
    return opt;
}

/* Whether this machine has a usable CUDA device, asked the way a host would. */
static bool eg_have_cuda(void)
{
    MemraEngineOptions opt = eg_options(MEMRA_BACKEND_CUDA, MEMRA_ENGINE_FLAG_IGNORE_ENV);
    MemraEngine *e = NULL;
    MemraStatus st = memra_engine_create(&opt, &e);
    if (st == MEMRA_STATUS_OK) {
        TU_OK(memra_engine_destroy(e));
        return true;
    }
    cr_assert_eq(st, MEMRA_STATUS_NO_DEVICE, "explicit CUDA failed with %s, not NO_DEVICE: %s",
                 memra_status_string(st), memra_last_error_message());
    return false;
}

Test(engine, env_cpu_selects_cpu)
{
    cr_assert_eq(setenv("MEMRA_BACKEND", "cpu", 1), 0);
    MemraBackend b = MEMRA_BACKEND_AUTO;
    TU_OK(eg_create_backend(NULL, &b));
    cr_assert_eq(b, MEMRA_BACKEND_CPU, "MEMRA_BACKEND=cpu with NULL options gave backend %u", b);
    MemraEngineOptions opt = eg_options(MEMRA_BACKEND_AUTO, 0);
    b = MEMRA_BACKEND_AUTO;
    TU_OK(eg_create_backend(&opt, &b));
    cr_assert_eq(b, MEMRA_BACKEND_CPU, "MEMRA_BACKEND=cpu with AUTO gave backend %u", b);
}

Test(engine, env_auto_is_auto)
{
    const bool cuda = eg_have_cuda();
    cr_assert_eq(setenv("MEMRA_BACKEND", "auto", 1), 0);
    MemraBackend b = MEMRA_BACKEND_AUTO;
    TU_OK(eg_create_backend(NULL, &b));
    cr_assert_eq(b, cuda ? MEMRA_BACKEND_CUDA : MEMRA_BACKEND_CPU,
                 "MEMRA_BACKEND=auto gave backend %u with%s a CUDA device", b, cuda ? "" : "out");
}

Test(engine, auto_without_env_takes_cuda_when_present_else_cpu)
{
    const bool cuda = eg_have_cuda();
    cr_assert_eq(unsetenv("MEMRA_BACKEND"), 0);
    MemraBackend b = MEMRA_BACKEND_AUTO;
    TU_OK(eg_create_backend(NULL, &b));
    cr_assert_eq(b, cuda ? MEMRA_BACKEND_CUDA : MEMRA_BACKEND_CPU);
    MemraEngineOptions opt = eg_options(MEMRA_BACKEND_AUTO, MEMRA_ENGINE_FLAG_IGNORE_ENV);
    b = MEMRA_BACKEND_AUTO;
    TU_OK(eg_create_backend(&opt, &b));
    cr_assert_eq(b, cuda ? MEMRA_BACKEND_CUDA : MEMRA_BACKEND_CPU);
}

Test(engine, env_invalid_value_refused)
{
    static const char *const bad[] = {"gpu", "cpux", "cud", "1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(setenv("MEMRA_BACKEND", bad[i], 1), 0);
        MemraBackend b = MEMRA_BACKEND_AUTO;
        MemraStatus st = eg_create_backend(NULL, &b);
        cr_assert_eq(st, MEMRA_STATUS_INVALID_ARGUMENT,
                     "MEMRA_BACKEND='%s' gave %s (backend %u), not INVALID_ARGUMENT", bad[i],
                     memra_status_string(st), b);
        cr_assert(strstr(memra_last_error_message(), "MEMRA_BACKEND") != NULL,
                  "the message does not name MEMRA_BACKEND: %s", memra_last_error_message());
        MemraEngineOptions opt = eg_options(MEMRA_BACKEND_AUTO, 0);
        cr_assert_eq(eg_create_backend(&opt, &b), MEMRA_STATUS_INVALID_ARGUMENT,
                     "MEMRA_BACKEND='%s' with AUTO options was not refused", bad[i]);
    }
}

Test(engine, ignore_env_flag_ignores_the_variable)
{
    const bool cuda = eg_have_cuda();
    static const char *const values[] = {"gpu", "cpu", "cuda"};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        cr_assert_eq(setenv("MEMRA_BACKEND", values[i], 1), 0);
        MemraEngineOptions opt = eg_options(MEMRA_BACKEND_AUTO, MEMRA_ENGINE_FLAG_IGNORE_ENV);
        MemraBackend b = MEMRA_BACKEND_AUTO;
        MemraStatus st = eg_create_backend(&opt, &b);
        cr_assert_eq(st, MEMRA_STATUS_OK, "IGNORE_ENV with MEMRA_BACKEND='%s' gave %s: %s",
                     values[i], memra_status_string(st), memra_last_error_message());
        cr_assert_eq(b, cuda ? MEMRA_BACKEND_CUDA : MEMRA_BACKEND_CPU,
                     "IGNORE_ENV with MEMRA_BACKEND='%s' gave backend %u", values[i], b);
    }
}

Test(engine, env_does_not_override_an_explicit_backend)
{
    cr_assert_eq(setenv("MEMRA_BACKEND", "cuda", 1), 0);
    MemraEngineOptions opt = eg_options(MEMRA_BACKEND_CPU, 0);
    MemraBackend b = MEMRA_BACKEND_AUTO;
    TU_OK(eg_create_backend(&opt, &b));
    cr_assert_eq(b, MEMRA_BACKEND_CPU, "explicit CPU became backend %u under MEMRA_BACKEND=cuda",
                 b);
}

Test(engine, env_cuda_never_falls_back_to_cpu)
{
    const bool cuda = eg_have_cuda();
    cr_assert_eq(setenv("MEMRA_BACKEND", "cuda", 1), 0);
    MemraBackend b = MEMRA_BACKEND_AUTO;
    MemraStatus st = eg_create_backend(NULL, &b);
    if (cuda) {
        cr_assert_eq(st, MEMRA_STATUS_OK, "%s", memra_last_error_message());
        cr_assert_eq(b, MEMRA_BACKEND_CUDA);
    } else {
        cr_assert_eq(st, MEMRA_STATUS_NO_DEVICE,
                     "MEMRA_BACKEND=cuda without a device gave %s (backend %u), not NO_DEVICE",
                     memra_status_string(st), b);
    }
}

Test(engine, explicit_cuda_without_device_is_no_device)
{
    /* Every test runs in a process of its own, and the library touches CUDA only when a CUDA
     * engine is created: hiding every device here (an invalid index ends the visible list)
     * makes this process a machine without one, also where a GPU is present. */
    cr_assert_eq(setenv("CUDA_VISIBLE_DEVICES", "-1", 1), 0);
    MemraEngineOptions opt = eg_options(MEMRA_BACKEND_CUDA, 0);
    MemraBackend b = MEMRA_BACKEND_AUTO;
    MemraStatus st = eg_create_backend(&opt, &b);
    cr_assert_eq(st, MEMRA_STATUS_NO_DEVICE, "explicit CUDA gave %s (backend %u)",
                 memra_status_string(st), b);
    cr_assert_neq(memra_last_error_message()[0], '\0', "NO_DEVICE came without a message");
    /* Not through the environment either. */
    cr_assert_eq(setenv("MEMRA_BACKEND", "cpu", 1), 0);
    cr_assert_eq(eg_create_backend(&opt, &b), MEMRA_STATUS_NO_DEVICE,
                 "explicit CUDA under MEMRA_BACKEND=cpu did not stay CUDA");
}

/* The message of an explicit CUDA engine's NO_DEVICE, with MEMRA_CUDA_SIMULATE_INIT_ERROR set
 * to `simulate` (NULL: the machine's own cause), or NULL when the library has no CUDA backend
 * to ask. */
static const char *eg_no_device_message(const char *simulate)
{
    if (simulate != NULL)
        cr_assert_eq(setenv("MEMRA_CUDA_SIMULATE_INIT_ERROR", simulate, 1), 0);
    MemraEngineOptions opt = eg_options(MEMRA_BACKEND_CUDA, 0);
    MemraBackend b = MEMRA_BACKEND_AUTO;
    MemraStatus st = eg_create_backend(&opt, &b);
    if (st == MEMRA_STATUS_NO_DEVICE && strstr(memra_last_error_message(), "without CUDA"))
        return NULL;
    cr_assert_eq(st, MEMRA_STATUS_NO_DEVICE, "CUDA engine with %s gave %s (backend %u)",
                 simulate ? simulate : "no device", memra_status_string(st), b);
    return memra_last_error_message();
}

/* Every piece of `want` (NULL-terminated) is in the message. */
static void eg_message_has(const char *msg, const char *const *want)
{
    for (size_t i = 0; want[i] != NULL; i++)
        cr_expect_not_null(strstr(msg, want[i]), "the message lacks '%s': %s", want[i], msg);
}

typedef struct eg_cause {
    const char *simulate; /* MEMRA_CUDA_SIMULATE_INIT_ERROR */
    const char *want[5];  /* what the message must say: the cause and what to do */
} eg_cause;

/* cudaErrorInsufficientDriver is 35, cudaErrorDevicesUnavailable 46, cudaErrorNoDevice 100,
 * cudaErrorSystemDriverMismatch 803 (the runtime's numbering, which does not change). */
static const eg_cause eg_causes[] = {
    {"35,no-driver",
     {"no NVIDIA driver is installed", "libcuda.so.1 cannot be loaded", "install the NVIDIA driver",
      "MEMRA_BACKEND=cpu", NULL}},
    {"100,no-driver", {"no NVIDIA driver is installed", "install the NVIDIA driver", NULL}},
    {"35,driver",
     {"the NVIDIA driver is too old for the CUDA", "install a driver for CUDA",
      "cudaErrorInsufficientDriver", NULL}},
    {"100,driver", {"reports no CUDA device", "nvidia-smi", "MEMRA_BACKEND=cpu", NULL}},
    {"46,driver",
     {"busy or unavailable", "EXCLUSIVE_PROCESS", "nvidia-smi -q -d COMPUTE", "device_ordinal",
      NULL}},
    {"803,driver", {"different versions", "reboot", NULL}},
};

/* One process for every cause: the library reads the variable at every engine creation. */
Test(engine, no_device_message_names_the_cause)
{
    cr_assert_eq(unsetenv("CUDA_VISIBLE_DEVICES"), 0);
    for (size_t i = 0; i < sizeof eg_causes / sizeof eg_causes[0]; i++) {
        const eg_cause *c = &eg_causes[i];
        const char *msg = eg_no_device_message(c->simulate);
        if (msg == NULL)
            cr_skip_test("libmemra was built without CUDA");
        eg_message_has(msg, c->want);
        /* AUTO takes the CPU instead, whatever the cause. */
        MemraEngineOptions opt = eg_options(MEMRA_BACKEND_AUTO, MEMRA_ENGINE_FLAG_IGNORE_ENV);
        MemraBackend b = MEMRA_BACKEND_AUTO;
        TU_OK(eg_create_backend(&opt, &b));
        cr_assert_eq(b, MEMRA_BACKEND_CPU, "AUTO with %s gave backend %u", c->simulate, b);
    }
}

Test(engine, no_device_message_names_hidden_devices)
{
    cr_assert_eq(setenv("CUDA_VISIBLE_DEVICES", "-1", 1), 0);
    const char *msg = eg_no_device_message("100,driver");
    if (msg == NULL)
        cr_skip_test("libmemra was built without CUDA");
    eg_message_has(msg, (const char *const[]){"CUDA_VISIBLE_DEVICES='-1'", "unset it", NULL});
}

/* Not simulated: the cause this machine really has. Without a loadable driver library that is
 * "no driver", never the runtime's "driver version is insufficient" alone. */
Test(engine, no_device_message_of_this_machine)
{
    cr_assert_eq(setenv("CUDA_VISIBLE_DEVICES", "-1", 1), 0);
    const char *msg = eg_no_device_message(NULL);
    if (msg == NULL)
        cr_skip_test("libmemra was built without CUDA");
    void *driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (driver == NULL) {
        eg_message_has(msg, (const char *const[]){"no NVIDIA driver is installed",
                                                  "install the NVIDIA driver", NULL});
    } else {
        dlclose(driver);
        eg_message_has(msg, (const char *const[]){"reports no CUDA device",
                                                  "CUDA_VISIBLE_DEVICES='-1'", NULL});
    }
}

Test(engine, backend_reports_cpu)
{
    MemraEngine *e = tu_engine(MEMRA_BACKEND_CPU);
    MemraBackend b = MEMRA_BACKEND_AUTO;
    TU_OK(memra_engine_backend(e, &b));
    cr_assert_eq(b, MEMRA_BACKEND_CPU);
    cr_assert_eq(memra_engine_backend(e, NULL), MEMRA_STATUS_INVALID_ARGUMENT);
    cr_assert_eq(memra_engine_backend(NULL, &b), MEMRA_STATUS_INVALID_ARGUMENT);
    TU_OK(memra_engine_destroy(e));
}

Test(engine, backend_reports_cuda)
{
    MemraEngine *e = tu_engine(MEMRA_BACKEND_CUDA);
    MemraBackend b = MEMRA_BACKEND_AUTO;
    TU_OK(memra_engine_backend(e, &b));
    cr_assert_eq(b, MEMRA_BACKEND_CUDA);
    void *stream = NULL;
    TU_OK(memra_engine_stream(e, &stream));
    cr_assert_not_null(stream, "a CUDA engine has no stream");
    TU_OK(memra_engine_destroy(e));
}

Test(engine, cpu_engine_stream_is_null)
{
    MemraEngine *e = tu_engine(MEMRA_BACKEND_CPU);
    void *stream = (void *)(uintptr_t)0x1234;
    TU_OK(memra_engine_stream(e, &stream));
    cr_assert_null(stream);
    cr_assert_eq(memra_engine_stream(e, NULL), MEMRA_STATUS_INVALID_ARGUMENT);
    TU_OK(memra_engine_destroy(e));
}

Test(engine, cpu_engine_refuses_a_stream)
{
    MemraEngineOptions opt = eg_options(MEMRA_BACKEND_CPU, 0);
    int dummy;
    opt.stream = &dummy;
    MemraBackend b = MEMRA_BACKEND_AUTO;
    cr_assert_eq(eg_create_backend(&opt, &b), MEMRA_STATUS_INVALID_ARGUMENT,
                 "a CPU engine accepted a stream");
}

Test(engine, destroy_null_is_ok)
{
    TU_OK(memra_engine_destroy(NULL));
}

/* ---- graphs ------------------------------------------------------------------------------- */

static MemraStatus eg_inner_step(MemraEngine *e, void *user)
{
    return eg_probe_step(e, user);
}

/* A step that rolls the probe's ring once and counts its calls (capture with tu_counted_step
 * and &counted). The probe is not copied after this: `counted` holds its address. */
typedef struct eg_count {
    eg_probe probe;
    tu_counted counted;
} eg_count;

static void eg_count_make(MemraEngine *e, const eg_inputs *in, eg_count *c)
{
    c->probe = eg_probe_make(e, in);
    c->counted = (tu_counted){eg_inner_step, &c->probe, 0};
}

/*
 * memra_graph_capture() calls the step three times: two warm-ups whose operations run, then the
 * captured call whose operations only record. Launching replays the recording without calling
 * the step. d_conv 8 makes the number of rolls visible in the ring.
 */
static void eg_check_capture_calls(MemraBackend backend)
{
    MemraEngine *e = tu_engine(backend);
    eg_inputs in;
    eg_inputs_make(&in);
    eg_count c;
    eg_count_make(e, &in, &c);
    MemraGraph *g = NULL;
    TU_OK(memra_graph_capture(e, tu_counted_step, &c.counted, &g));
    cr_assert_not_null(g);
    cr_assert_eq(c.counted.calls, 3, "the step was called %d times, not 3", c.counted.calls);

    MemraEngine *ref = tu_engine(backend);
    static float ring[EG_RING], want[EG_RING], out[EG_CONV_DIM], want_out[EG_CONV_DIM];
    for (int rolls = 2; rolls <= 4; rolls++) {
        if (rolls > 2)
            TU_OK(memra_graph_launch(e, g));
        tu_download_into(e, tu_view(c.probe.ring), ring);
        tu_download_into(e, tu_view(c.probe.conv_out), out);
        eg_probe_rolls(ref, &in, rolls, want, want_out);
        cr_assert_eq(tu_bit_diffs(ring, want, EG_RING), 0,
                     "after capture and %d launch(es) the ring is not the ring after %d rolls "
                     "(" TU_SEED_FMT ")",
                     rolls - 2, rolls, in.seed);
        cr_assert_eq(tu_bit_diffs(out, want_out, EG_CONV_DIM), 0,
                     "after capture and %d launch(es) conv_out is not roll %d's (" TU_SEED_FMT ")",
                     rolls - 2, rolls, in.seed);
    }
    cr_assert_eq(c.counted.calls, 3, "launching the graph called the step");
    TU_OK(memra_graph_destroy(e, g));
    TU_OK(memra_engine_destroy(ref));
    TU_OK(memra_engine_destroy(e));
}

TU_TEST_BACKENDS(graph, step_runs_three_times, eg_check_capture_calls)

/*
 * A verify step (small shape, T = 3) whose scratch buffers are allocated inside the step and
 * freed at its end. The graph must keep them alive: after the capture the test fills fresh
 * allocations of the same sizes with poison (memory the scratch would be reused for if it had
 * been released), rebinds the table, and replays; the results must equal an eager run on a
 * fresh engine bit for bit. After memra_graph_destroy() the scratch is gone.
 */
#define EG_NK 2
#define EG_NV 4
#define EG_T 3
#define EG_KD (MEMRA_D_STATE * EG_NK)
#define EG_VD (MEMRA_D_STATE * EG_NV)
#define EG_CD (2 * EG_KD + EG_VD)
#define EG_DC 4
#define EG_RW (EG_CD * (EG_DC - 1))
#define EG_SW (MEMRA_D_STATE * MEMRA_D_STATE * EG_NV)
#define EG_N_SCRATCH 6

typedef struct eg_verify_host {
    float qkv[EG_T * EG_CD], beta_raw[EG_T * EG_NV], alpha[EG_T * EG_NV];
    float w[EG_CD * EG_DC], dt_bias[EG_NV], a[EG_NV];
    float ring[EG_RW], state[EG_SW];
    uint64_t seed;
} eg_verify_host;

typedef struct eg_verify {
    MemraSliceMutF32 qkv, beta_raw, alpha, w, dt_bias, a, o_all;
    MemraSliceMutU64 table;
    /* Every scratch address the step allocated (three calls) and the status of its frees. */
    void *scratch[3][EG_N_SCRATCH];
    MemraStatus free_status[3][EG_N_SCRATCH];
    int calls;
} eg_verify;

static const size_t eg_scratch_len[EG_N_SCRATCH] = {
    EG_T * EG_CD, EG_T *EG_VD, EG_T *EG_VD, EG_T *EG_VD, EG_T *EG_NV, EG_T *EG_NV,
};

static MemraStatus eg_verify_step(MemraEngine *e, void *user)
{
    eg_verify *v = user;
    const int call = v->calls++;
    MemraSliceMutF32 s[EG_N_SCRATCH];
    for (int i = 0; i < EG_N_SCRATCH; i++) {
        MemraStatus st = memra_alloc_f32(e, eg_scratch_len[i], MEMRA_ALLOC_INIT_UNINIT, &s[i]);
        if (st != MEMRA_STATUS_OK)
            return st;
        if (call < 3)
            v->scratch[call][i] = s[i].ptr;
    }
    const MemraSliceMutF32 none = {NULL, 0};
    MemraStatus st =
        memra_ssm_conv1d_fused_decode_tloop(e, tu_view(v->qkv), tu_view_u64(v->table),
                                            tu_view(v->w), s[0], none, EG_CD, EG_DC, EG_T, 1);
    if (st != MEMRA_STATUS_OK)
        return st;
    st = memra_gdn_prep_decode_b(e, tu_view(s[0]), tu_view(v->beta_raw), tu_view(v->alpha),
                                 tu_view(v->dt_bias), tu_view(v->a), s[1], s[2], s[3], s[4], s[5],
                                 MEMRA_D_STATE, EG_NV, EG_NK, EG_KD, 1e-6f, EG_CD, EG_T);
    if (st != MEMRA_STATUS_OK)
        return st;
    st = memra_gdn_scan_s128_tsnap(e, tu_view(s[1]), tu_view(s[2]), tu_view(s[3]), tu_view(s[5]),
                                   tu_view(s[4]), tu_view_u64(v->table), v->o_all, EG_NV, EG_T, 1,
                                   1.0f / sqrtf((float)MEMRA_D_STATE), none);
    if (st != MEMRA_STATUS_OK)
        return st;
    for (int i = 0; i < EG_N_SCRATCH; i++) {
        st = memra_free(e, s[i].ptr);
        if (call < 3)
            v->free_status[call][i] = st;
    }
    return MEMRA_STATUS_OK;
}

static void eg_verify_host_make(eg_verify_host *h)
{
    h->seed = tu_fresh_seed();
    tu_varied(h->qkv, EG_T * EG_CD, tu_mix_seed(h->seed, 0), 1.0f);
    tu_varied(h->beta_raw, EG_T * EG_NV, tu_mix_seed(h->seed, 1), 2.0f);
    tu_varied(h->alpha, EG_T * EG_NV, tu_mix_seed(h->seed, 2), 2.0f);
    tu_varied(h->w, EG_CD * EG_DC, tu_mix_seed(h->seed, 3), 0.5f);
    tu_varied(h->dt_bias, EG_NV, tu_mix_seed(h->seed, 4), 0.5f);
    tu_varied(h->a, EG_NV, tu_mix_seed(h->seed, 5), 1.0f);
    tu_varied(h->ring, EG_RW, tu_mix_seed(h->seed, 6), 1.0f);
    tu_varied(h->state, EG_SW, tu_mix_seed(h->seed, 7), 0.3f);
}

static eg_verify eg_verify_make(MemraEngine *e, const eg_verify_host *h)
{
    eg_verify v;
    memset(&v, 0, sizeof v);
    v.qkv = tu_upload(e, h->qkv, EG_T * EG_CD);
    v.beta_raw = tu_upload(e, h->beta_raw, EG_T * EG_NV);
    v.alpha = tu_upload(e, h->alpha, EG_T * EG_NV);
    v.w = tu_upload(e, h->w, EG_CD * EG_DC);
    v.dt_bias = tu_upload(e, h->dt_bias, EG_NV);
    v.a = tu_upload(e, h->a, EG_NV);
    v.o_all = tu_poisoned(e, EG_T * EG_VD);
    uint64_t zero_table[3] = {0, 0, 0};
    v.table = tu_upload_u64(e, zero_table, 3);
    return v;
}

/* Fresh ring, canonical and alternate buffers from the host inputs, bound into the table. */
static void eg_verify_bind(MemraEngine *e, const eg_verify *v, const eg_verify_host *h,
                           MemraSliceMutF32 bufs[3])
{
    bufs[0] = tu_upload(e, h->ring, EG_RW);
    bufs[1] = tu_upload(e, h->state, EG_SW);
    bufs[2] = tu_poisoned(e, EG_SW);
    const uint64_t t[3] = {tu_addr(bufs[0]), tu_addr(bufs[1]), tu_addr(bufs[2])};
    MemraSliceU64 src = {t, 3};
    TU_OK(memra_htod_u64_into(e, src, v->table));
}

/* o_all, the final state (alternate: T is odd) and the final ring. */
static void eg_verify_collect(MemraEngine *e, const eg_verify *v, MemraSliceMutF32 bufs[3],
                              float *o, float *state, float *ring)
{
    tu_download_into(e, tu_view(v->o_all), o);
    tu_download_into(e, tu_view(bufs[2]), state);
    tu_download_into(e, tu_view(bufs[0]), ring);
}

static void eg_check_scratch_retained(MemraBackend backend)
{
    static eg_verify_host h;
    eg_verify_host_make(&h);
    static float o[EG_T * EG_VD], state[EG_SW], ring[EG_RW];
    static float want_o[EG_T * EG_VD], want_state[EG_SW], want_ring[EG_RW];

    /* The expected bits: one eager step on a fresh engine. */
    MemraEngine *ref = tu_engine(backend);
    eg_verify rv = eg_verify_make(ref, &h);
    MemraSliceMutF32 rb[3];
    eg_verify_bind(ref, &rv, &h, rb);
    TU_OK(eg_verify_step(ref, &rv));
    eg_verify_collect(ref, &rv, rb, want_o, want_state, want_ring);
    TU_OK(memra_engine_destroy(ref));

    MemraEngine *e = tu_engine(backend);
    eg_verify v = eg_verify_make(e, &h);
    MemraSliceMutF32 cap[3];
    eg_verify_bind(e, &v, &h, cap);
    MemraGraph *g = NULL;
    TU_OK(memra_graph_capture(e, eg_verify_step, &v, &g));
    cr_assert_eq(v.calls, 3);
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < EG_N_SCRATCH; i++)
            cr_assert_eq(v.free_status[c][i], MEMRA_STATUS_OK,
                         "memra_free of a scratch buffer inside the step (call %d) gave %s", c + 1,
                         memra_status_string(v.free_status[c][i]));

    /* Squatters: whatever memory a released scratch buffer would have gone back to. A replay
     * writing its scratch must not reach them. */
    MemraSliceMutF32 squatters[3 * EG_N_SCRATCH];
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < EG_N_SCRATCH; i++)
            squatters[c * EG_N_SCRATCH + i] = tu_poisoned(e, eg_scratch_len[i]);

    for (int replay = 0; replay < 2; replay++) {
        MemraSliceMutF32 bufs[3];
        eg_verify_bind(e, &v, &h, bufs);
        tu_poison(e, v.o_all);
        TU_OK(memra_graph_launch(e, g));
        eg_verify_collect(e, &v, bufs, o, state, ring);
        cr_assert_eq(tu_bit_diffs(o, want_o, EG_T * EG_VD), 0,
                     "replay %d: o differs from an eager run (" TU_SEED_FMT ")", replay + 1,
                     h.seed);
        cr_assert_eq(tu_bit_diffs(state, want_state, EG_SW), 0,
                     "replay %d: the final state differs from an eager run (" TU_SEED_FMT ")",
                     replay + 1, h.seed);
        cr_assert_eq(tu_bit_diffs(ring, want_ring, EG_RW), 0,
                     "replay %d: the final ring differs from an eager run (" TU_SEED_FMT ")",
                     replay + 1, h.seed);
    }
    for (int i = 0; i < 3 * EG_N_SCRATCH; i++) {
        float *back = tu_download(e, squatters[i]);
        for (size_t j = 0; j < squatters[i].len; j++) {
            uint32_t bits;
            memcpy(&bits, &back[j], sizeof bits);
            cr_assert_eq(bits, TU_POISON_BITS,
                         "a replay wrote into a buffer allocated after the capture (element %zu "
                         "of squatter %d): the step's scratch was released too early",
                         j, i);
        }
        free(back);
        tu_free(e, squatters[i].ptr);
    }
    TU_OK(memra_graph_destroy(e, g));

    /* The graph took its buffers with it. */
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < EG_N_SCRATCH; i++)
            cr_assert_eq(memra_free(e, v.scratch[c][i]), MEMRA_STATUS_INVALID_ARGUMENT,
                         "scratch buffer %d of call %d is still live after memra_graph_destroy", i,
                         c + 1);
    eg_expect_usable(e, backend, "destroying a graph with retained scratch");
    TU_OK(memra_engine_destroy(e));
}

TU_TEST_BACKENDS(graph, step_scratch_lives_until_graph_destroy, eg_check_scratch_retained)

/* ---- forbidden calls inside a step -------------------------------------------------------- */

enum eg_forbidden {
    EG_DTOH,
    EG_DTOH_U64,
    EG_SYNCHRONIZE,
    EG_HTOD_INTO,
    EG_HTOD_U64_INTO,
    EG_HTOD_ALLOC,
    EG_NESTED_CAPTURE,
    EG_STEP_ERROR,
};

static const char *const eg_forbidden_name[] = {
    "memra_dtoh_f32",           "memra_dtoh_u64",
    "memra_engine_synchronize", "memra_htod_f32_into",
    "memra_htod_u64_into",      "memra_htod_f32",
    "memra_graph_capture",      "a step returning an error",
};

typedef struct eg_bad {
    eg_probe probe;
    enum eg_forbidden what;
    /* Do the forbidden thing in every call, or only in the third (captured) one. */
    bool every_call;
    int calls;
    /* What the forbidden call returned in the captured call. */
    MemraStatus captured_status;
    MemraGraph *nested;
} eg_bad;

static MemraStatus eg_bad_step(MemraEngine *e, void *user)
{
    eg_bad *b = user;
    const int call = ++b->calls;
    MemraStatus st = eg_probe_step(e, &b->probe);
    if (st != MEMRA_STATUS_OK)
        return st;
    if (!b->every_call && call < 3)
        return MEMRA_STATUS_OK;

    float host[EG_CONV_DIM];
    uint64_t host_u64[1];
    MemraSliceMutF32 dst = {host, EG_CONV_DIM};
    MemraSliceMutU64 dst_u64 = {host_u64, 1};
    MemraSliceMutF32 made = {NULL, 0};
    switch (b->what) {
    case EG_DTOH:
        st = memra_dtoh_f32(e, tu_view(b->probe.conv_out), dst);
        break;
    case EG_DTOH_U64:
        st = memra_dtoh_u64(e, tu_view_u64(b->probe.table), dst_u64);
        break;
    case EG_SYNCHRONIZE:
        st = memra_engine_synchronize(e);
        break;
    case EG_HTOD_INTO:
        tu_varied(host, EG_CONV_DIM, 99, 1.0f);
        st = memra_htod_f32_into(e, (MemraSliceF32){host, EG_CONV_DIM}, b->probe.qkv);
        break;
    case EG_HTOD_U64_INTO:
        host_u64[0] = tu_addr(b->probe.ring);
        st = memra_htod_u64_into(e, (MemraSliceU64){host_u64, 1}, b->probe.table);
        break;
    case EG_HTOD_ALLOC:
        tu_varied(host, EG_CONV_DIM, 98, 1.0f);
        st = memra_htod_f32(e, (MemraSliceF32){host, EG_CONV_DIM}, &made);
        break;
    case EG_NESTED_CAPTURE:
        st = memra_graph_capture(e, eg_inner_step, &b->probe, &b->nested);
        break;
    case EG_STEP_ERROR:
        /* The step itself fails, as a host's step does when its own work goes wrong. */
        return MEMRA_STATUS_UNSUPPORTED;
    }
    if (call == 3)
        b->captured_status = st;
    /* The step swallows the error: the library must notice on its own. */
    return MEMRA_STATUS_OK;
}

static void eg_check_forbidden(MemraBackend backend, enum eg_forbidden what, bool every_call)
{
    const char *name = eg_forbidden_name[what];
    const char *when = every_call ? "every call" : "the captured call";
    MemraEngine *e = tu_engine(backend);
    eg_inputs in;
    eg_inputs_make(&in);
    eg_bad b;
    memset(&b, 0, sizeof b);
    b.probe = eg_probe_make(e, &in);
    b.what = what;
    b.every_call = every_call;
    b.captured_status = MEMRA_STATUS_OK;

    MemraGraph *sentinel = (MemraGraph *)(uintptr_t)0x6b6b6b60;
    MemraGraph *g = sentinel;
    MemraStatus st = memra_graph_capture(e, eg_bad_step, &b, &g);
    cr_assert_eq(st, MEMRA_STATUS_CAPTURE_ERROR, "%s in %s: the capture returned %s, not %s", name,
                 when, memra_status_string(st), "CAPTURE_ERROR");
    cr_assert_eq(g, sentinel, "%s in %s: a failed capture wrote *out_graph", name, when);
    cr_assert_null(b.nested, "%s in %s: the nested capture produced a graph", name, when);
    cr_assert(b.calls >= 1, "the step was never called");
    if (!every_call) {
        /* The two warm-ups were clean, so the third call happened and was refused. */
        cr_assert_eq(b.calls, 3, "%s in the captured call: the step ran %d times", name, b.calls);
        if (what != EG_STEP_ERROR)
            cr_assert_eq(b.captured_status, MEMRA_STATUS_CAPTURE_ERROR,
                         "%s inside the captured call returned %s, not CAPTURE_ERROR", name,
                         memra_status_string(b.captured_status));
    }

    /* The engine carries on: reads, synchronises, runs an op with the right bits, captures and
     * launches a good graph, and is destroyed without complaint. */
    char after[128];
    snprintf(after, sizeof after, "a capture refused for %s in %s", name, when);
    eg_expect_usable(e, backend, after);
    eg_count c;
    eg_count_make(e, &in, &c);
    MemraGraph *good = NULL;
    TU_OK(memra_graph_capture(e, tu_counted_step, &c.counted, &good));
    TU_OK(memra_graph_launch(e, good));
    TU_OK(memra_graph_destroy(e, good));
    TU_OK(memra_engine_destroy(e));
}

typedef struct eg_forbidden_param {
    enum eg_forbidden what;
    bool every_call;
} eg_forbidden_param;

static eg_forbidden_param eg_forbidden_cases[] = {
    {EG_DTOH, true},           {EG_DTOH, false},           {EG_DTOH_U64, false},
    {EG_SYNCHRONIZE, true},    {EG_SYNCHRONIZE, false},    {EG_HTOD_INTO, true},
    {EG_HTOD_INTO, false},     {EG_HTOD_U64_INTO, false},  {EG_HTOD_ALLOC, false},
    {EG_NESTED_CAPTURE, true}, {EG_NESTED_CAPTURE, false}, {EG_STEP_ERROR, true},
    {EG_STEP_ERROR, false},
};

static void eg_check_forbidden_case(eg_forbidden_param p, MemraBackend backend)
{
    eg_check_forbidden(backend, p.what, p.every_call);
}

TU_PARAM_TEST_BACKENDS(eg_forbidden_param, TU_PARAMS(eg_forbidden_param, eg_forbidden_cases), graph,
                       forbidden_call_in_step, eg_check_forbidden_case)

/* ---- handles where they do not belong ----------------------------------------------------- */

/* An engine's captured graph of one ring roll: after the capture's two warm-ups the ring has
 * rolled twice, and each replay rolls it once more. */
typedef struct eg_graph_fx {
    eg_inputs in;
    eg_count c;
    MemraGraph *g;
} eg_graph_fx;

static void eg_graph_fx_make(MemraEngine *e, eg_graph_fx *f)
{
    eg_inputs_make(&f->in);
    eg_count_make(e, &f->in, &f->c);
    f->g = NULL;
    TU_OK(memra_graph_capture(e, tu_counted_step, &f->c.counted, &f->g));
}

/* Replays the graph once on `e` and expects the ring after three rolls. */
static void eg_graph_fx_replay(MemraEngine *e, MemraBackend backend, eg_graph_fx *f,
                               const char *what)
{
    TU_OK(memra_graph_launch(e, f->g));
    eg_expect_ring(e, backend, &f->c.probe, &f->in, 3, what);
}

/* Destroys the graph and then `e`, its engine, which must hold nothing else by then. */
static void eg_graph_fx_destroy(MemraEngine *e, eg_graph_fx *f)
{
    TU_OK(memra_graph_destroy(e, f->g));
    TU_OK(memra_engine_destroy(e));
}

static void eg_check_destroy_with_live_graph(MemraBackend backend)
{
    MemraEngine *e = tu_engine(backend);
    eg_graph_fx f;
    eg_graph_fx_make(e, &f);
    cr_assert_eq(memra_engine_destroy(e), MEMRA_STATUS_INVALID_ARGUMENT,
                 "memra_engine_destroy accepted an engine with a live graph");

    /* Nothing was released: the graph replays and the buffers read back. */
    eg_graph_fx_replay(e, backend, &f,
                       "the graph no longer replays correctly after the refused destroy");
    eg_expect_usable(e, backend, "a refused memra_engine_destroy");
    eg_graph_fx_destroy(e, &f);
}

TU_TEST_BACKENDS(graph, engine_destroy_refused_while_graph_lives, eg_check_destroy_with_live_graph)

static void eg_check_foreign_graph(MemraBackend backend)
{
    MemraEngine *e1 = tu_engine(backend);
    MemraEngine *e2 = tu_engine(backend);
    eg_graph_fx f;
    eg_graph_fx_make(e1, &f);

    cr_assert_eq(memra_graph_launch(e2, f.g), MEMRA_STATUS_INVALID_ARGUMENT,
                 "a graph launched with another engine was accepted");
    cr_assert_eq(memra_graph_destroy(e2, f.g), MEMRA_STATUS_INVALID_ARGUMENT,
                 "a graph destroyed with another engine was accepted");
    /* The refused launch ran nothing: the ring is still at the two warm-up rolls. */
    eg_expect_ring(e1, backend, &f.c.probe, &f.in, 2,
                   "the refused launch changed the graph's ring");

    /* The graph still belongs to e1 and works there; e2 has no graph of its own: it can go. */
    eg_graph_fx_replay(e1, backend, &f,
                       "the graph does not replay on its own engine after the refusals");
    TU_OK(memra_engine_destroy(e2));
    eg_graph_fx_destroy(e1, &f);
}

TU_TEST_BACKENDS(graph, foreign_engine_refused, eg_check_foreign_graph)

static void eg_check_free_unknown(MemraBackend backend)
{
    MemraEngine *e = tu_engine(backend);
    MemraEngine *other = tu_engine(backend);
    MemraSliceMutF32 buf = tu_poisoned(e, 64);
    MemraSliceMutF32 theirs = tu_poisoned(other, 64);
    float on_stack[4];

    cr_assert_eq(memra_free(e, on_stack), MEMRA_STATUS_INVALID_ARGUMENT,
                 "memra_free accepted a stack address");
    cr_assert_eq(memra_free(e, buf.ptr + 1), MEMRA_STATUS_INVALID_ARGUMENT,
                 "memra_free accepted a pointer into the middle of a buffer");
    cr_assert_eq(memra_free(e, theirs.ptr), MEMRA_STATUS_INVALID_ARGUMENT,
                 "memra_free accepted another engine's buffer");
    TU_OK(memra_free(e, NULL));
    TU_OK(memra_free(e, buf.ptr));
    cr_assert_eq(memra_free(e, buf.ptr), MEMRA_STATUS_INVALID_ARGUMENT,
                 "memra_free accepted a buffer twice");
    cr_assert_eq(memra_free(NULL, theirs.ptr), MEMRA_STATUS_INVALID_ARGUMENT,
                 "memra_free accepted a NULL engine");

    /* The refused frees released nothing: the other engine's buffer still reads back. */
    float *back = tu_download(other, theirs);
    for (size_t i = 0; i < theirs.len; i++) {
        uint32_t bits;
        memcpy(&bits, &back[i], sizeof bits);
        cr_assert_eq(bits, TU_POISON_BITS, "the other engine's buffer changed at %zu", i);
    }
    free(back);
    eg_expect_usable(e, backend, "refused memra_free calls");
    TU_OK(memra_engine_destroy(other));
    TU_OK(memra_engine_destroy(e));
}

TU_TEST_BACKENDS(engine, free_unknown_pointer_refused, eg_check_free_unknown)
