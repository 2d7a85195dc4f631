/*
 * Compile-time pins of the libmemra 1.x ABI: the size, alignment and every field offset and type
 * of every struct in abi/memra.h, and the value of every enumerator and ABI constant.
 *
 * `make abi-layout` compiles this file (it is never run, and it is not a Criterion suite) as C11
 * and as C++11, so the C and the C++ view of the header are both pinned. The values are the
 * 1.0 layout on LP64 targets (x86_64, aarch64), which the Rust declarations in
 * bindings/rust/memra-abi and every host compiled against 1.0 rely on. Within major version 1
 * nothing here may change; a minor release only adds pins (an appended field of an extensible
 * struct changes that struct's size, so its size pin moves with the appended field's own pins).
 *
 * abidiff against abi/baseline/ does not see enumerator values: in C the enums cross as uint32_t
 * typedefs, so no exported function mentions the enum types. These pins are what guards them.
 */
#include <stddef.h>
#include <stdint.h>

#include "memra.h"

#ifdef __cplusplus
#include <type_traits>
#define PIN(cond) static_assert(cond, #cond)
#define PIN_TYPE(expr, type)                                                                       \
    static_assert(std::is_same<decltype(expr), type>::value, #expr " is " #type)
#define ALIGN_OF(type) alignof(type)
#else
#define PIN(cond) _Static_assert(cond, #cond)
#define PIN_TYPE(expr, type)                                                                       \
    _Static_assert(_Generic((expr), type : 1, default : 0), #expr " is " #type)
#define ALIGN_OF(type) _Alignof(type)
#endif

/* The declared type of a field, named without an object. */
#ifdef __cplusplus
#define FIELD(type, field) type::field
#else
#define FIELD(type, field) ((type *)0)->field
#endif

#if SIZE_MAX != UINT64_MAX || UINTPTR_MAX != UINT64_MAX
#error "abi_layout.c pins the LP64 layout; this target is not LP64"
#endif

/* Versions and constants. The major version is the ABI: it is fixed for this file. */
PIN(MEMRA_VERSION_MAJOR == 1);
PIN(MEMRA_ABI_VERSION == ((MEMRA_VERSION_MAJOR << 16) | MEMRA_VERSION_MINOR));
PIN(MEMRA_D_STATE == 128);
PIN(MEMRA_D_CONV_MAX == 8);
PIN(MEMRA_TABLE_WIDTH == 3);
PIN(MEMRA_ENGINE_FLAG_IGNORE_ENV == 1);

/* Enumerated types cross the ABI as 32-bit unsigned integers. */
PIN(sizeof(MemraStatus) == 4);
PIN(sizeof(MemraBackend) == 4);
PIN(sizeof(MemraAllocInit) == 4);

/* Status codes: fixed forever, new ones only appended. */
PIN(MEMRA_STATUS_OK == 0);
PIN(MEMRA_STATUS_INVALID_ARGUMENT == 1);
PIN(MEMRA_STATUS_UNSUPPORTED == 2);
PIN(MEMRA_STATUS_OUT_OF_MEMORY == 3);
PIN(MEMRA_STATUS_NO_DEVICE == 4);
PIN(MEMRA_STATUS_DEVICE_ERROR == 5);
PIN(MEMRA_STATUS_CAPTURE_ERROR == 6);
PIN(MEMRA_STATUS_ABI_MISMATCH == 7);
PIN(MEMRA_STATUS_INTERNAL == 8);

PIN(MEMRA_BACKEND_AUTO == 0);
PIN(MEMRA_BACKEND_CUDA == 1);
PIN(MEMRA_BACKEND_CPU == 2);

PIN(MEMRA_ALLOC_INIT_ZEROED == 0);
PIN(MEMRA_ALLOC_INIT_UNINIT == 1);

/* MemraEngineOptions: extensible (struct_size first); 1.0 ends after `flags`. */
PIN(sizeof(MemraEngineOptions) == 32);
PIN(ALIGN_OF(MemraEngineOptions) == 8);
PIN(offsetof(MemraEngineOptions, struct_size) == 0);
PIN(offsetof(MemraEngineOptions, backend) == 8);
PIN(offsetof(MemraEngineOptions, device_ordinal) == 12);
PIN(offsetof(MemraEngineOptions, stream) == 16);
PIN(offsetof(MemraEngineOptions, flags) == 24);
PIN_TYPE(FIELD(MemraEngineOptions, struct_size), size_t);
PIN_TYPE(FIELD(MemraEngineOptions, backend), MemraBackend);
PIN_TYPE(FIELD(MemraEngineOptions, device_ordinal), int32_t);
PIN_TYPE(FIELD(MemraEngineOptions, stream), void *);
PIN_TYPE(FIELD(MemraEngineOptions, flags), uint64_t);

/* The six slices: {ptr, len}, passed by value, never extended. Each has the same layout: a
 * pointer of its element type at 0 and the element count at 8. */
#define PIN_SLICE(type, ptr_type)                                                                  \
    PIN(sizeof(type) == 16);                                                                       \
    PIN(ALIGN_OF(type) == 8);                                                                      \
    PIN(offsetof(type, ptr) == 0);                                                                 \
    PIN(offsetof(type, len) == 8);                                                                 \
    PIN_TYPE(FIELD(type, ptr), ptr_type);                                                          \
    PIN_TYPE(FIELD(type, len), size_t)

PIN_SLICE(MemraSliceF32, const float *);
PIN_SLICE(MemraSliceMutF32, float *);
PIN_SLICE(MemraSliceU64, const uint64_t *);
PIN_SLICE(MemraSliceMutU64, uint64_t *);
PIN_SLICE(MemraSliceU32, const uint32_t *);
PIN_SLICE(MemraSliceMutU32, uint32_t *);

/* The graph step callback. */
PIN_TYPE((MemraStepFn)0, MemraStatus (*)(MemraEngine *, void *));
