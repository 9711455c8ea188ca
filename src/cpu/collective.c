/* collective.c — the CPU kernel of the collective rows. Today the only binder
 * of axis names is vmap, which rewrites every collective naming its axis into
 * ordinary operations, so a collective that reaches execution names an axis
 * nothing bound: the kernel reports it, naming the primitive and the axis.
 * (Under pmap each device's stream will run its share and the kernel will
 * rendezvous with the others: docs/design.md, "Collectives".) */
#include "cpu/cpu.h"

static oly_status unbound(const oly_kernel_ctx *ctx)
{
    const oly_prim *p = ctx->eqn ? ctx->eqn->prim : NULL;
    const char *names = NULL;
    for (int i = 0; p && ctx->params && i < p->n_fields; i++)
        if (p->fields[i].kind == OLY_FIELD_STR) { /* axes / axis_name comes first */
            names = *(const char *const *)((const char *)ctx->params + p->fields[i].offset);
            break;
        }
    return oly__error(OLY_ERR_INVALID,
                      "%s: unbound axis name %s: a collective runs only inside a "
                      "vmap(axis_name=...) that binds its axis (pmap and shard_map are not "
                      "built yet)",
                      p ? p->name : "collective", names ? names : "");
}

const oly_cpu_kernel oly__cpu_psum = {.fn = unbound};
const oly_cpu_kernel oly__cpu_pmax = {.fn = unbound};
const oly_cpu_kernel oly__cpu_pmin = {.fn = unbound};
const oly_cpu_kernel oly__cpu_all_gather = {.fn = unbound};
const oly_cpu_kernel oly__cpu_reduce_scatter = {.fn = unbound};
const oly_cpu_kernel oly__cpu_ppermute = {.fn = unbound};
const oly_cpu_kernel oly__cpu_all_to_all = {.fn = unbound};
const oly_cpu_kernel oly__cpu_axis_index = {.fn = unbound};
