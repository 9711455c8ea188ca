/* fused.h — a fused group of elementwise equations as the CPU backend runs it
 * (src/cpu/fused.c): one loop over tiles of the group's flat index space, each
 * tile running the members' own kernels (src/cpu's table) on tile-sized
 * pieces, so values that stay inside the group live in small tile buffers and
 * never reach memory. The executor builds the plan (src/exec/fuse.c) and runs
 * it as one step whose kernel is oly__cpu_fused with the plan as its params.
 *
 * Every value of a group is a slot. The group's index space has n elements
 * (every member's output has n, in row-major order); a tile is [lo, hi) of it:
 *   IN      a group input of n elements, read in place at lo
 *   SCALAR  a rank-0 value (an input, or a broadcast of one that every reader
 *           accepts as a rank-0 operand): the same pointer for every tile
 *   BCAST   a broadcast_in_dim of a group input: gathered per tile with stride
 *           0 along the broadcast dims into its own tile buffer (or pointed at
 *           in place when the tile is one dense run of the source); a rank-0
 *           source is filled once per call
 *   TEMP    a value read only inside the group: a tile buffer, reused once dead
 *   OUT     a value read outside the group: written in place into output idx
 */
#ifndef OLYMPUS_CPU_FUSED_H
#define OLYMPUS_CPU_FUSED_H

#include "internal.h"

typedef enum oly_fslot_kind {
    OLY_FSLOT_IN,
    OLY_FSLOT_SCALAR,
    OLY_FSLOT_BCAST,
    OLY_FSLOT_TEMP,
    OLY_FSLOT_OUT,
    OLY_FSLOT_KIND_COUNT
} oly_fslot_kind;

typedef struct oly_fslot {
    oly_fslot_kind kind;
    oly_dtype dtype;
    size_t es;        /* dtype's element size */
    int idx;          /* IN, SCALAR: group input; OUT: group output; TEMP, BCAST: tile
                         buffer; BCAST also reads group input bc_in */
    int bc_in;        /* BCAST: the group input gathered */
    int bc;           /* BCAST: its entry in oly_fused.bcast */
} oly_fslot;

/* A broadcast read: the group's index space as dims (unit dims dropped, dense
 * neighbours merged) with element strides into the source, 0 along broadcast
 * dims. constant: every element is the source's one element. */
typedef struct oly_fbcast {
    int rank;
    bool constant;
    int64_t dims[OLY_MAX_RANK];
    int64_t stride[OLY_MAX_RANK];
} oly_fbcast;

/* One member, run per tile. fn NULL: a copy of slot in[0] into out[0] (a
 * reshape whose value leaves the group). The avals are the tile's: rank 1 of
 * the tile length (rank 0 for SCALAR operands); *_last for the last, shorter
 * tile. */
typedef struct oly_fop {
    oly_kernel_fn fn;
    const oly_eqn *eqn;           /* borrowed: the member (params, name for errors) */
    int n_in, n_out;
    int ref;                      /* its operands: oly_fused.ref_slot[ref .. ref+n_in+n_out) */
    const oly_aval *aval;         /* n_in + n_out: full tile */
    const oly_aval *aval_last;    /* n_in + n_out: the last tile */
} oly_fop;

/* An operand pointer that changes from tile to tile: ref's is its slot's
 * pointer + lo * step (IN and OUT: step = the element size; a gathered BCAST:
 * step 0, the slot's pointer being the tile's gather). */
typedef struct oly_fmove {
    int ref, slot;
    size_t step;
} oly_fmove;

/* A linear chain: every member is an add, sub, mul or div of the previous
 * member's value (the first: a group input's) and a rank-0 operand, or a
 * neg of it, all of one float dtype, the last writing the group's one
 * output. It runs with the value in vector registers, several vectors at a
 * time, the operations the kernels run in the same order (exact IEEE
 * operations, no contraction): the same bits, no tile buffers. */
typedef enum oly_fcode {
    OLY_FC_ADD, OLY_FC_ADD_R,   /* v + s, s + v */
    OLY_FC_SUB, OLY_FC_SUB_R,   /* v - s, s - v */
    OLY_FC_MUL, OLY_FC_MUL_R,
    OLY_FC_DIV, OLY_FC_DIV_R,
    OLY_FC_NEG,
    OLY_FC_COUNT
} oly_fcode;

typedef struct oly_fchain {
    bool f64;                     /* float64, else float32 */
    int in;                       /* the group input the chain starts from */
    int n;                        /* ops */
    const uint8_t *code;          /* n oly_fcode */
    const int *scalar;            /* n: the group input of the rank-0 operand (-1: neg) */
} oly_fchain;

/* A register program: a group of f32 (or f64) members that are each an
 * add, sub, mul, div, neg, abs, square, sqrt, integer_pow, copy or one of
 * the SLEEF functions the unary kernels call (oly_frmath), with no broadcast
 * slot, runs block by block with every slot's values in a small register
 * file: a block's inputs are loaded once (rank-0 inputs once per call), the
 * members applied in program order to whole vectors, including calls of the
 * same SLEEF vector functions the kernels call, and the outputs stored once.
 * Each element gets the operations and functions the kernels give it, so the
 * bits are those of the unfused program; no tile buffers, no kernel calls. */
typedef enum oly_frcode {
    OLY_FR_ADD, OLY_FR_SUB, OLY_FR_MUL, OLY_FR_DIV,
    OLY_FR_NEG, OLY_FR_ABS, OLY_FR_SQUARE, OLY_FR_SQRT,
    OLY_FR_IPOW,                  /* integer_pow: the kernel's repeated squaring */
    OLY_FR_COPY,                  /* a reshape / copy member */
    OLY_FR_MATH,                  /* a SLEEF function: oly_frop.math */
    OLY_FR_COUNT
} oly_frcode;

typedef struct oly_frop {
    uint8_t code;                 /* oly_frcode */
    uint8_t math;                 /* OLY_FR_MATH: index into fused.c's function table */
    int a, b, o;                  /* operand and result slots (b: binary codes only) */
    int64_t e;                    /* OLY_FR_IPOW: the exponent */
} oly_frop;

typedef struct oly_fregs {
    bool f64;                     /* float64, else float32 */
    int n;                        /* ops, in program order */
    const oly_frop *op;           /* n */
} oly_fregs;

typedef struct oly_fused {
    int64_t n;                    /* elements of the index space */
    int64_t tile;                 /* elements per tile (> 0) */
    int n_in, n_out;              /* the step's inputs and outputs */
    int n_slot, n_op, n_ref, n_buf, n_bcast;
    size_t buf_bytes;             /* bytes of one tile buffer (aligned) */
    const oly_fslot *slot;        /* n_slot */
    const oly_fop *op;            /* n_op, in program order */
    const int *ref_slot;          /* n_ref: every op's operand slots */
    const oly_fbcast *bcast;      /* n_bcast */
    int n_move, n_gather;
    const oly_fmove *move;        /* n_move: the operands that move per tile */
    const int *gather;            /* n_gather: BCAST slots gathered per tile */
    bool last_differs;            /* the last tile is shorter (its avals differ) */
    const oly_fchain *chain;      /* NULL, or the group as a linear chain */
    const oly_fregs *regs;        /* NULL, or the group as a register program */
} oly_fused;

/* g as a linear chain (oly_fchain), allocated in ar, or NULL when it is not
 * one (or on out of memory: the tile path runs it then). g's slots, ops and
 * refs must be final. */
const oly_fchain *oly__cpu_fused_chain(const oly_fused *g, oly_arena *ar);

/* g as a register program (oly_fregs), allocated in ar, or NULL when it is
 * not one (or on out of memory: the tile path runs it then). g's slots, ops
 * and refs must be final. */
const oly_fregs *oly__cpu_fused_regs(const oly_fused *g, oly_arena *ar);

/* Whether register programs run at the AVX2 level too (default false: the
 * AVX2 loops, built and tested, measured slower than the tiles there: the
 * sin/cos row on 1M f32, one thread, ~3.06 vs ~2.70 ms of CPU a call; at
 * AVX-512 ~1.65-1.72 vs ~1.74). Tests turn it on; not for concurrent use with
 * running kernels. */
extern atomic_bool oly__cpu_fused_regs_avx2;

/* The group kernel: ctx->params is the oly_fused plan, ctx->in its inputs,
 * ctx->out its outputs. Splits the tiles by ctx->ith / nth. */
oly_status oly__cpu_fused(const oly_kernel_ctx *ctx);
/* Its entries: [0] plain, [1] with inplace_ok (the plan reads input 0 only
 * tile by tile and writes its one output last, so output 0 may take input 0's
 * buffer). */
extern const oly_cpu_kernel oly__cpu_fused_entry[2];

/* Runs tiles [t_lo, t_hi) of g (what oly__cpu_fused runs for one thread's
 * share). ctx supplies the inputs, outputs, device and run for the members'
 * contexts. Allocates its tile buffers (on the stack when small). */
oly_status oly__cpu_fused_tiles(const oly_fused *g, const oly_kernel_ctx *ctx, int64_t t_lo,
                                int64_t t_hi);

#endif /* OLYMPUS_CPU_FUSED_H */
