/* reduce_ops.h — the reductions the reduce and cumulative rows name, shared by
 * their rules (src/prims/reduce.c, which defines the names) and their kernels
 * (src/cpu/reduce.c). */
#ifndef OLYMPUS_PRIMS_REDUCE_OPS_H
#define OLYMPUS_PRIMS_REDUCE_OPS_H

typedef enum oly_reduce_op {
    OLY_REDUCE_SUM, OLY_REDUCE_PROD, OLY_REDUCE_MAX, OLY_REDUCE_MIN, OLY_REDUCE_AND, OLY_REDUCE_OR
} oly_reduce_op;
/* Outside the enum, so switches over every op stay checked (-Wswitch). */
#define OLY_REDUCE_COUNT (OLY_REDUCE_OR + 1)

/* The reduce row of each op, by op: "reduce_sum", ... (for messages). */
extern const char *const oly__reduce_op_names[OLY_REDUCE_COUNT];

#endif /* OLYMPUS_PRIMS_REDUCE_OPS_H */
