/*
 * Graph capture, replay and destruction, shared by both backends. The backend records or
 * captures the operations; this layer runs the step three times, decides whether the capture
 * succeeded, and ties the buffers allocated meanwhile to the graph.
 */
#include <stdio.h>
#include <stdlib.h>

#include "engine.h"
#include "status.h"

/* The step runs twice eagerly (so that lazy set-up inside the host's code and the library
 * happens outside the capture, as memra-engine's capture_graph_retained does), then once more
 * while its operations are recorded. */
#define MEMRA__WARMUPS 2

static void note_step_failure(memra__capture *c, MemraStatus st)
{
    if (c->failure != MEMRA_STATUS_OK)
        return;
    c->failure = st;
    snprintf(c->failure_msg, sizeof c->failure_msg, "call %d of the step returned %s (%s)",
             c->call + 1, memra_status_string(st), memra_last_error_message());
}

/* A call on the engine from another thread was refused while the step ran: it may have been
 * the step's (a step that hands work to other threads), so the graph may lack it. */
static void note_refusals(memra__capture *c, const MemraEngine *e, uint32_t before)
{
    if (c->failure != MEMRA_STATUS_OK || memra__engine_refusals(e) == before)
        return;
    c->failure = MEMRA_STATUS_CAPTURE_ERROR;
    snprintf(c->failure_msg, sizeof c->failure_msg,
             "during call %d of the step, a call on the engine from another thread was refused "
             "(engine in use by another thread)",
             c->call + 1);
}

MemraStatus memra__graph_capture(const char *fn, MemraEngine *e, MemraStepFn step, void *user,
                                 MemraGraph **out)
{
    memra__capture cap = {0};
    MemraStatus st = MEMRA_STATUS_OK;
    MemraGraph *g;
    uint32_t refusals = memra__engine_refusals(e);

    if (e->capture != NULL)
        return memra__capture_forbid(e, fn, "a nested memra_graph_capture");
    g = calloc(1, sizeof *g);
    MEMRA__FAIL_IF(g == NULL, MEMRA_STATUS_OUT_OF_MEMORY, fn, "cannot allocate the graph");
    g->engine = e;
    cap.graph = g;
    e->capture = &cap;
    /* A failing call inside the step reaches the capture through memra__fail's hook: the
     * status layer cannot call up into this one, so it learns here whom to tell, before any
     * step has run. Installing the same hook again is harmless. */
    memra__set_failure_hook(memra__note_failure);

    for (cap.call = 0; cap.call <= MEMRA__WARMUPS && cap.failure == MEMRA_STATUS_OK; cap.call++) {
        if (cap.call == MEMRA__WARMUPS) {
            st = memra__from_backend(fn, e->backend->capture_begin(e));
            if (st != MEMRA_STATUS_OK)
                break;
            cap.recording = true;
        }
        /* The step gets the host's handle: its calls enter the engine again, nested in this
         * one (the thread already holds it). */
        MemraStatus step_st = step((MemraEngine *)e->handle, user);
        if (step_st != MEMRA_STATUS_OK)
            note_step_failure(&cap, step_st);
        note_refusals(&cap, e, refusals);
    }
    if (cap.recording) {
        bool keep = cap.failure == MEMRA_STATUS_OK;
        MemraStatus end_st = e->backend->capture_end(e, keep, &g->exec);
        if (keep && end_st != MEMRA_STATUS_OK) {
            cap.failure = end_st;
            snprintf(cap.failure_msg, sizeof cap.failure_msg, "ending the capture failed (%s)",
                     memra_last_error_message());
        }
    }
    e->capture = NULL;

    bool captured = st == MEMRA_STATUS_OK && cap.failure == MEMRA_STATUS_OK;
    if (captured) {
        st = memra__handle_new(fn, MEMRA__HANDLE_GRAPH, g, e, &g->handle, &g->slot);
        if (st == MEMRA_STATUS_OK) {
            e->live_graphs++;
            *out = (MemraGraph *)g->handle;
            return MEMRA_STATUS_OK;
        }
    }
    /* The warm-up calls may still be using the step's buffers on the device. */
    if (e->dev.fault == MEMRA_STATUS_OK)
        (void)e->backend->synchronize(e);
    /* Captured, but no handle could be made for it: the graph goes like a failed capture's. */
    if (captured)
        e->backend->graph_free(e, g->exec);
    memra__mem_release_owned(e, g, false);
    free(g);
    if (st != MEMRA_STATUS_OK)
        return st;
    /* A device fault is reported as such (it is sticky); everything else the step did wrong
     * is a capture error that leaves the engine usable. */
    if (cap.failure == MEMRA_STATUS_DEVICE_ERROR && e->dev.fault != MEMRA_STATUS_OK)
        return memra__fail(MEMRA_STATUS_DEVICE_ERROR, fn, "%s", cap.failure_msg);
    return memra__fail(MEMRA_STATUS_CAPTURE_ERROR, fn, "no graph was created: %s", cap.failure_msg);
}

MemraStatus memra__graph_launch(const char *fn, MemraEngine *e, const MemraGraph *g)
{
    MEMRA__FAIL_IF(e->capture != NULL, MEMRA_STATUS_INVALID_ARGUMENT, fn,
                   "parameter 'graph': cannot launch a graph inside a memra_graph_capture step");
    return memra__from_backend(fn, e->backend->graph_launch(e, g->exec));
}

MemraStatus memra__graph_destroy(const char *fn, MemraEngine *e, MemraGraph *g)
{
    MEMRA__FAIL_IF(e->capture != NULL, MEMRA_STATUS_INVALID_ARGUMENT, fn,
                   "parameter 'graph': cannot destroy a graph inside a memra_graph_capture step");
    /* Replays may still be running on the device and reading the retained buffers. */
    if (e->dev.fault == MEMRA_STATUS_OK)
        (void)e->backend->synchronize(e);
    memra__mem_release_owned(e, g, false);
    e->backend->graph_free(e, g->exec);
    memra__handle_free(g->slot);
    e->live_graphs--;
    free(g);
    return MEMRA_STATUS_OK;
}
