/*
 * The CUDA backend: device memory through the CUDA runtime (linked statically, so that
 * libmemra.so loads where no CUDA is installed), every operation enqueued on the engine's
 * stream, and graphs captured from that stream. Built without CUDA (no MEMRA_WITH_CUDA), the
 * same instance exists but refuses to create engines with NO_DEVICE.
 *
 * Errors: a CUDA call that fails is reported with the CUDA error's name and description. An
 * allocation failure is OUT_OF_MEMORY; everything else is DEVICE_ERROR. Errors that poison the
 * CUDA context (a kernel fault such as an illegal address, reported by the launch, by a
 * synchronisation or by any later call) are also reported as the device's sticky fault
 * (backend.h), so every later call reports it and teardown skips the work that can no longer
 * succeed.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "dev_error.h"
#include "status.h"

/* The `fn` of this backend's messages; the runtime prefixes the exported function's name. */
#define CUDA_FN "cuda backend"

#ifdef MEMRA_WITH_CUDA

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <unistd.h>

typedef struct cuda_engine {
    int device;
    /* A private non-blocking stream that zeroes new buffers. It is never captured, so a zeroed
     * allocation made while the engine's stream is being captured runs at once instead of
     * becoming part of the graph (where it would re-zero the buffer at every replay). */
    cudaStream_t side;

    /* The verify's workspace for hosts that pass none (gdn_verify.cu: the prologue's rows and
     * the journal verdicts). When a call needs more, a larger buffer replaces it; the smaller
     * ones stay allocated until the engine is destroyed, because graphs captured earlier still
     * name them. */
    float *workspace;
    size_t n_workspace;
    void **retired;
    size_t n_retired;
    /* Device-side findings (bad accepted counts): the record in mapped host memory, its
     * device address, and the device word that settles which finding is recorded. */
    memra__dev_error *err_host;
    memra__dev_error *err_dev;
    uint32_t *err_claim;
} cuda_engine;

/* Errors after which the CUDA context is unusable: the driver returns them from every later
 * call, and the process must be restarted to use the device again. */
static bool is_sticky(cudaError_t err)
{
    switch (err) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchFailure:
    case cudaErrorTensorMemoryLeak:
    case cudaErrorECCUncorrectable:
    case cudaErrorNvlinkUncorrectable:
    case cudaErrorContained:
    case cudaErrorContextIsDestroyed:
    case cudaErrorExternalDevice:
    case cudaErrorMpsClientTerminated:
        return true;
    default:
        return false;
    }
}

/* Errors of stream capture itself: the host captured the stream it gave the engine and then
 * asked for something a capturing stream cannot do. They poison nothing. */
static bool is_capture_error(cudaError_t err)
{
    switch (err) {
    case cudaErrorStreamCaptureUnsupported:
    case cudaErrorStreamCaptureInvalidated:
    case cudaErrorStreamCaptureMerge:
    case cudaErrorStreamCaptureUnmatched:
    case cudaErrorStreamCaptureUnjoined:
    case cudaErrorStreamCaptureIsolation:
    case cudaErrorStreamCaptureImplicit:
    case cudaErrorStreamCaptureWrongThread:
    case cudaErrorCapturedEvent:
        return true;
    default:
        return false;
    }
}

/* Reports a fault that poisoned the context: the first one becomes the device's sticky fault
 * (backend.h), which the engine layer returns from every later call. */
static MemraStatus sticky_fault(memra__device *d, const char *msg)
{
    if (d->fault == MEMRA_STATUS_OK) {
        d->fault = MEMRA_STATUS_DEVICE_ERROR;
        snprintf(d->fault_msg, sizeof d->fault_msg, "%s", msg);
    }
    return memra__fail(MEMRA_STATUS_DEVICE_ERROR, CUDA_FN, "%s", msg);
}

/*
 * Reports the failure of the CUDA call `call`. `after_work` marks calls whose error can come from
 * earlier asynchronous work on the device (synchronisations): such an error means a kernel or
 * copy faulted, and the device is marked faulted whatever the code.
 */
static MemraStatus report(memra__device *d, cudaError_t err, bool after_work, const char *call)
{
    char msg[MEMRA__MESSAGE_MAX];
    snprintf(msg, sizeof msg, "%s failed: %s (%s)", call, cudaGetErrorName(err),
             cudaGetErrorString(err));
    if (is_sticky(err) || (after_work && !is_capture_error(err)))
        return sticky_fault(d, msg);
    /* A non-sticky error is also kept as the runtime's "last error"; clear it so that it cannot
     * resurface in an unrelated later query. */
    (void)cudaGetLastError();
    if (err == cudaErrorMemoryAllocation)
        return memra__fail(MEMRA_STATUS_OUT_OF_MEMORY, CUDA_FN, "%s", msg);
    if (is_capture_error(err))
        return memra__fail(MEMRA_STATUS_CAPTURE_ERROR, CUDA_FN, "%s", msg);
    return memra__fail(MEMRA_STATUS_DEVICE_ERROR, CUDA_FN, "%s", msg);
}

/* Makes the engine's device current on the calling thread: an engine may be driven from a
 * different thread at every call, and the runtime's current device is per thread. */
static MemraStatus enter(memra__device *d)
{
    const cuda_engine *c = d->impl;
    cudaError_t err = cudaSetDevice(c->device);
    return err == cudaSuccess ? MEMRA_STATUS_OK : report(d, err, false, "cudaSetDevice");
}

/* Whether the NVIDIA driver's user-space library can be loaded, which is what the runtime
 * needs first (it opens libcuda.so.1 on its first call). */
static bool driver_loadable(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (h == NULL)
        return false;
    dlclose(h);
    return true;
}

/* Whether the driver's kernel module made its device nodes: present with the driver installed
 * and loaded, even in a container that lacks the user-space library. */
static bool device_nodes_present(void)
{
    return access("/dev/nvidiactl", F_OK) == 0 || access("/dev/nvidia0", F_OK) == 0;
}

/*
 * MEMRA_CUDA_SIMULATE_INIT_ERROR=CODE[,driver|,no-driver] makes engine creation fail as if its
 * first CUDA call had returned the cudaError_t CODE, with the driver found or not as the suffix
 * says (probed as usual without one). It exists so that the tests can check the message of
 * every cause of NO_DEVICE on any machine; returns cudaSuccess when the variable is unset.
 */
static cudaError_t simulated_init_error(int *driver)
{
    const char *env = getenv("MEMRA_CUDA_SIMULATE_INIT_ERROR");
    char *end = NULL;
    if (env == NULL || env[0] == '\0')
        return cudaSuccess;
    long code = strtol(env, &end, 10);
    if (strcmp(end, ",driver") == 0)
        *driver = 1;
    else if (strcmp(end, ",no-driver") == 0)
        *driver = 0;
    return code > 0 ? (cudaError_t)code : cudaSuccess;
}

/*
 * Engine creation cannot have a fault to record yet: a failure there means the device is not
 * usable (NO_DEVICE), except for running out of memory. The message names the cause a user can
 * act on and what to do, since the runtime's own words mislead here: with no driver at all it
 * says "CUDA driver version is insufficient", which reads as "upgrade the driver". `driver` is
 * 1 or 0 when the caller knows whether the driver is installed, -1 to probe it.
 */
static MemraStatus init_failure_as(cudaError_t err, const char *call, int driver)
{
    const char *cpu = "the CPU backend (MEMRA_BACKEND_CPU, or MEMRA_BACKEND=cpu under AUTO) "
                      "needs no GPU";
    (void)cudaGetLastError();
    if (err == cudaErrorMemoryAllocation)
        return memra__fail(MEMRA_STATUS_OUT_OF_MEMORY, CUDA_FN, "%s failed: %s (%s)", call,
                           cudaGetErrorName(err), cudaGetErrorString(err));
    if (driver < 0)
        driver = driver_loadable();
    if (!driver && (err == cudaErrorInsufficientDriver || err == cudaErrorNoDevice ||
                    err == cudaErrorUnknown || err == cudaErrorInitializationError)) {
        return memra__fail(MEMRA_STATUS_NO_DEVICE, CUDA_FN,
                           "no usable CUDA device: no NVIDIA driver is installed (libcuda.so.1 "
                           "cannot be loaded; %s) [%s: %s]: install the NVIDIA driver to use a "
                           "GPU; %s",
                           device_nodes_present() ? "the /dev/nvidia* device nodes exist, so "
                                                    "the library is missing from the loader's "
                                                    "path"
                                                  : "no /dev/nvidia* device nodes",
                           call, cudaGetErrorName(err), cpu);
    }
    if (err == cudaErrorInsufficientDriver) {
        int version = 0;
        (void)cudaDriverGetVersion(&version);
        char has[48] = "";
        if (version > 0)
            snprintf(has, sizeof has, " (it supports CUDA %d.%d)", version / 1000,
                     version % 1000 / 10);
        return memra__fail(MEMRA_STATUS_NO_DEVICE, CUDA_FN,
                           "no usable CUDA device: the NVIDIA driver is too old for the CUDA "
                           "%d.%d runtime libmemra was built with%s [%s: %s]: install a driver "
                           "for CUDA %d.%d or newer, or build libmemra with an older CUDA "
                           "toolkit",
                           CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10, has, call,
                           cudaGetErrorName(err), CUDART_VERSION / 1000,
                           CUDART_VERSION % 1000 / 10);
    }
    if (err == cudaErrorNoDevice) {
        const char *visible = getenv("CUDA_VISIBLE_DEVICES");
        char why[160];
        if (visible != NULL)
            snprintf(why, sizeof why,
                     "CUDA_VISIBLE_DEVICES='%.64s' may hide every device: "
                     "unset it or list a device in it",
                     visible);
        else
            snprintf(why, sizeof why, "check that `nvidia-smi` lists a GPU");
        return memra__fail(MEMRA_STATUS_NO_DEVICE, CUDA_FN,
                           "no usable CUDA device: the NVIDIA driver is installed but reports "
                           "no CUDA device [%s: %s]: %s; %s",
                           call, cudaGetErrorName(err), why, cpu);
    }
    if (err == cudaErrorDevicesUnavailable) {
        return memra__fail(MEMRA_STATUS_NO_DEVICE, CUDA_FN,
                           "no usable CUDA device: the device is busy or unavailable (compute "
                           "mode EXCLUSIVE_PROCESS held by another process, or PROHIBITED) "
                           "[%s: %s]: see `nvidia-smi -q -d COMPUTE`, wait for the other "
                           "process, set the compute mode to DEFAULT or choose another "
                           "device_ordinal",
                           call, cudaGetErrorName(err));
    }
    if (err == cudaErrorSystemDriverMismatch) {
        return memra__fail(MEMRA_STATUS_NO_DEVICE, CUDA_FN,
                           "no usable CUDA device: the NVIDIA driver's library and its kernel "
                           "module are of different versions [%s: %s]: reboot, or reload the "
                           "nvidia kernel module, after a driver update",
                           call, cudaGetErrorName(err));
    }
    return memra__fail(MEMRA_STATUS_NO_DEVICE, CUDA_FN, "no usable CUDA device: %s failed: %s (%s)",
                       call, cudaGetErrorName(err), cudaGetErrorString(err));
}

static MemraStatus init_failure(cudaError_t err, const char *call)
{
    return init_failure_as(err, call, -1);
}

/* A zeroed device buffer of `words` u32, zeroed on the side stream and waited for. */
static cudaError_t zeroed_words(const cuda_engine *c, size_t words, uint32_t **out)
{
    void *p = NULL;
    cudaError_t err = cudaMalloc(&p, words * sizeof(uint32_t));
    if (err == cudaSuccess)
        err = cudaMemsetAsync(p, 0, words * sizeof(uint32_t), c->side);
    if (err == cudaSuccess)
        err = cudaStreamSynchronize(c->side);
    if (err != cudaSuccess) {
        if (p != NULL)
            (void)cudaFree(p);
        return err;
    }
    *out = p;
    return cudaSuccess;
}

static cudaError_t workspace_init(cuda_engine *c)
{
    void *host = NULL;
    cudaError_t err = zeroed_words(c, 1, &c->err_claim);
    if (err != cudaSuccess)
        return err;
    err = cudaHostAlloc(&host, sizeof(memra__dev_error), cudaHostAllocMapped);
    if (err != cudaSuccess)
        return err;
    memset(host, 0, sizeof(memra__dev_error));
    c->err_host = host;
    return cudaHostGetDevicePointer((void **)&c->err_dev, host, 0);
}

static void workspace_fini(cuda_engine *c)
{
    if (c->workspace != NULL)
        (void)cudaFree(c->workspace);
    for (size_t i = 0; i < c->n_retired; i++)
        (void)cudaFree(c->retired[i]);
    free(c->retired);
    if (c->err_claim != NULL)
        (void)cudaFree(c->err_claim);
    if (c->err_host != NULL)
        (void)cudaFreeHost(c->err_host);
    c->workspace = NULL;
    c->retired = NULL;
    c->err_claim = NULL;
    c->err_host = NULL;
}

static MemraStatus cuda_engine_init(MemraEngine *engine, const MemraEngineOptions *o)
{
    memra__device *d = memra__device_of(engine);
    int count = 0;
    cudaStream_t stream = (cudaStream_t)o->stream;
    cudaStream_t side = NULL;
    cuda_engine *c;
    cudaError_t err;

    /* No driver, a driver too old for this runtime, or no device all fail here. */
    int simulated_driver = -1;
    err = simulated_init_error(&simulated_driver);
    if (err != cudaSuccess)
        return init_failure_as(err, "cudaGetDeviceCount", simulated_driver);
    err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess)
        return init_failure(err, "cudaGetDeviceCount");
    MEMRA__FAIL_IF(o->device_ordinal >= count, MEMRA_STATUS_NO_DEVICE, CUDA_FN,
                   "no usable CUDA device: device ordinal %d is out of range "
                   "(cudaErrorInvalidDevice: %d device(s) visible)",
                   (int)o->device_ordinal, count);
    /* cudaSetDevice also creates the device's primary context. */
    err = cudaSetDevice(o->device_ordinal);
    if (err != cudaSuccess)
        return init_failure(err, "cudaSetDevice");

    if (stream != NULL) {
        /* An adopted stream must live on the engine's device, or every launch would fail. */
        int stream_device = -1;
        err = cudaStreamGetDevice(stream, &stream_device);
        if (err != cudaSuccess) {
            (void)cudaGetLastError();
            return memra__fail(MEMRA_STATUS_INVALID_ARGUMENT, CUDA_FN,
                               "parameter 'options->stream': expected a live cudaStream_t, "
                               "cudaStreamGetDevice failed: %s (%s)",
                               cudaGetErrorName(err), cudaGetErrorString(err));
        }
        MEMRA__FAIL_IF(stream_device != o->device_ordinal, MEMRA_STATUS_INVALID_ARGUMENT, CUDA_FN,
                       "parameter 'options->stream': expected a stream of device %d, got one "
                       "of device %d",
                       (int)o->device_ordinal, stream_device);
    }

    c = calloc(1, sizeof *c);
    MEMRA__FAIL_IF(c == NULL, MEMRA_STATUS_OUT_OF_MEMORY, CUDA_FN,
                   "cannot allocate the engine state");
    err = cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
    if (err != cudaSuccess) {
        free(c);
        return init_failure(err, "cudaStreamCreateWithFlags");
    }
    d->owns_stream = stream == NULL;
    if (d->owns_stream) {
        /* Non-blocking: the engine's work never serialises with the legacy default stream. */
        err = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
        if (err != cudaSuccess) {
            (void)cudaStreamDestroy(side);
            free(c);
            return init_failure(err, "cudaStreamCreateWithFlags");
        }
    }
    c->device = o->device_ordinal;
    c->side = side;
    err = workspace_init(c);
    if (err != cudaSuccess) {
        workspace_fini(c);
        if (d->owns_stream)
            (void)cudaStreamDestroy(stream);
        (void)cudaStreamDestroy(side);
        free(c);
        return init_failure(err, "allocating the verify workspace");
    }
    d->impl = c;
    d->stream = stream;
    return MEMRA_STATUS_OK;
}

static void cuda_engine_fini(MemraEngine *engine)
{
    memra__device *d = memra__device_of(engine);
    cuda_engine *c = d->impl;
    if (c == NULL)
        return;
    /* Teardown never fails. After a fault the calls below return the fault again; their
     * results are ignored, and the host's handles are released regardless. */
    (void)cudaSetDevice(c->device);
    if (d->fault == MEMRA_STATUS_OK)
        (void)cudaStreamSynchronize(d->stream);
    workspace_fini(c);
    (void)cudaStreamDestroy(c->side);
    if (d->owns_stream)
        (void)cudaStreamDestroy((cudaStream_t)d->stream);
    (void)cudaGetLastError();
    free(c);
    d->impl = NULL;
    d->stream = NULL;
    d->owns_stream = false;
}

static MemraStatus cuda_mem_alloc(MemraEngine *engine, size_t bytes, bool zeroed, void **out)
{
    memra__device *d = memra__device_of(engine);
    const cuda_engine *c = d->impl;
    void *p = NULL;
    cudaError_t err;

    MEMRA__TRY(enter(d));
    /* cudaMalloc is allowed while the stream is captured in relaxed mode; it is not recorded. */
    err = cudaMalloc(&p, bytes);
    if (err != cudaSuccess)
        return report(d, err, false, "cudaMalloc");
    if (zeroed) {
        /* On the private side stream, waited for here: the zeros are in place before any work
         * enqueued afterwards can run, and nothing enters a graph being captured. */
        err = cudaMemsetAsync(p, 0, bytes, c->side);
        if (err == cudaSuccess)
            err = cudaStreamSynchronize(c->side);
        if (err != cudaSuccess) {
            MemraStatus st = report(d, err, true, "zeroing a new buffer (cudaMemsetAsync)");
            (void)cudaFree(p);
            return st;
        }
    }
    *out = p;
    return MEMRA_STATUS_OK;
}

static MemraStatus cuda_mem_free(MemraEngine *engine, void *ptr)
{
    memra__device *d = memra__device_of(engine);
    enum cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    cudaError_t err;

    if (d->fault != MEMRA_STATUS_OK) {
        /* The context is poisoned: free what can be freed and report nothing new. */
        (void)cudaFree(ptr);
        (void)cudaGetLastError();
        return MEMRA_STATUS_OK;
    }
    MEMRA__TRY(enter(d));
    /* Work already enqueued may still use the buffer: wait for it first, unless the host is
     * capturing its own stream (a capturing stream cannot be waited for; its recorded work
     * has not run, and cudaFree itself waits for the device's running work). */
    err = cudaStreamIsCapturing((cudaStream_t)d->stream, &capturing);
    if (err == cudaSuccess && capturing == cudaStreamCaptureStatusNone)
        err = cudaStreamSynchronize((cudaStream_t)d->stream);
    if (err != cudaSuccess)
        return report(d, err, true, "cudaStreamSynchronize before cudaFree");
    err = cudaFree(ptr);
    return err == cudaSuccess ? MEMRA_STATUS_OK : report(d, err, false, "cudaFree");
}

static MemraStatus cuda_copy_htod(MemraEngine *engine, void *dst, const void *src, size_t bytes)
{
    memra__device *d = memra__device_of(engine);
    struct cudaPointerAttributes attr;
    bool pageable;
    cudaError_t err;

    MEMRA__TRY(enter(d));
    /* From pageable memory the runtime stages the data before cudaMemcpyAsync returns, so
     * `src` may be reused at once. From pinned (or managed) memory the copy is a DMA that runs
     * later in stream order, so it is waited for before returning. */
    err = cudaPointerGetAttributes(&attr, src);
    if (err != cudaSuccess)
        return report(d, err, false, "cudaPointerGetAttributes");
    pageable = attr.type == cudaMemoryTypeUnregistered;
    err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, (cudaStream_t)d->stream);
    if (err != cudaSuccess)
        return report(d, err, false, "cudaMemcpyAsync (host to device)");
    if (!pageable) {
        err = cudaStreamSynchronize((cudaStream_t)d->stream);
        if (err != cudaSuccess)
            return report(d, err, true, "cudaStreamSynchronize after a pinned copy");
    }
    return MEMRA_STATUS_OK;
}

/* After a synchronisation: reports a finding of the 1.1 kernels and re-arms the record. The
 * claim word is cleared in stream order, before any work enqueued later. */
static MemraStatus cuda_take_findings(MemraEngine *engine)
{
    memra__device *d = memra__device_of(engine);
    cuda_engine *c = d->impl;
    MemraStatus st;
    cudaError_t err;
    if (((volatile memra__dev_error *)c->err_host)->set == 0)
        return MEMRA_STATUS_OK;
    st = memra__dev_error_take(CUDA_FN, c->err_host);
    err = cudaMemsetAsync(c->err_claim, 0, sizeof(uint32_t), (cudaStream_t)d->stream);
    if (err != cudaSuccess)
        return report(d, err, false, "cudaMemsetAsync (re-arming the error record)");
    return st;
}

static MemraStatus cuda_copy_dtoh(MemraEngine *engine, void *dst, const void *src, size_t bytes)
{
    memra__device *d = memra__device_of(engine);
    cudaError_t err;

    MEMRA__TRY(enter(d));
    /* Enqueued after the engine's work, then waited for: the host sees the results of every
     * operation enqueued before, and a fault of any of them is reported here. */
    err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, (cudaStream_t)d->stream);
    if (err != cudaSuccess)
        return report(d, err, false, "cudaMemcpyAsync (device to host)");
    err = cudaStreamSynchronize((cudaStream_t)d->stream);
    return err == cudaSuccess ? MEMRA_STATUS_OK : report(d, err, true, "cudaStreamSynchronize");
}

static MemraStatus cuda_synchronize(MemraEngine *engine)
{
    memra__device *d = memra__device_of(engine);
    cudaError_t err;

    MEMRA__TRY(enter(d));
    err = cudaStreamSynchronize((cudaStream_t)d->stream);
    return err == cudaSuccess ? MEMRA_STATUS_OK : report(d, err, true, "cudaStreamSynchronize");
}

/* The kernels' entry points return the launch's cudaError_t as an int. */
static MemraStatus launched(memra__device *d, int err, const char *kernel)
{
    return err == (int)cudaSuccess ? MEMRA_STATUS_OK : report(d, (cudaError_t)err, false, kernel);
}

/* Makes the engine's own verify workspace hold at least `need` floats. Growing allocates, so
 * it is refused while the host captures the engine's stream itself (a host that does should
 * pass MemraVerifyArgs::workspace); memra_graph_capture's warm-up calls grow it before its
 * capture starts. */
static MemraStatus ensure_workspace(memra__device *d, size_t need)
{
    cuda_engine *c = d->impl;
    enum cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    void *grown = NULL;
    void **list;
    size_t words = c->n_workspace > 0 ? c->n_workspace : 4096;
    cudaError_t err;
    if (need <= c->n_workspace)
        return MEMRA_STATUS_OK;
    err = cudaStreamIsCapturing((cudaStream_t)d->stream, &capturing);
    if (err != cudaSuccess)
        return report(d, err, false, "cudaStreamIsCapturing");
    MEMRA__FAIL_IF(capturing != cudaStreamCaptureStatusNone, MEMRA_STATUS_CAPTURE_ERROR, CUDA_FN,
                   "this call needs a verify workspace of %zu floats and the engine has %zu; "
                   "pass args->workspace (memra_gdn_verify_workspace_len) or run one such call "
                   "outside the capture first",
                   need, c->n_workspace);
    while (words < need)
        words *= 2;
    list = realloc(c->retired, (c->n_retired + 1) * sizeof *list);
    MEMRA__FAIL_IF(list == NULL, MEMRA_STATUS_OUT_OF_MEMORY, CUDA_FN,
                   "cannot grow the verify workspace list");
    c->retired = list;
    /* The work already enqueued may use the current workspace: it stays allocated. */
    err = cudaMalloc(&grown, words * sizeof(float));
    if (err != cudaSuccess)
        return report(d, err, false, "allocating the verify workspace (cudaMalloc)");
    if (c->workspace != NULL)
        c->retired[c->n_retired++] = c->workspace;
    c->workspace = grown;
    c->n_workspace = words;
    return MEMRA_STATUS_OK;
}

/* Enqueues kernel `k` on the engine's stream through the kernel's launch function (the
 * operation table's CUDA column); the kernels that record findings get the engine's record. */
static MemraStatus cuda_enqueue(MemraEngine *engine, memra__kernel k, memra__kernel_args *args)
{
    memra__device *d = memra__device_of(engine);
    cuda_engine *c = d->impl;
    MEMRA__TRY(enter(d));
    memra__kernel_set_findings(k, args, c->err_dev, c->err_claim);
    if (k == MEMRA__KERNEL_verify && args->verify.workspace == NULL) {
        const memra__verify_args *a = &args->verify;
        MEMRA__TRY(
            ensure_workspace(d, memra__verify_workspace_words(a->b_n, a->t, a->num_k, a->num_v)));
        args->verify.workspace = c->workspace;
    }
    switch (k) {
#define MEMRA__KERNEL(kernel, args_type, cpu, cuda, findings, what)                                \
    case MEMRA__KERNEL_##kernel:                                                                   \
        return launched(d, cuda(&args->kernel, d->stream), "launching " what);
#include "ops.def"
    case MEMRA__N_KERNELS:
        break;
    }
    return memra__fail(MEMRA_STATUS_INTERNAL, CUDA_FN, "no kernel %d in the operation table",
                       (int)k);
}

static MemraStatus cuda_capture_begin(MemraEngine *engine)
{
    memra__device *d = memra__device_of(engine);
    cudaError_t err;

    MEMRA__TRY(enter(d));
    /* Relaxed: the step may allocate (cudaMalloc) while its operations are being captured. */
    err = cudaStreamBeginCapture((cudaStream_t)d->stream, cudaStreamCaptureModeRelaxed);
    if (err == cudaSuccess)
        return MEMRA_STATUS_OK;
    if (is_sticky(err))
        return report(d, err, false, "cudaStreamBeginCapture");
    (void)cudaGetLastError();
    /* Typically the host is already capturing the stream it gave the engine. */
    return memra__fail(MEMRA_STATUS_CAPTURE_ERROR, CUDA_FN,
                       "cudaStreamBeginCapture failed: %s (%s)", cudaGetErrorName(err),
                       cudaGetErrorString(err));
}

static MemraStatus cuda_capture_end(MemraEngine *engine, bool keep, void **out_exec)
{
    memra__device *d = memra__device_of(engine);
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    cudaError_t err;

    /* Ending the capture comes first in every case, so the stream is usable again. */
    (void)cudaSetDevice(((const cuda_engine *)d->impl)->device);
    err = cudaStreamEndCapture((cudaStream_t)d->stream, &graph);
    if (!keep) {
        if (graph != NULL)
            (void)cudaGraphDestroy(graph);
        if (err != cudaSuccess && is_sticky(err))
            (void)report(d, err, false, "cudaStreamEndCapture");
        (void)cudaGetLastError();
        return MEMRA_STATUS_OK;
    }
    if (err != cudaSuccess) {
        if (graph != NULL)
            (void)cudaGraphDestroy(graph);
        if (is_sticky(err))
            return report(d, err, false, "cudaStreamEndCapture");
        (void)cudaGetLastError();
        return memra__fail(MEMRA_STATUS_CAPTURE_ERROR, CUDA_FN,
                           "cudaStreamEndCapture failed: %s (%s)", cudaGetErrorName(err),
                           cudaGetErrorString(err));
    }
    err = cudaGraphInstantiate(&exec, graph, 0);
    (void)cudaGraphDestroy(graph);
    if (err != cudaSuccess)
        return report(d, err, false, "cudaGraphInstantiate");
    /* Uploading now keeps the one-time set-up cost out of the first replay. */
    err = cudaGraphUpload(exec, (cudaStream_t)d->stream);
    if (err != cudaSuccess) {
        MemraStatus st = report(d, err, false, "cudaGraphUpload");
        (void)cudaGraphExecDestroy(exec);
        return st;
    }
    *out_exec = exec;
    return MEMRA_STATUS_OK;
}

static MemraStatus cuda_graph_launch(MemraEngine *engine, void *exec)
{
    memra__device *d = memra__device_of(engine);
    cudaError_t err;

    MEMRA__TRY(enter(d));
    err = cudaGraphLaunch((cudaGraphExec_t)exec, (cudaStream_t)d->stream);
    return err == cudaSuccess ? MEMRA_STATUS_OK : report(d, err, false, "cudaGraphLaunch");
}

static void cuda_graph_free(MemraEngine *engine, void *exec)
{
    memra__device *d = memra__device_of(engine);
    (void)cudaSetDevice(((const cuda_engine *)d->impl)->device);
    (void)cudaGraphExecDestroy((cudaGraphExec_t)exec);
    (void)cudaGetLastError();
}

const memra__backend memra__backend_cuda = {
    .name = "cuda",
    .kind = MEMRA_BACKEND_CUDA,
    .engine_init = cuda_engine_init,
    .engine_fini = cuda_engine_fini,
    .mem_alloc = cuda_mem_alloc,
    .mem_free = cuda_mem_free,
    .copy_htod = cuda_copy_htod,
    .copy_dtoh = cuda_copy_dtoh,
    .synchronize = cuda_synchronize,
    .enqueue = cuda_enqueue,
    .take_findings = cuda_take_findings,
    .capture_begin = cuda_capture_begin,
    .capture_end = cuda_capture_end,
    .graph_launch = cuda_graph_launch,
    .graph_free = cuda_graph_free,
};

#else /* !MEMRA_WITH_CUDA */

static MemraStatus nocuda_engine_init(MemraEngine *engine, const MemraEngineOptions *o)
{
    return memra__fail(MEMRA_STATUS_NO_DEVICE, CUDA_FN, "libmemra was built without CUDA");
}

/* No engine of this backend can exist (engine_init always fails and leaves nothing behind),
 * so the runtime never reaches the other entries. */
const memra__backend memra__backend_cuda = {
    .name = "cuda",
    .kind = MEMRA_BACKEND_CUDA,
    .engine_init = nocuda_engine_init,
};

#endif /* MEMRA_WITH_CUDA */
