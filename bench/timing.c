/*
 * Clocks, the copy-bandwidth ceiling and the machine description. The CPU backend is timed with
 * CLOCK_MONOTONIC (its operations are synchronous). The CUDA backend is timed with CUDA events
 * recorded on the engine's own stream (memra_engine_stream), so a timed block holds exactly
 * the device work of the reps it brackets, including any gaps the host leaves while it enqueues
 * eager launches.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#if MEMRA_BENCH_CUDA
#include <cuda_runtime_api.h>

static cudaEvent_t ev_start, ev_stop;

static int cuda_failed(const char *what, cudaError_t err)
{
    bench_fail("%s: %s (%s)", what, cudaGetErrorName(err), cudaGetErrorString(err));
    return -1;
}
#endif

double bench_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

int bench_device_open(bench_env *env)
{
    if (env->backend != MEMRA_BACKEND_CUDA)
        return 0;
#if MEMRA_BENCH_CUDA
    {
        struct cudaDeviceProp prop;
        cudaError_t err;
        /* The bench links its own copy of the CUDA runtime; selecting the engine's device makes
         * it use the same primary context, so the engine's stream and buffers are valid here. */
        if ((err = cudaSetDevice(env->device_ordinal)) != cudaSuccess)
            return cuda_failed("cudaSetDevice", err);
        if ((err = cudaGetDeviceProperties(&prop, env->device_ordinal)) != cudaSuccess)
            return cuda_failed("cudaGetDeviceProperties", err);
        snprintf(env->device, sizeof env->device, "%s", prop.name);
        snprintf(env->compute_capability, sizeof env->compute_capability, "%d.%d", prop.major,
                 prop.minor);
        env->multiprocessors = prop.multiProcessorCount;
        env->cache_bytes = (uint64_t)prop.l2CacheSize;
        env->memory_bytes = (uint64_t)prop.totalGlobalMem;
        /* Peak clocks and the bus width, where this runtime still reports them (they left
         * cudaDeviceProp in CUDA 13; the attributes remain). A value the runtime refuses stays
         * 0 and is printed as unknown. */
        {
            int khz = 0, bits = 0, v = 0;
            if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, env->device_ordinal) ==
                cudaSuccess)
                env->sm_clock_mhz = khz / 1000;
            if (cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, env->device_ordinal) ==
                cudaSuccess)
                env->memory_clock_mhz = khz / 1000;
            if (cudaDeviceGetAttribute(&bits, cudaDevAttrGlobalMemoryBusWidth,
                                       env->device_ordinal) == cudaSuccess)
                env->memory_bus_bits = bits;
            if (cudaDriverGetVersion(&v) == cudaSuccess)
                snprintf(env->cuda_driver, sizeof env->cuda_driver, "%d.%d", v / 1000,
                         v % 1000 / 10);
            if (cudaRuntimeGetVersion(&v) == cudaSuccess)
                snprintf(env->cuda_runtime, sizeof env->cuda_runtime, "%d.%d", v / 1000,
                         v % 1000 / 10);
            (void)cudaGetLastError(); /* a refused attribute is not an error of the run */
        }
        if ((err = cudaEventCreate(&ev_start)) != cudaSuccess ||
            (err = cudaEventCreate(&ev_stop)) != cudaSuccess)
            return cuda_failed("cudaEventCreate", err);
        return 0;
    }
#else
    bench_fail("this bench was built with CUDA=0 and cannot time the CUDA backend");
    return -1;
#endif
}

void bench_device_close(bench_env *env)
{
#if MEMRA_BENCH_CUDA
    if (env->backend == MEMRA_BACKEND_CUDA) {
        (void)cudaEventDestroy(ev_start);
        (void)cudaEventDestroy(ev_stop);
    }
#else
    (void)env;
#endif
}

/* The value of "key: value" in a /proc file, or "" when absent. */
static void proc_field(const char *path, const char *key, char *out, size_t out_len)
{
    char line[512];
    size_t klen = strlen(key);
    FILE *f = fopen(path, "r");
    out[0] = '\0';
    if (f == NULL)
        return;
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, key, klen) != 0)
            continue;
        char *v = strchr(line + klen, ':');
        if (v == NULL)
            continue;
        v++;
        while (*v == ' ' || *v == '\t')
            v++;
        v[strcspn(v, "\n")] = '\0';
        snprintf(out, out_len, "%s", v);
        break;
    }
    fclose(f);
}

static uint64_t meminfo_bytes(const char *key)
{
    char v[64];
    proc_field("/proc/meminfo", key, v, sizeof v);
    return (uint64_t)strtoull(v, NULL, 10) * 1024; /* reported in kB */
}

/* Reads `path` line by line, the first `max_lines` at most, into `line`; returns a pointer
 * just past `key` in the first of them that holds it (at its start only, when `at_start`), or
 * NULL where the file or such a line is missing. */
static const char *line_after(const char *path, const char *key, bool at_start, size_t max_lines,
                              char *line, size_t len)
{
    const char *found = NULL;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return NULL;
    for (size_t n = 0; found == NULL && n < max_lines && fgets(line, (int)len, f) != NULL; n++) {
        const char *p = strstr(line, key);
        if (p != NULL && (!at_start || p == line))
            found = p + strlen(key);
    }
    fclose(f);
    return found;
}

/* The NVIDIA kernel module's version from its /proc file ("NVRM version: NVIDIA UNIX ...
 * Kernel Module  580.159.04  ..."), or "" where there is none. */
static void nvidia_driver(char *out, size_t out_len)
{
    char line[256];
    const char *p =
        line_after("/proc/driver/nvidia/version", "Kernel Module", false, 1, line, sizeof line);
    out[0] = '\0';
    if (p == NULL)
        return;
    while (*p == ' ' || *p == '\t')
        p++;
    snprintf(out, out_len, "%.*s", (int)strcspn(p, " \t\n"), p);
}

/* PRETTY_NAME of /etc/os-release, unquoted, or "" where there is none. */
static void os_name(char *out, size_t out_len)
{
    char line[256];
    const char *p =
        line_after("/etc/os-release", "PRETTY_NAME=", true, SIZE_MAX, line, sizeof line);
    out[0] = '\0';
    if (p == NULL)
        return;
    if (*p == '"')
        p++;
    snprintf(out, out_len, "%.*s", (int)strcspn(p, "\"\n"), p);
}

void bench_describe_machine(bench_env *env)
{
    char model[128];
    time_t now = time(NULL);
    struct tm tm;
    struct utsname u;

    if (gethostname(env->host, sizeof env->host) != 0)
        snprintf(env->host, sizeof env->host, "unknown");
    env->host[sizeof env->host - 1] = '\0';
    proc_field("/proc/cpuinfo", "model name", model, sizeof model);
    snprintf(env->cpu, sizeof env->cpu, "%s (%ld threads)", model[0] ? model : "unknown CPU",
             sysconf(_SC_NPROCESSORS_ONLN));
    gmtime_r(&now, &tm);
    strftime(env->date, sizeof env->date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    os_name(env->os, sizeof env->os);
    if (env->os[0] == '\0')
        snprintf(env->os, sizeof env->os, "unknown");
    if (uname(&u) == 0)
        snprintf(env->kernel, sizeof env->kernel, "%.32s %.64s %.16s (%.64s)", u.sysname, u.release,
                 u.machine, u.version);
    else
        snprintf(env->kernel, sizeof env->kernel, "unknown");
    nvidia_driver(env->nvidia_driver, sizeof env->nvidia_driver);
    if (env->backend != MEMRA_BACKEND_CUDA) {
        snprintf(env->device, sizeof env->device, "%s", env->cpu);
        env->memory_bytes = meminfo_bytes("MemTotal");
    }
}

uint64_t bench_memory_budget(const bench_env *env)
{
#if MEMRA_BENCH_CUDA
    if (env->backend == MEMRA_BACKEND_CUDA) {
        size_t free_b = 0, total_b = 0;
        if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess)
            return 0;
        return free_b / 2;
    }
#endif
    return meminfo_bytes("MemAvailable") / 2;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sets best and median bandwidth from `n` copy times of `bytes` each (read + write counted). */
static void copy_stats(bench_env *env, double *us, size_t n, uint64_t bytes)
{
    qsort(us, n, sizeof *us, cmp_double);
    env->copy_bytes = bytes;
    env->copy_reps = n;
    env->copy_best_gbs = 2.0 * (double)bytes / (us[0] * 1e3);
    env->copy_median_gbs = 2.0 * (double)bytes / (us[n / 2] * 1e3);
}

/* A pattern that is neither zeros nor constant, for the copy source. */
static void pattern(float *p, size_t n)
{
    uint32_t x = 0x9e3779b9u;
    for (size_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        p[i] = (float)(x >> 8) / 16777216.0f - 0.5f;
    }
}

#if MEMRA_BENCH_CUDA
static int cuda_copy_bandwidth(bench_env *env)
{
    const uint64_t bytes = env->quick ? (UINT64_C(256) << 20) : (UINT64_C(1) << 30);
    const size_t words = bytes / sizeof(float), chunk = (size_t)1 << 22;
    const size_t reps = env->quick ? 5 : 20, warmups = 3;
    cudaStream_t stream = (cudaStream_t)env->stream;
    MemraSliceMutF32 src = {NULL, 0}, dst = {NULL, 0};
    double us[20];
    float *host = malloc(chunk * sizeof(float));
    int rc = -1;
    MemraStatus st;
    cudaError_t err;

    if (host == NULL) {
        bench_fail("out of host memory");
        return -1;
    }
    pattern(host, chunk);
    if ((st = memra_alloc_f32(env->engine, words, MEMRA_ALLOC_INIT_UNINIT, &src)) !=
            MEMRA_STATUS_OK ||
        (st = memra_alloc_f32(env->engine, words, MEMRA_ALLOC_INIT_UNINIT, &dst)) !=
            MEMRA_STATUS_OK) {
        bench_fail_status("allocating the copy buffers", st);
        goto out;
    }
    for (size_t at = 0; at < words; at += chunk) {
        MemraSliceMutF32 part = {src.ptr + at, words - at < chunk ? words - at : chunk};
        st = memra_htod_f32_into(env->engine, (MemraSliceF32){host, part.len}, part);
        if (st != MEMRA_STATUS_OK) {
            bench_fail_status("filling the copy source", st);
            goto out;
        }
    }
    for (size_t i = 0; i < warmups + reps; i++) {
        float ms = 0.0f;
        if ((err = cudaEventRecord(ev_start, stream)) != cudaSuccess ||
            (err = cudaMemcpyAsync(dst.ptr, src.ptr, bytes, cudaMemcpyDeviceToDevice, stream)) !=
                cudaSuccess ||
            (err = cudaEventRecord(ev_stop, stream)) != cudaSuccess ||
            (err = cudaEventSynchronize(ev_stop)) != cudaSuccess ||
            (err = cudaEventElapsedTime(&ms, ev_start, ev_stop)) != cudaSuccess) {
            cuda_failed("timing a device-to-device copy", err);
            goto out;
        }
        if (i >= warmups)
            us[i - warmups] = (double)ms * 1e3;
    }
    copy_stats(env, us, reps, bytes);
    env->copy_method = "cudaMemcpyAsync device-to-device on the engine's stream, CUDA events";
    rc = 0;
out:
    (void)memra_free(env->engine, src.ptr);
    (void)memra_free(env->engine, dst.ptr);
    free(host);
    return rc;
}
#endif

/* The CPU backend's kernels run on the calling thread, so its ceiling is one thread's memcpy.
 * The size stays the same in the quick sweep: glibc switches to non-temporal stores only above
 * a threshold derived from the cache size, and a smaller copy can land on the other side of it
 * (seen here: 6 GB/s at 64 MiB, 18 GB/s at 256 MiB). */
static int cpu_copy_bandwidth(bench_env *env)
{
    const uint64_t bytes = UINT64_C(256) << 20;
    const size_t words = bytes / sizeof(float), reps = env->quick ? 3 : 10;
    float *src = malloc(bytes), *dst = malloc(bytes);
    volatile float sink = 0.0f;
    double us[10];

    if (src == NULL || dst == NULL) {
        free(src);
        free(dst);
        bench_fail("out of host memory for the copy buffers");
        return -1;
    }
    pattern(src, words);
    memset(dst, 0, bytes); /* fault the pages in before timing */
    for (size_t i = 0; i < reps + 1; i++) {
        double t0 = bench_now_us();
        memcpy(dst, src, bytes);
        double t1 = bench_now_us();
        /* Reading the copy keeps the compiler from dropping it. */
        sink += dst[(i * 4099) % words];
        if (i > 0)
            us[i - 1] = t1 - t0;
    }
    (void)sink;
    free(src);
    free(dst);
    copy_stats(env, us, reps, bytes);
    env->copy_method = "memcpy on one host thread, CLOCK_MONOTONIC";
    return 0;
}

int bench_copy_bandwidth(bench_env *env)
{
#if MEMRA_BENCH_CUDA
    if (env->backend == MEMRA_BACKEND_CUDA)
        return cuda_copy_bandwidth(env);
#endif
    return cpu_copy_bandwidth(env);
}

int bench_time_reps(bench_env *env, bench_rep_fn fn, void *user, size_t first, size_t n,
                    double *out_us)
{
    MemraStatus st;
    int rc = 0;
#if MEMRA_BENCH_CUDA
    if (env->backend == MEMRA_BACKEND_CUDA) {
        cudaStream_t stream = (cudaStream_t)env->stream;
        cudaError_t err;
        float ms = 0.0f;
        if ((err = cudaEventRecord(ev_start, stream)) != cudaSuccess)
            return cuda_failed("cudaEventRecord", err);
        for (size_t i = 0; i < n && rc == 0; i++)
            rc = fn(user, first + i);
        /* Close the bracket even after a failed rep so that the stream is left clean. */
        if ((err = cudaEventRecord(ev_stop, stream)) != cudaSuccess ||
            (err = cudaEventSynchronize(ev_stop)) != cudaSuccess ||
            (err = cudaEventElapsedTime(&ms, ev_start, ev_stop)) != cudaSuccess)
            return rc != 0 ? rc : cuda_failed("timing with CUDA events", err);
        if (rc != 0)
            return rc;
        /* A kernel fault inside the reps surfaces here as the engine's sticky error. */
        if ((st = memra_engine_synchronize(env->engine)) != MEMRA_STATUS_OK)
            return bench_fail_status("memra_engine_synchronize", st);
        *out_us = (double)ms * 1e3;
        return 0;
    }
#endif
    double t0 = bench_now_us();
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = fn(user, first + i);
    if (rc != 0)
        return rc;
    if ((st = memra_engine_synchronize(env->engine)) != MEMRA_STATUS_OK)
        return bench_fail_status("memra_engine_synchronize", st);
    *out_us = bench_now_us() - t0;
    return 0;
}
