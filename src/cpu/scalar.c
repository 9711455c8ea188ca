/* scalar.c — one-element elementwise steps without a kernel call.
 *
 * A loop body such as `i + 1; x * 0.999 + 1` is a handful of equations on
 * rank-0 values; through the kernels each costs a table dispatch, a share
 * split and a loop of one element (~100 instructions). Here each (row, dtype)
 * pair the executor meets with one-element operands gets a code
 * (oly__cpu_scalar_code), and the code runs inline: one equation through
 * pointers (oly__cpu_scalar_step), or a whole straight-line program on a file
 * of 8-byte registers (oly__cpu_scalar_run: loop bodies, src/cpu/loop.c).
 *
 * The semantics are the kernels', op for op (src/cpu/elementwise.c): IEEE
 * arithmetic in the operand type (no contraction: -std=c11 compiles with
 * -ffp-contract=off), integers wrap, integer division by zero gives -1 (all
 * ones unsigned) and INT_MIN / -1 gives INT_MIN, max/min propagate NaN (the
 * first NaN), bool and/or/xor/max/min are logical, comparisons give 0/1, and
 * conversions go through oly__convert itself. tests/c/test_runtime.c runs
 * every code against its kernel on special values (NaN, ±inf, ±0, the integer
 * extremes). Transcendentals are not here: their kernels may take vector
 * paths whose last bit differs from libm's. */
#include "cpu/cpu.h"

#include <math.h>

/* Every code: name, row, operand dtype, result dtype, arity, and the
 * operation on registers A, B, C into O. */
#define ARITH(s, D, T, F)                                                                 \
    X(add_##s, add, D, D, 2, O->F = A->F + B->F)                                          \
    X(sub_##s, sub, D, D, 2, O->F = A->F - B->F)                                          \
    X(mul_##s, mul, D, D, 2, O->F = A->F * B->F)
#define WRAP(s, D, T, F, U)                                                               \
    X(add_##s, add, D, D, 2, O->F = (T)((U)A->F + (U)B->F))                               \
    X(sub_##s, sub, D, D, 2, O->F = (T)((U)A->F - (U)B->F))                               \
    X(mul_##s, mul, D, D, 2, O->F = (T)((U)A->F * (U)B->F))                               \
    X(neg_##s, neg, D, D, 1, O->F = (T)(0u - (U)A->F))                                    \
    X(max_##s, max, D, D, 2, O->F = A->F > B->F ? A->F : B->F)                            \
    X(min_##s, min, D, D, 2, O->F = A->F < B->F ? A->F : B->F)                            \
    X(and_##s, and, D, D, 2, O->F = A->F & B->F)                                          \
    X(or_##s, or, D, D, 2, O->F = A->F | B->F)                                            \
    X(xor_##s, xor, D, D, 2, O->F = A->F ^ B->F)                                          \
    X(not_##s, not, D, D, 1, O->F = (T)~(U)A->F)
#define FLOATS(s, D, T, F)                                                                \
    ARITH(s, D, T, F)                                                                     \
    X(div_##s, div, D, D, 2, O->F = A->F / B->F)                                          \
    X(neg_##s, neg, D, D, 1, O->F = -A->F)                                                \
    X(max_##s, max, D, D, 2,                                                              \
      O->F = (A->F > B->F || A->F != A->F) ? A->F : B->F)                                 \
    X(min_##s, min, D, D, 2,                                                              \
      O->F = (A->F < B->F || A->F != A->F) ? A->F : B->F)                                 \
    X(sqrt_##s, sqrt, D, D, 1, O->F = sqrt_##s(A->F))
#define COMPARE(s, D, F)                                                                  \
    X(eq_##s, eq, D, OLY_BOOL, 2, O->b = A->F == B->F)                                    \
    X(ne_##s, ne, D, OLY_BOOL, 2, O->b = A->F != B->F)                                    \
    X(lt_##s, lt, D, OLY_BOOL, 2, O->b = A->F < B->F)                                     \
    X(le_##s, le, D, OLY_BOOL, 2, O->b = A->F <= B->F)                                    \
    X(gt_##s, gt, D, OLY_BOOL, 2, O->b = A->F > B->F)                                     \
    X(ge_##s, ge, D, OLY_BOOL, 2, O->b = A->F >= B->F)

static inline float sqrt_f32(float x) { return sqrtf(x); }
static inline double sqrt_f64(double x) { return sqrt(x); }

/* div: toward zero; x / 0 = -1 (all ones unsigned); INT_MIN / -1 = INT_MIN. */
static inline int32_t div_i32(int32_t x, int32_t y)
{
    return y == 0 ? -1 : y == -1 ? (int32_t)(0u - (uint32_t)x) : x / y;
}
static inline int64_t div_i64(int64_t x, int64_t y)
{
    return y == 0 ? -1 : y == -1 ? (int64_t)(0u - (uint64_t)x) : x / y;
}

#define SCALAR_CODES(X)                                                                   \
    FLOATS(f32, OLY_FLOAT32, float, f32)                                                  \
    FLOATS(f64, OLY_FLOAT64, double, f64)                                                 \
    WRAP(i32, OLY_INT32, int32_t, i32, uint32_t)                                          \
    WRAP(i64, OLY_INT64, int64_t, i64, uint64_t)                                          \
    WRAP(u32, OLY_UINT32, uint32_t, u32, uint32_t)                                        \
    WRAP(u64, OLY_UINT64, uint64_t, u64, uint64_t)                                        \
    X(div_i32, div, OLY_INT32, OLY_INT32, 2, O->i32 = div_i32(A->i32, B->i32))            \
    X(div_i64, div, OLY_INT64, OLY_INT64, 2, O->i64 = div_i64(A->i64, B->i64))            \
    X(div_u32, div, OLY_UINT32, OLY_UINT32, 2,                                            \
      O->u32 = B->u32 == 0 ? UINT32_MAX : A->u32 / B->u32)                                \
    X(div_u64, div, OLY_UINT64, OLY_UINT64, 2,                                            \
      O->u64 = B->u64 == 0 ? UINT64_MAX : A->u64 / B->u64)                                \
    COMPARE(f32, OLY_FLOAT32, f32)                                                        \
    COMPARE(f64, OLY_FLOAT64, f64)                                                        \
    COMPARE(i32, OLY_INT32, i32)                                                          \
    COMPARE(i64, OLY_INT64, i64)                                                          \
    COMPARE(u32, OLY_UINT32, u32)                                                         \
    COMPARE(u64, OLY_UINT64, u64)                                                         \
    X(eq_bool, eq, OLY_BOOL, OLY_BOOL, 2, O->b = (A->b != 0) == (B->b != 0))              \
    X(ne_bool, ne, OLY_BOOL, OLY_BOOL, 2, O->b = (A->b != 0) != (B->b != 0))              \
    X(lt_bool, lt, OLY_BOOL, OLY_BOOL, 2, O->b = (A->b != 0) < (B->b != 0))               \
    X(le_bool, le, OLY_BOOL, OLY_BOOL, 2, O->b = (A->b != 0) <= (B->b != 0))              \
    X(gt_bool, gt, OLY_BOOL, OLY_BOOL, 2, O->b = (A->b != 0) > (B->b != 0))               \
    X(ge_bool, ge, OLY_BOOL, OLY_BOOL, 2, O->b = (A->b != 0) >= (B->b != 0))              \
    X(and_bool, and, OLY_BOOL, OLY_BOOL, 2, O->b = A->b && B->b)                          \
    X(or_bool, or, OLY_BOOL, OLY_BOOL, 2, O->b = A->b || B->b)                            \
    X(xor_bool, xor, OLY_BOOL, OLY_BOOL, 2, O->b = (A->b != 0) != (B->b != 0))            \
    X(max_bool, max, OLY_BOOL, OLY_BOOL, 2, O->b = (A->b | B->b) != 0)                    \
    X(min_bool, min, OLY_BOOL, OLY_BOOL, 2, O->b = A->b && B->b)                          \
    X(not_bool, not, OLY_BOOL, OLY_BOOL, 1, O->b = A->b == 0)

enum {
    CODE_NONE,
#define X(name, row, din, dout, arity, EXPR) CODE_##name,
    SCALAR_CODES(X)
#undef X
    /* the codes below take their dtypes from the operands */
    CODE_select_bool,           /* select_n(bool which, a, b) */
    CODE_select_i32,            /* select_n(int32 which, a, b): which clamped */
    CODE_convert,               /* convert_element_type through oly__convert */
    CODE_move,                  /* a register copy (register loops' carries) */
    CODE_call,                  /* a host function call: a indexes the run's frames */
    CODE_tap,                   /* a gated tap: a indexes the run's frames */
    CODE_COUNT
};
_Static_assert(CODE_COUNT < 65536, "codes are uint16_t");

typedef struct code_row {
    int row;                    /* OLY_PRIM_ID_* */
    oly_dtype din, dout;
    int arity;
} code_row;

static const code_row codes[] = {
#define X(name, row, din, dout, arity, EXPR) {OLY_PRIM_ID_##row, din, dout, arity},
    SCALAR_CODES(X)
#undef X
};

/* Whether dtype t fits a register and a one-element operand of it can be
 * loaded and stored by size. */
static bool reg_dtype(oly_dtype t)
{
    return (unsigned)t < OLY_DTYPE_COUNT && !oly_dtype_is_complex(t) && oly_dtype_size(t) <= 8;
}

int oly__cpu_scalar_code(const oly_eqn *e, const oly_aval *in, const oly_aval *out)
{
    if (e->n_out != 1 || e->n_sub != 0 || e->effects || oly_aval_size(&out[0]) != 1) return 0;
    for (int i = 0; i < e->n_in; i++)
        if (oly_aval_size(&in[i]) != 1) return 0;
    int id = oly__prim_id(e->prim);
    if (id == OLY_PRIM_ID_select_n) {
        if (e->n_in != 3 || !reg_dtype(out[0].dtype)) return 0;
        if (in[0].dtype == OLY_BOOL) return CODE_select_bool;
        if (in[0].dtype == OLY_INT32) return CODE_select_i32;
        return 0;
    }
    if (id == OLY_PRIM_ID_convert_element_type)
        return e->n_in == 1 && reg_dtype(in[0].dtype) && reg_dtype(out[0].dtype) ? CODE_convert
                                                                                  : 0;
    for (int c = 0; c < OLY_ARRAY_LEN(codes); c++) {
        const code_row *r = &codes[c];
        if (r->row == id && r->arity == e->n_in && r->din == in[0].dtype &&
            (r->arity < 2 || in[1].dtype == r->din) && r->dout == out[0].dtype)
            return c + 1;
    }
    return 0;
}

static __attribute__((noinline)) void convert_op(const oly_sop *op, const oly_sreg *a, oly_sreg *o)
{
    oly_sreg v = {0};
    oly__convert(a, (oly_dtype)op->din, &v, (oly_dtype)op->dout, 1);
    *o = v;
}

int oly__cpu_scalar_call_code(void) { return CODE_call; }
int oly__cpu_scalar_tap_code(void) { return CODE_tap; }
int oly__cpu_scalar_move_code(void) { return CODE_move; }

/* A gated tap's counter, args[0]: an int32 or int64 one inline, any other
 * (and a first test) through oly__cpu_tap_gate, which learns the closed
 * range. Closed (the common case): two compares. */
static inline __attribute__((always_inline)) oly_status tap_op(const oly_host_call *c)
{
    const oly_sreg *q = c->frame.args[0];
    int64_t v;
    switch (c->frame.arg_avals[0].dtype) {
    case OLY_INT32: v = q->i32; break;
    case OLY_INT64: v = q->i64; break;
    default: return oly__cpu_tap_gate((oly_host_call *)c);
    }
    if (__builtin_expect(v >= c->closed_lo && v <= c->closed_hi, 1)) return OLY_OK;
    /* the frames are the run's own (oly__cpu_scalar_frames): writable */
    return oly__cpu_tap_gate((oly_host_call *)c);
}

/* One operation on registers. Inline: the register program's loop and the
 * one-step entry both expand it. Only a call fails. */
static inline __attribute__((always_inline)) oly_status exec_op(const oly_sop *op, oly_sreg *r,
                                                                const oly_host_call *calls)
{
    /* each case reads only the registers it needs */
#define A (&r[op->a])
#define B (&r[op->b])
#define C (&r[op->c])
#define O (&r[op->out])
    switch (op->code) {
#define X(name, row, din, dout, arity, EXPR)                                               \
    case CODE_##name:                                                                     \
        EXPR;                                                                             \
        break;
        SCALAR_CODES(X)
#undef X
    case CODE_select_bool:
        *O = A->b ? *C : *B;
        break;
    case CODE_select_i32:
        *O = A->i32 >= 1 ? *C : *B;
        break;
    case CODE_convert:
        convert_op(op, A, O);
        break;
    case CODE_move:
        *O = *A;
        break;
    case CODE_call:
        return oly__cpu_host_call(&calls[op->a]);
    case CODE_tap:
        return tap_op(&calls[op->a]);
    default:
        break;
    }
#undef A
#undef B
#undef C
#undef O
    return OLY_OK;
}

static inline __attribute__((always_inline)) oly_status run_ops(const oly_sop *ops, int n,
                                                                oly_sreg *r,
                                                                const oly_host_call *calls)
{
    for (const oly_sop *op = ops, *end = ops + n; op < end; op++) {
        oly_status st = exec_op(op, r, calls);
        if (__builtin_expect(st != OLY_OK, 0)) return st;
    }
    return OLY_OK;
}

oly_status oly__cpu_scalar_run(const oly_sop *ops, int n, oly_sreg *r, const oly_host_call *frames)
{
    return run_ops(ops, n, r, frames);
}

void oly__cpu_scalar_frames(const oly_scall *calls, int n, oly_sreg *r, const uint16_t *map,
                            const oly_callback_frame *env, oly_host_call *out, void **ptrs)
{
    for (int k = 0; k < n; k++) {
        const oly_scall *c = &calls[k];
        void **args = ptrs, **res = ptrs + c->n_args;
        ptrs += c->n_args + c->n_results;
        for (int i = 0; i < c->n_args; i++) args[i] = &r[map ? map[c->arg_reg[i]] : c->arg_reg[i]];
        for (int i = 0; i < c->n_results; i++)
            res[i] = &r[map ? map[c->res_reg[i]] : c->res_reg[i]];
        out[k] = (oly_host_call){
            .frame = {.n_args = c->n_args,
                      .args = (const void *const *)args,
                      .arg_avals = c->arg_avals,
                      .n_results = c->n_results,
                      .results = res,
                      .result_avals = c->res_avals,
                      .device = env->device,
                      .kind = c->kind,
                      .n_axes = env->n_axes,
                      .axis_names = env->axis_names,
                      .axis_index = env->axis_index},
            .fn = c->fn,
            .flavour = c->flavour,
            .tap = c->tap,
            .closed_lo = 1, /* nothing known */
            .closed_hi = 0,
        };
    }
}

void oly__cpu_scalar_step(const oly_sop *op, const void *const *in, void *const *out)
{
    /* registers 0..2 the operands, 3 the result (op's a, b, c, out say so) */
    oly_sreg r[4];
    for (int i = 0; i < 3 && op->size_in[i]; i++) oly__sreg_load(&r[i], in[i], op->size_in[i]);
    (void)exec_op(op, r, NULL); /* never a call: call steps run their kernel */
    oly__sreg_store(out[0], &r[3], op->size_out);
}

void oly__cpu_scalar_op(int code, const oly_aval *in, int n_in, const oly_aval *out, int a, int b,
                        int c, int o, oly_sop *op)
{
    *op = (oly_sop){.code = (uint16_t)code, .a = (uint16_t)a, .b = (uint16_t)b, .c = (uint16_t)c,
                    .out = (uint16_t)o};
    for (int i = 0; i < n_in && i < 3; i++) op->size_in[i] = (uint8_t)oly_dtype_size(in[i].dtype);
    op->size_out = (uint8_t)oly_dtype_size(out[0].dtype);
    op->din = (uint8_t)(n_in > 0 ? in[0].dtype : OLY_BOOL);
    op->dout = (uint8_t)out[0].dtype;
}

/* ---------------------------------------------------------------- register loops */

/* A scan or while whose programs are register programs, on one register file.
 * The carries alternate between two register sets: the body of an even
 * iteration reads set X (its carry inputs) and writes set Y (its carry
 * outputs), an odd iteration runs the same ops with X and Y swapped. So a
 * carry never travels through a copy between iterations: an op's result is
 * read straight from the register it was written to. A carry output that is
 * not an op's own result (an input passed through or swapped, a constant, a
 * literal, one value for two carries) gets a register of its own and a move
 * at the end of the body. The condition's registers follow the body's, its
 * carry inputs renamed to the set the iteration reads. */
struct oly_scalar_loop {
    int nc;
    int parity;                 /* which set holds the carries now: 0 X, 1 Y */
    oly_sreg *r;                /* the register file */
    oly_sop *body[2];           /* per parity */
    int n_body;
    oly_sop *cond[2];           /* per parity; NULL for a scan */
    int n_cond;
    uint16_t pred[2];
    uint16_t *carry[2];         /* nc registers of set X, then of set Y */
    const uint8_t *carry_size;  /* borrowed from the body program */
    const uint16_t *body_const; /* borrowed: the body's constant input registers */
    const uint8_t *body_const_size;
    int n_body_const;
    uint16_t *cond_const;       /* the condition's constant input registers */
    const uint8_t *cond_const_size;
    int n_cond_const;
    /* The host function calls' frames: the body's for parity 0, for parity
     * 1, then the condition's likewise (a call op's a indexes them). */
    oly_host_call *calls;
    void *block;                /* owns everything above */
};

/* op with its registers renamed through map; a call op's frame index moved
 * by call_off instead. */
static oly_sop renamed(oly_sop op, const uint16_t *map, int call_off)
{
    if (op.code == CODE_call || op.code == CODE_tap) {
        op.a = (uint16_t)(op.a + call_off);
        return op;
    }
    op.a = map[op.a];
    op.b = map[op.b];
    op.c = map[op.c];
    op.out = map[op.out];
    return op;
}

oly_status oly__cpu_scalar_loop_new(const oly_scalar_prog *body, int body_consts,
                                    const oly_scalar_prog *cond, int cond_consts, int nc,
                                    const oly_callback_frame *env, oly_scalar_loop **out)
{
    *out = NULL;
    int nb = body->n_regs, ncr = cond ? cond->n_regs : 0;
    int nbc = body->n_calls, ncc = cond ? cond->n_calls : 0;
    if (body->n_in != body_consts + nc || body->n_out != nc ||
        (cond && (cond->n_in != cond_consts + nc || cond->n_out != 1)) ||
        ((nbc || ncc) && !env) || 2 * (nbc + ncc) > 65535)
        return oly__error(OLY_ERR_INTERNAL, "register loop: programs do not match the loop");
    /* which carry outputs need a register and a move of their own */
    unsigned char *written = oly__calloc((size_t)nb + 1, 1);
    if (!written) return OLY_ERR_NOMEM;
    for (int i = 0; i < body->n_ops; i++)
        if (body->ops[i].code != CODE_call && body->ops[i].code != CODE_tap)
            written[body->ops[i].out] = 1;
    for (int k = 0; k < nbc; k++)
        for (int j = 0; j < body->calls[k].n_results; j++) written[body->calls[k].res_reg[j]] = 1;
    int n_moves = 0;
    for (int k = 0; k < nc; k++) {
        bool own = written[body->out_reg[k]] == 1;
        for (int j = 0; j < k; j++) own = own && body->out_reg[j] != body->out_reg[k];
        if (!own) n_moves++;
    }
    size_t n_regs = (size_t)nb + (size_t)nc + (size_t)ncr;
    if (n_regs > 65535) {
        free(written);
        return oly__error(OLY_ERR_INTERNAL, "register loop: too many registers");
    }
    size_t n_body = (size_t)body->n_ops + (size_t)n_moves, n_cond = cond ? (size_t)cond->n_ops : 0;
    size_t n_calls = 2 * (size_t)(nbc + ncc);
    size_t n_ptrs = 2 * (size_t)body->n_call_ptrs + (cond ? 2 * (size_t)cond->n_call_ptrs : 0);
    size_t bytes = sizeof(oly_scalar_loop) + n_regs * sizeof(oly_sreg) +
                   n_calls * sizeof(oly_host_call) + n_ptrs * sizeof(void *) +
                   2 * (n_body + n_cond) * sizeof(oly_sop) +
                   (2 * (size_t)nc + (size_t)cond_consts + 2 * n_regs) * sizeof(uint16_t) + 16;
    oly_scalar_loop *L = oly__calloc(1, bytes);
    if (!L) {
        free(written);
        return OLY_ERR_NOMEM;
    }
    L->block = L;
    L->r = (oly_sreg *)(void *)(L + 1);
    L->calls = (oly_host_call *)(void *)(L->r + n_regs);
    void **ptrs = (void **)(void *)(L->calls + n_calls);
    L->body[0] = (oly_sop *)(void *)(ptrs + n_ptrs);
    L->body[1] = L->body[0] + n_body;
    L->cond[0] = cond ? L->body[1] + n_body : NULL;
    L->cond[1] = cond ? L->cond[0] + n_cond : NULL;
    uint16_t *u16 = (uint16_t *)(void *)(L->body[1] + n_body + 2 * n_cond);
    L->carry[0] = u16;
    L->carry[1] = u16 + nc;
    L->cond_const = u16 + 2 * nc;
    uint16_t *map0 = L->cond_const + cond_consts, *map1 = map0 + n_regs;
    L->nc = nc;
    L->n_body = (int)n_body;
    L->n_cond = (int)n_cond;
    L->carry_size = body->out_size;
    L->body_const = body->in_reg;
    L->body_const_size = body->in_size;
    L->n_body_const = body_consts;
    L->cond_const_size = cond ? cond->in_size : NULL;
    L->n_cond_const = cond_consts;

    memcpy(L->r, body->init, (size_t)nb * sizeof(oly_sreg));
    /* the body: X_k its carry inputs, Y_k its results (or a fresh register
     * nb + k and a move) */
    int m = body->n_ops;
    memcpy(L->body[0], body->ops, (size_t)m * sizeof(oly_sop));
    for (int k = 0; k < nc; k++) {
        uint16_t x = body->in_reg[body_consts + k], y = body->out_reg[k];
        bool own = written[y] == 1;
        for (int j = 0; j < k; j++) own = own && body->out_reg[j] != y;
        if (!own) {
            y = (uint16_t)(nb + k);
            L->body[0][m++] = (oly_sop){.code = CODE_move, .a = body->out_reg[k], .out = y};
        }
        L->carry[0][k] = x;
        L->carry[1][k] = y;
    }
    free(written);
    /* parity 1: X and Y swapped everywhere */
    for (size_t q = 0; q < n_regs; q++) map1[q] = (uint16_t)q;
    for (int k = 0; k < nc; k++) {
        map1[L->carry[0][k]] = L->carry[1][k];
        map1[L->carry[1][k]] = L->carry[0][k];
    }
    for (size_t i = 0; i < n_body; i++) L->body[1][i] = renamed(L->body[0][i], map1, nbc);
    if (nbc) {
        oly__cpu_scalar_frames(body->calls, nbc, L->r, NULL, env, L->calls, ptrs);
        oly__cpu_scalar_frames(body->calls, nbc, L->r, map1, env, L->calls + nbc,
                               ptrs + body->n_call_ptrs);
        ptrs += 2 * body->n_call_ptrs;
    }
    if (cond) {
        /* the condition's registers after the body's and the moves', its
         * carry inputs renamed to the set each parity reads */
        uint16_t off = (uint16_t)(nb + nc);
        memcpy(L->r + off, cond->init, (size_t)ncr * sizeof(oly_sreg));
        for (int q = 0; q < ncr; q++) map0[q] = (uint16_t)(off + q);
        for (int i = 0; i < cond_consts; i++) L->cond_const[i] = map0[cond->in_reg[i]];
        for (int p = 0; p < 2; p++) {
            for (int k = 0; k < nc; k++) map0[cond->in_reg[cond_consts + k]] = L->carry[p][k];
            int off_p = 2 * nbc + p * ncc;
            for (size_t i = 0; i < n_cond; i++) L->cond[p][i] = renamed(cond->ops[i], map0, off_p);
            L->pred[p] = map0[cond->out_reg[0]];
            if (ncc) {
                oly__cpu_scalar_frames(cond->calls, ncc, L->r, map0, env, L->calls + off_p, ptrs);
                ptrs += cond->n_call_ptrs;
            }
        }
    }
    *out = L;
    return OLY_OK;
}

void oly__cpu_scalar_loop_free(oly_scalar_loop *L) { free(L ? L->block : NULL); }

void oly__cpu_scalar_loop_load(oly_scalar_loop *L, const void *const *body_consts,
                               const void *const *cond_consts, const void *const *carries)
{
    for (int i = 0; i < L->n_body_const; i++)
        oly__sreg_load(&L->r[L->body_const[i]], body_consts[i], L->body_const_size[i]);
    for (int i = 0; i < L->n_cond_const; i++)
        oly__sreg_load(&L->r[L->cond_const[i]], cond_consts[i], L->cond_const_size[i]);
    for (int k = 0; k < L->nc; k++)
        oly__sreg_load(&L->r[L->carry[0][k]], carries[k], L->carry_size[k]);
    L->parity = 0;
}

oly_status oly__cpu_scalar_loop_run(oly_scalar_loop *L, int64_t max_iter)
{
    oly_sreg *r = L->r;
    const oly_host_call *calls = L->calls;
    oly_status st = OLY_OK;
    int p = L->parity, n_body = L->n_body, n_cond = L->n_cond;
    if (!L->cond[0]) { /* a scan: two iterations per trip, no parity test */
        const oly_sop *b0 = L->body[p], *b1 = L->body[p ^ 1];
        int64_t it = 0;
        for (; it + 1 < max_iter; it += 2) {
            if ((st = run_ops(b0, n_body, r, calls)) != OLY_OK) break;
            if ((st = run_ops(b1, n_body, r, calls)) != OLY_OK) break;
        }
        if (st == OLY_OK && it < max_iter) {
            st = run_ops(b0, n_body, r, calls);
            p ^= 1;
        }
    } else {
        for (int64_t it = 0; it < max_iter; it++) {
            if ((st = run_ops(L->cond[p], n_cond, r, calls)) != OLY_OK) break;
            if (!r[L->pred[p]].b) break;
            if ((st = run_ops(L->body[p], n_body, r, calls)) != OLY_OK) break;
            p ^= 1;
        }
    }
    L->parity = p;
    return st;
}

void oly__cpu_scalar_loop_store(const oly_scalar_loop *L, void *const *carries)
{
    const uint16_t *c = L->carry[L->parity];
    for (int k = 0; k < L->nc; k++) oly__sreg_store(carries[k], &L->r[c[k]], L->carry_size[k]);
}
