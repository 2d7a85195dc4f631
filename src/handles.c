/*
 * Handles and calls: the registry that tells live engines and graphs from dead, foreign and
 * forged handles without touching the memory they may once have named, and the bracket that
 * holds an engine for the duration of one call (MEMRA__ENTER in engine.h).
 *
 * A handle is an identifier, never an address: bit 63 set, a 39-bit serial, a 24-bit slot
 * index. Each creation takes the next serial, so a destroyed handle stays refused after its
 * slot (and its memory) has been reused by a new engine or graph; the serial only repeats after
 * 2^39 creations in one process. The value is not a canonical address on x86-64, so code that
 * dereferenced a handle by mistake would fault at once instead of reading something.
 *
 * Slots live in chunks that are allocated on demand and never freed, so reading a slot is always
 * safe, whatever the handle: lookups take no lock. Creation and destruction take one mutex.
 *
 * The slot of an engine also holds its owner word: the token of the thread inside a call on the
 * engine, 0 when none is. Entering a call takes it with one compare-and-swap, leaving gives it
 * back with one store. A second thread finds it taken and is refused; the owning thread finds
 * its own token and nests (a graph step calls back into the engine it is being captured on).
 * Because the owner word lives in the slot and not in the engine, a thread racing a destroy
 * never touches the engine's memory: the destroying thread owns the slot until it has retired
 * the handle.
 */
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "status.h"

_Static_assert(sizeof(uintptr_t) == sizeof(uint64_t), "handles are 64-bit identifiers");

#define HANDLE_TAG (UINT64_C(1) << 63)
#define INDEX_BITS 24
#define SERIAL_BITS 39
#define SERIAL_MASK ((UINT64_C(1) << SERIAL_BITS) - 1)
#define INDEX_MASK ((UINT64_C(1) << INDEX_BITS) - 1)
#define CHUNK_BITS 12
#define CHUNK_SLOTS ((size_t)1 << CHUNK_BITS)
#define N_CHUNKS ((size_t)1 << (INDEX_BITS - CHUNK_BITS))
#define NO_SLOT UINT32_MAX

/* One slot per live handle. Every field a lookup reads is atomic: a lookup through a stale or
 * forged handle may read a slot while its owner rewrites it. The serial is the publication
 * point (release on create, acquire on lookup); the other fields are read relaxed after it. A
 * slot fills a cache line, so that threads driving neighbouring engines do not contend. */
struct memra__slot {
    alignas(64) _Atomic uint64_t serial; /* 0: no live object */
    _Atomic uintptr_t owner;             /* engines: the thread inside a call, or 0 */
    _Atomic uintptr_t object;            /* ~address of the engine or graph */
    _Atomic uintptr_t parent;            /* graphs: ~address of their engine */
    _Atomic uint32_t kind;               /* memra__handle_kind */
    /* Engines: calls from other threads refused while the engine was in use. */
    _Atomic uint32_t refused;
    uint32_t index;     /* the slot's own index, set once */
    uint32_t next_free; /* free list link, under registry_lock */
};

static _Atomic(struct memra__slot *) chunks[N_CHUNKS];
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
/* Under registry_lock: the head of the free list and the first never-used index. */
static uint32_t free_head = NO_SLOT;
static uint32_t fresh_index;
/* The serial the next handle gets; read without the lock only to word a message. */
static _Atomic uint64_t next_serial = 1;

/* The calling thread's innermost call. Its address is also the thread's owner token: unique
 * among live threads and never 0. A call looks it up once, on entry, and keeps the address
 * (thread-local lookups in a shared library go through a function call). */
static _Thread_local memra__call *current_call;

/* Registry pointers are stored complemented: a leak checker must not see a live pointer to an
 * engine the host forgot to destroy (it would call it reachable and stay silent). */
static uintptr_t hide(const void *p)
{
    return ~(uintptr_t)p;
}

static void *unhide(uintptr_t v)
{
    return (void *)~v;
}

static struct memra__slot *slot_at(uint32_t index)
{
    struct memra__slot *chunk =
        atomic_load_explicit(&chunks[index >> CHUNK_BITS], memory_order_acquire);
    return chunk ? &chunk[index & (CHUNK_SLOTS - 1)] : NULL;
}

/* The slot a handle names and the serial it carries; NULL for a value that cannot be one. */
static struct memra__slot *decode(const void *handle, uint64_t *serial)
{
    uint64_t v = (uintptr_t)handle;
    if ((v & HANDLE_TAG) == 0)
        return NULL;
    *serial = (v >> INDEX_BITS) & SERIAL_MASK;
    if (*serial == 0)
        return NULL;
    return slot_at((uint32_t)(v & INDEX_MASK));
}

static const char *kind_name(memra__handle_kind kind)
{
    return kind == MEMRA__HANDLE_ENGINE ? "engine" : "graph";
}

/* Why `handle` does not name a live object of `kind` (NULL when it does, with its slot and
 * serial in *out and *out_serial), for messages. */
static const char *not_live(const void *handle, memra__handle_kind kind, struct memra__slot **out,
                            uint64_t *out_serial)
{
    uint64_t serial = 0;
    struct memra__slot *s;
    if (handle == NULL)
        return "NULL";
    s = decode(handle, &serial);
    if (s == NULL || atomic_load_explicit(&s->serial, memory_order_acquire) != serial)
        return serial != 0 && serial < atomic_load_explicit(&next_serial, memory_order_relaxed)
                   ? "a destroyed handle"
                   : "a value that is not a libmemra handle";
    if (atomic_load_explicit(&s->kind, memory_order_relaxed) != (uint32_t)kind)
        return kind == MEMRA__HANDLE_ENGINE ? "a graph handle" : "an engine handle";
    *out = s;
    *out_serial = serial;
    return NULL;
}

MemraStatus memra__handle_new(const char *fn, memra__handle_kind kind, void *object,
                              const MemraEngine *parent, uintptr_t *out_handle,
                              struct memra__slot **out_slot)
{
    uint32_t index;
    uint64_t serial;
    struct memra__slot *s;

    pthread_mutex_lock(&registry_lock);
    if (free_head != NO_SLOT) {
        index = free_head;
        s = slot_at(index);
        free_head = s->next_free;
    } else {
        index = fresh_index;
        if ((uint64_t)index > INDEX_MASK) {
            pthread_mutex_unlock(&registry_lock);
            return memra__fail(MEMRA_STATUS_OUT_OF_MEMORY, fn,
                               "cannot make a new %s: %llu engines and graphs are alive",
                               kind_name(kind), (unsigned long long)INDEX_MASK + 1);
        }
        s = slot_at(index);
        if (s == NULL) {
            struct memra__slot *chunk =
                aligned_alloc(alignof(struct memra__slot), CHUNK_SLOTS * sizeof *chunk);
            if (chunk == NULL) {
                pthread_mutex_unlock(&registry_lock);
                return memra__fail(MEMRA_STATUS_OUT_OF_MEMORY, fn,
                                   "cannot grow the handle registry");
            }
            memset(chunk, 0, CHUNK_SLOTS * sizeof *chunk);
            for (size_t i = 0; i < CHUNK_SLOTS; i++)
                chunk[i].index = (uint32_t)(index + i);
            atomic_store_explicit(&chunks[index >> CHUNK_BITS], chunk, memory_order_release);
            s = &chunk[0];
        }
        fresh_index++;
    }
    serial = atomic_load_explicit(&next_serial, memory_order_relaxed);
    atomic_store_explicit(&next_serial, serial == SERIAL_MASK ? 1 : serial + 1,
                          memory_order_relaxed);
    atomic_store_explicit(&s->object, hide(object), memory_order_relaxed);
    atomic_store_explicit(&s->parent, parent ? hide(parent) : 0, memory_order_relaxed);
    atomic_store_explicit(&s->kind, (uint32_t)kind, memory_order_relaxed);
    atomic_store_explicit(&s->refused, 0, memory_order_relaxed);
    atomic_store_explicit(&s->serial, serial, memory_order_release);
    pthread_mutex_unlock(&registry_lock);

    *out_handle = (uintptr_t)(HANDLE_TAG | (serial << INDEX_BITS) | index);
    *out_slot = s;
    return MEMRA_STATUS_OK;
}

/* Makes the slot's handle dead for every later lookup. */
static void retire(struct memra__slot *s)
{
    atomic_store_explicit(&s->serial, 0, memory_order_release);
    atomic_store_explicit(&s->object, 0, memory_order_relaxed);
    atomic_store_explicit(&s->parent, 0, memory_order_relaxed);
}

static void release_slot(struct memra__slot *s)
{
    pthread_mutex_lock(&registry_lock);
    s->next_free = free_head;
    free_head = s->index;
    pthread_mutex_unlock(&registry_lock);
}

void memra__handle_free(struct memra__slot *s)
{
    retire(s);
    release_slot(s);
}

void memra__engine_retire(MemraEngine *e)
{
    /* The destroying call holds the slot until it leaves; the slot goes back to the free list
     * then, so that a new engine in it is never seen as in use by the old one's call. */
    memra__call *c = current_call;
    retire(e->slot);
    if (c != NULL && c->engine == e) {
        c->engine = NULL;
        c->retired = true;
    }
}

uint32_t memra__engine_refusals(const MemraEngine *e)
{
    return atomic_load_explicit(&e->slot->refused, memory_order_relaxed);
}

/* Marks the capture as failed with the thread's last message; the first failure wins. */
static void capture_note(memra__capture *c, MemraStatus status)
{
    if (c->failure != MEMRA_STATUS_OK)
        return;
    c->failure = status;
    snprintf(c->failure_msg, sizeof c->failure_msg,
             "call %d of the step made a call that failed (%s)", c->call + 1,
             memra_last_error_message());
}

/* Inside a graph step, a refused call on the capturing engine, or one whose engine handle is
 * not live (it may have been meant for the capturing engine), fails the capture: the graph
 * would otherwise silently lack the operation. The innermost call of the thread tells whether a
 * step is running: only a step calls back into an engine while a call on it is in progress. */
static void note_in_step(MemraStatus status, bool handle_refused)
{
    memra__call *c = current_call;
    if (c == NULL || c->engine == NULL || c->engine->capture == NULL)
        return;
    if (handle_refused || c->nested)
        capture_note(c->engine->capture, status);
}

void memra__note_failure(MemraStatus status)
{
    note_in_step(status, false);
}

static MemraStatus refuse_handle(const char *fn, const char *why)
{
    MemraStatus st = memra__fail(MEMRA_STATUS_INVALID_ARGUMENT, fn,
                                 "parameter 'engine': expected a live engine from "
                                 "memra_engine_create, got %s",
                                 why);
    note_in_step(st, true);
    return st;
}

MemraStatus memra__enter(memra__call *c, const char *fn, const MemraEngine *handle)
{
    struct memra__slot *s = NULL;
    uint64_t serial = 0;
    memra__call **current = &current_call;
    uintptr_t me = (uintptr_t)current, expected = 0;
    const char *why = not_live(handle, MEMRA__HANDLE_ENGINE, &s, &serial);

    c->fn = fn;
    if (why != NULL)
        return refuse_handle(fn, why);
    if (atomic_load_explicit(&s->owner, memory_order_relaxed) == me) {
        /* This thread is already inside a call on the engine: a graph step calling back. */
        c->nested = true;
    } else if (atomic_compare_exchange_strong_explicit(
                   &s->owner, &expected, me, memory_order_acquire, memory_order_relaxed)) {
        c->owns = true;
        /* Destroyed between the lookup and the compare-and-swap. */
        if (atomic_load_explicit(&s->serial, memory_order_acquire) != serial) {
            atomic_store_explicit(&s->owner, 0, memory_order_release);
            return refuse_handle(fn, "a destroyed handle");
        }
    } else {
        atomic_fetch_add_explicit(&s->refused, 1, memory_order_relaxed);
        return memra__fail(MEMRA_STATUS_INVALID_ARGUMENT, fn,
                           "parameter 'engine': engine in use by another thread (calls that "
                           "name the same engine must not overlap)");
    }
    c->slot = s;
    c->engine = unhide(atomic_load_explicit(&s->object, memory_order_relaxed));
    c->current = current;
    c->outer = *current;
    *current = c;
    return MEMRA_STATUS_OK;
}

void memra__leave(memra__call *c)
{
    if (c->slot == NULL)
        return;
    *c->current = c->outer;
    if (c->owns)
        atomic_store_explicit(&c->slot->owner, 0, memory_order_release);
    if (c->retired)
        release_slot(c->slot);
}

const memra__call *memra__current_call(void)
{
    return current_call;
}

MemraStatus memra__resolve_graph(const char *fn, const MemraEngine *e, const MemraGraph *handle,
                                 MemraGraph **out)
{
    struct memra__slot *s = NULL;
    uint64_t serial = 0;
    const char *why = not_live(handle, MEMRA__HANDLE_GRAPH, &s, &serial);
    MEMRA__FAIL_IF(why != NULL, MEMRA_STATUS_INVALID_ARGUMENT, fn,
                   "parameter 'graph': expected a live graph from memra_graph_capture, got %s",
                   why);
    uintptr_t parent = atomic_load_explicit(&s->parent, memory_order_relaxed);
    uintptr_t object = atomic_load_explicit(&s->object, memory_order_relaxed);
    /* A graph of another engine may be destroyed by that engine's thread while this reads its
     * slot: the serial, read again, says whether the fields belong together. A graph of `e`
     * cannot change meanwhile, because this thread holds `e`. */
    atomic_thread_fence(memory_order_acquire);
    MEMRA__FAIL_IF(atomic_load_explicit(&s->serial, memory_order_relaxed) != serial,
                   MEMRA_STATUS_INVALID_ARGUMENT, fn,
                   "parameter 'graph': expected a live graph from memra_graph_capture, got a "
                   "destroyed handle");
    MEMRA__FAIL_IF(parent != hide(e), MEMRA_STATUS_INVALID_ARGUMENT, fn,
                   "parameter 'graph': expected a graph captured on this engine, got one of "
                   "another engine");
    *out = unhide(object);
    return MEMRA_STATUS_OK;
}
