/*
 * Exported entry points of ABI 1.1 and 1.2: the verify, the sizes of its journal and workspace,
 * the journal commit and the device-side rollback. Each validates (src/validate.c), then dispatches
 * to the engine's backend, like the 1.0 operations in api_ops.c.
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "engine.h"
#include "status.h"
#include "validate.h"

MEMRA__EXPORT MemraStatus memra_verify_args_init(MemraVerifyArgs *args)
{
    MEMRA__TRY(memra__check_out(__func__, "args", args));
    memset(args, 0, sizeof *args);
    args->struct_size = sizeof *args;
    args->mode = MEMRA_VERIFY_MODE_SNAPSHOTS;
    args->head_order = MEMRA_HEAD_ORDER_TILED;
    args->d_state = MEMRA_D_STATE;
    /* No value of eps or scale is right for every model: NaN makes the validator refuse a
     * caller who did not set them. */
    args->eps = NAN;
    args->scale = NAN;
    return MEMRA_STATUS_OK;
}

/* A verify and a journal commit are one backend entry; only what the validation accepts differs.
 * The caller has entered the engine (MEMRA__ENTER belongs in the exported function itself). */
static MemraStatus verify_or_commit(const char *fn, MemraEngine *engine, bool commit,
                                    const MemraVerifyArgs *args)
{
    memra__verify_args a;
    MEMRA__TRY(memra__check_engine(fn, engine));
    MEMRA__TRY(memra__validate_verify(fn, commit, args, &a));
    return memra__enqueue_verify(engine, commit ? MEMRA__OP_COMMIT : MEMRA__OP_VERIFY, &a);
}

MEMRA__EXPORT MemraStatus memra_gdn_verify(MemraEngine *engine, const MemraVerifyArgs *args)
{
    MEMRA__ENTER(engine);
    return verify_or_commit(__func__, engine, false, args);
}

MEMRA__EXPORT MemraStatus memra_gdn_journal_len(size_t d_state, size_t num_k, size_t num_v,
                                                size_t t_max, size_t *out_len)
{
    return memra__validate_journal_len(__func__, d_state, num_k, num_v, t_max, out_len);
}

MEMRA__EXPORT MemraStatus memra_gdn_verify_workspace_len(const MemraVerifyArgs *args, bool commit,
                                                         size_t *out_len)
{
    return memra__validate_workspace_len(__func__, args, commit, out_len);
}

MEMRA__EXPORT MemraStatus memra_gdn_journal_commit(MemraEngine *engine, const MemraVerifyArgs *args)
{
    MEMRA__ENTER(engine);
    return verify_or_commit(__func__, engine, true, args);
}

MEMRA__EXPORT MemraStatus memra_gdn_rollback(MemraEngine *engine, const MemraVerifyArgs *args)
{
    MEMRA__ENTER(engine);
    memra__rollback_args a;
    MEMRA__TRY(memra__check_engine(__func__, engine));
    MEMRA__TRY(memra__validate_rollback(__func__, args, &a));
    return memra__enqueue_rollback(engine, MEMRA__OP_ROLLBACK, &a);
}
