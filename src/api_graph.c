/*
 * Exported entry points: graphs. Each validates, then dispatches to src/graph.c.
 */
#include "engine.h"
#include "status.h"
#include "validate.h"

MEMRA__EXPORT MemraStatus memra_graph_capture(MemraEngine *engine, MemraStepFn step, void *user,
                                              MemraGraph **out_graph)
{
    MEMRA__ENTER(engine);
    MEMRA__TRY(memra__check_engine(__func__, engine));
    MEMRA__FAIL_IF(step == NULL, MEMRA_STATUS_INVALID_ARGUMENT, __func__,
                   "parameter 'step': expected a step function, got NULL");
    MEMRA__TRY(memra__check_out(__func__, "out_graph", out_graph));
    return memra__graph_capture(__func__, engine, step, user, out_graph);
}

MEMRA__EXPORT MemraStatus memra_graph_launch(MemraEngine *engine, const MemraGraph *graph)
{
    MEMRA__ENTER(engine);
    MemraGraph *g = NULL;
    MEMRA__TRY(memra__check_engine(__func__, engine));
    MEMRA__TRY(memra__check_graph(__func__, engine, graph, &g));
    return memra__graph_launch(__func__, engine, g);
}

MEMRA__EXPORT MemraStatus memra_graph_destroy(MemraEngine *engine, MemraGraph *graph)
{
    MEMRA__ENTER(engine);
    MemraGraph *g = NULL;
    MEMRA__TRY(memra__check_engine_handle(__func__, engine));
    if (graph == NULL)
        return MEMRA_STATUS_OK;
    MEMRA__TRY(memra__check_graph(__func__, engine, graph, &g));
    return memra__graph_destroy(__func__, engine, g);
}
