/*
 * Exported entry points: engines. Each validates, then dispatches.
 */
#include "engine.h"
#include "status.h"
#include "validate.h"

MEMRA__EXPORT MemraStatus memra_engine_options_init(MemraEngineOptions *options)
{
    MEMRA__TRY(memra__check_out(__func__, "options", options));
    memra__options_default(options);
    return MEMRA_STATUS_OK;
}

MEMRA__EXPORT MemraStatus memra_engine_create(const MemraEngineOptions *options,
                                              MemraEngine **out_engine)
{
    MEMRA__TRY(memra__check_out(__func__, "out_engine", out_engine));
    return memra__engine_create(__func__, options, out_engine);
}

MEMRA__EXPORT MemraStatus memra_engine_destroy(MemraEngine *engine)
{
    if (engine == NULL)
        return MEMRA_STATUS_OK;
    MEMRA__ENTER(engine);
    MEMRA__TRY(memra__check_engine_handle(__func__, engine));
    return memra__engine_destroy(__func__, engine);
}

MEMRA__EXPORT MemraStatus memra_engine_backend(const MemraEngine *engine, MemraBackend *out_backend)
{
    MEMRA__ENTER(engine);
    MEMRA__TRY(memra__check_engine_handle(__func__, engine));
    MEMRA__TRY(memra__check_out(__func__, "out_backend", out_backend));
    *out_backend = engine->backend->kind;
    return MEMRA_STATUS_OK;
}

MEMRA__EXPORT MemraStatus memra_engine_stream(const MemraEngine *engine, void **out_stream)
{
    MEMRA__ENTER(engine);
    MEMRA__TRY(memra__check_engine_handle(__func__, engine));
    MEMRA__TRY(memra__check_out(__func__, "out_stream", out_stream));
    *out_stream = engine->dev.stream;
    return MEMRA_STATUS_OK;
}

MEMRA__EXPORT MemraStatus memra_engine_synchronize(MemraEngine *engine)
{
    MEMRA__ENTER(engine);
    MEMRA__TRY(memra__check_engine(__func__, engine));
    if (engine->capture != NULL)
        return memra__capture_forbid(engine, __func__, "synchronising the engine");
    MEMRA__TRY(memra__from_backend(__func__, engine->backend->synchronize(engine)));
    return memra__from_backend(__func__, engine->backend->take_findings(engine));
}
