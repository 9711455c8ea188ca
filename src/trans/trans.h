/* trans.h — what transform drivers and per-primitive rules share: the rule
 * contexts, helpers that emit equations into a builder, and the program-level
 * transforms. Rule signatures and contracts are in internal.h (oly_batch_rule,
 * oly_jvp_rule, oly_transpose_rule).
 *
 * Transforms are program -> program (they never run anything):
 *   vmap       batch dims per var; unmapped equations are copied unchanged.
 *   jvp        symbolic-zero tangents per var; an equation whose inputs all have
 *              zero tangents is copied unchanged (no rule asked): that is why an
 *              io_callback independent of the differentiated input runs under grad.
 *   linearize  jvp, then partial evaluation: equations that depend on tangents go
 *              to the linear program, the rest to the primal program; known values
 *              the linear side uses become residuals.
 *   transpose  a linear program, backwards, through transpose rules.
 * Effects survive: effectful equations stay on the side that runs, exactly once. */
#ifndef OLYMPUS_TRANS_H
#define OLYMPUS_TRANS_H

#include "internal.h"

struct oly_batch_ctx {
    oly_builder *b;        /* emit here */
    int64_t size;          /* the batch size */
    const char *axis_name; /* borrowed: the batched axis's name, NULL when unnamed */
};

struct oly_jvp_ctx {
    oly_builder *b;
};

struct oly_transpose_ctx {
    oly_builder *b;
};

struct oly_pe_ctx {
    oly_builder *known;    /* the primal program being built */
    oly_builder *unknown;  /* the linear program being built */
    void *driver;          /* the partial evaluator's state (linearize.c) */
};

/* The atom in ctx->unknown carrying known value x of ctx->known (a residual:
 * an output of the known program and an input of the unknown one; literals
 * pass as literals). */
oly_status oly__pe_residual(oly_pe_ctx *ctx, oly_atom x, oly_atom *out);

/* Partial evaluation of p with unknown_in marking unknown inputs.
 * *known: known inputs (in order) -> (known outputs..., residuals...);
 * *unknown: (residuals..., unknown inputs...) -> unknown outputs;
 * out_unknown[j] (p's output count) says which side output j is on. */
oly_status oly__partial_eval(oly_program *p, const bool *unknown_in, oly_program **known,
                             oly_program **unknown, int *n_res, bool *out_unknown);

/* ---------------------------------------------------------------- the walk (walk.c)
 * The state every driver keeps while it walks an old program: per old var its
 * atom in the new program (env), a second atom where the driver needs one
 * (aux: jvp's tangent, transpose's cotangent) and an int fact (a batch axis,
 * nonzero, unknown, linear); per equation, scratch of max_io entries. */
typedef struct oly_walk {
    const oly_program *p;         /* borrowed: the program walked */
    oly_atom *env, *aux;          /* owned, n_vars + 1 */
    int *fact;                    /* owned, n_vars + 1 */
    int max_io;                   /* >= every equation's arity and the driver's minimum */
    oly_atom *in, *in2, *out, *out2; /* owned, max_io: one equation's atoms */
    int *in_fact, *out_fact;      /* owned, max_io */
    bool *in_flag, *out_flag;     /* owned, max_io: the rules' bool masks */
} oly_walk;

/* Allocates the state for p (scratch of at least min_io); OLY_ERR_NOMEM. */
oly_status oly__walk_init(oly_walk *w, const oly_program *p, int min_io);
void oly__walk_free(oly_walk *w); /* accepts a zeroed or failed walk */
/* p's constants as constants of b, each with fact. */
oly_status oly__walk_consts(oly_walk *w, oly_builder *b, int fact);
/* e's inputs through the state into in / in2 / in_fact (a literal is itself,
 * with lit_fact); true when some input's fact differs from lit_fact. */
bool oly__walk_inputs(oly_walk *w, const oly_eqn *e, int lit_fact);
/* Records out / out2 / out_fact as e's outputs. */
void oly__walk_outputs(oly_walk *w, const oly_eqn *e);
/* An atom of the old program in the new one (literals pass through with
 * lit_fact); *fact (may be NULL) receives its fact. */
oly_atom oly__walk_read(const oly_walk *w, oly_atom a, int lit_fact, int *fact);
/* Marks n rule outputs unset, so a rule that forgets one is caught. */
void oly__atoms_unset(oly_atom *a, int n);
/* How a transform's error names e: its primitive, with the host function it
 * calls when it has one ("pure_callback[callback=ffi_call:rms_norm]"). buf
 * holds n bytes; returns buf. */
const char *oly__eqn_label(const oly_eqn *e, char *buf, size_t n);
/* "<prim> has no <rule> rule" (OLY_ERR_UNSUPPORTED). */
oly_status oly__rule_missing(const oly_eqn *e, const char *rule);
/* What a rule returned for its `what` j: set, and of aval want; otherwise
 * OLY_ERR_INTERNAL naming the primitive and the rule. */
oly_status oly__rule_check(const oly_eqn *e, const char *rule, const char *what, int j,
                           const oly_atom *got, const oly_aval *want);

/* ---------------------------------------------------------------- emitting (emit.c)
 * Each appends equations to b and returns the result atoms; errors come from
 * the primitives' shape rules. Atoms are values of b. */

/* Any primitive; out receives oly_prim_num_outputs(p, params, n_in) atoms. */
oly_status oly__emit(oly_builder *b, const oly_prim *p, const oly_atom *in, int n_in,
                     const void *params, oly_program *const *subs, int n_sub, oly_atom *out);
/* The same primitive, params and subprograms as eqn, on new inputs. */
oly_status oly__emit_eqn(oly_builder *b, const oly_eqn *eqn, const oly_atom *in, oly_atom *out);
/* A parameterless one-output primitive on one or two inputs. */
oly_status oly__emit_un(oly_builder *b, const oly_prim *p, oly_atom x, oly_atom *out);
oly_status oly__emit_bin(oly_builder *b, const oly_prim *p, oly_atom x, oly_atom y, oly_atom *out);
/* x converted to t (x itself when it already has dtype t). */
oly_status oly__emit_convert(oly_builder *b, oly_atom x, oly_dtype t, oly_atom *out);
/* An array of aval filled with value (a literal when rank 0). */
oly_status oly__emit_full(oly_builder *b, const oly_aval *aval, double value, oly_atom *out);
oly_status oly__emit_broadcast_in_dim(oly_builder *b, oly_atom x, const oly_ints *shape,
                                      const oly_ints *broadcast_dimensions, oly_atom *out);
/* x (any shape that broadcasts NumPy-style, rank-0 included) broadcast to aval's shape. */
oly_status oly__emit_broadcast_to(oly_builder *b, oly_atom x, const oly_aval *shape, oly_atom *out);
oly_status oly__emit_reshape(oly_builder *b, oly_atom x, const oly_ints *new_sizes, oly_atom *out);
oly_status oly__emit_transpose(oly_builder *b, oly_atom x, const oly_ints *perm, oly_atom *out);
/* Moves axis from to axis to (transpose; x itself when from == to). */
oly_status oly__emit_moveaxis(oly_builder *b, oly_atom x, int from, int to, oly_atom *out);
oly_status oly__emit_reduce_sum(oly_builder *b, oly_atom x, const oly_ints *axes, oly_atom *out);
/* select_n(pred, on_false, on_true). */
oly_status oly__emit_select(oly_builder *b, oly_atom pred, oly_atom on_false, oly_atom on_true,
                            oly_atom *out);
oly_status oly__emit_dot_general(oly_builder *b, oly_atom x, oly_atom y,
                                 const oly_params_dot_general *dims, oly_atom *out);
/* Emit p's equations inline with its inputs bound to in; out gets its outputs. */
oly_status oly__emit_inline(oly_builder *b, oly_program *p, const oly_atom *in, oly_atom *out);
/* Cotangent accumulation: x + y for values of one aval. */
oly_status oly__emit_add_any(oly_builder *b, oly_atom x, oly_atom y, oly_atom *out);

/* A one-output primitive on one input. */
oly_status oly__emit_1(oly_builder *b, const oly_prim *p, oly_atom x, const void *params,
                       oly_atom *out);

/* ---------------------------------------------------------------- shared rules (rulekit.c) */

/* JVP of a row whose outputs all have zero tangents: the primal only. */
oly_status oly__jvp_zero(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                         const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                         oly_atom *tangent_out, bool *out_nz);
/* JVP of a one-input row linear in it: the row applied to the tangent too. */
oly_status oly__jvp_linear(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                           const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                           oly_atom *tangent_out, bool *out_nz);

/* ---------------------------------------------------------------- batching helpers */

/* The batch rule of every elementwise row (elementwise.c, special.c): mapped
 * operands move their batch axis to 0, unmapped rank-0 operands stay scalars
 * (select_n's cases excepted), other unmapped ones are broadcast; the output
 * is batched along axis 0. */
oly_status oly__elementwise_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                  const int *in_bdim, oly_atom *out, int *out_bdim);

/* The JVP helpers of elementwise rows (elementwise.c; special.c uses them
 * too). Unary: tangent t * d (or t / d with divide), d = f(x, y), y the primal
 * output. Binary: the sum of t_i * d_i over the nonzero tangents, d_i from
 * partial(eqn, i, x, y, out) (a partial of literal 1 costs no multiply; a
 * partial may fail for an operand with no derivative), broadcast to the
 * output's shape. */
typedef oly_status (*oly_deriv_fn)(oly_builder *b, oly_atom x, oly_atom y, oly_atom *d);
typedef oly_status (*oly_partial_fn)(oly_builder *b, const oly_eqn *eqn, int which, oly_atom x,
                                     oly_atom y, oly_atom out, oly_atom *d);
oly_status oly__elementwise_unary_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                                      const oly_atom *tangent, const bool *tan_nz,
                                      oly_atom *primal_out, oly_atom *tangent_out, bool *out_nz,
                                      oly_deriv_fn f, bool divide);
oly_status oly__elementwise_binary_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn,
                                       const oly_atom *primal, const oly_atom *tangent,
                                       const bool *tan_nz, oly_atom *primal_out,
                                       oly_atom *tangent_out, bool *out_nz,
                                       oly_partial_fn partial);

/* x with its batch axis at `to`; an unmapped x (bdim OLY_NOT_MAPPED) is
 * broadcast to a new axis of size ctx->size there. */
oly_status oly__batch_move(oly_batch_ctx *ctx, oly_atom x, int bdim, int to, oly_atom *out);

/* ---------------------------------------------------------------- small helpers */

oly_ints oly__ints(int n, const int64_t *v);
oly_ints oly__ints_range(int n);  /* (0, 1, ..., n-1) */

#endif /* OLYMPUS_TRANS_H */
