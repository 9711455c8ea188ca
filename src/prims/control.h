/* control.h — what the control-flow rows (cond.c: cond; loop.c: while and
 * scan) share: a rule's temporaries (an arena and programs to release), the
 * wrapper that re-plumbs a program's inputs and outputs, and the sub-program
 * transforms with the dependency analysis they use (control.c). */
#ifndef OLYMPUS_PRIMS_CONTROL_H
#define OLYMPUS_PRIMS_CONTROL_H

#include "trans/trans.h"

#define MAX_OUT (1 << 20)

/* A rule's temporaries: arena memory and programs to release. */
typedef struct ctl_tmp {
    oly_arena *arena;
    oly_program **progs;  /* owned references */
    int n, cap;
} ctl_tmp;

#define TRY(expr)                                                                         \
    do {                                                                                  \
        if ((s = (expr)) != OLY_OK) goto done;                                            \
    } while (0)

#define ALLOC(ptr, n)                                                                     \
    do {                                                                                  \
        (ptr) = oly__ctl_tnew(&t, (n), sizeof *(ptr));                                   \
        if (!(ptr)) {                                                                     \
            s = OLY_ERR_NOMEM;                                                            \
            goto done;                                                                    \
        }                                                                                 \
    } while (0)

#define TMP_BEGIN                                                                         \
    oly_status s = OLY_OK;                                                                \
    ctl_tmp t = {0};                                                                          \
    t.arena = oly__arena_new();                                                           \
    if (!t.arena) return OLY_ERR_NOMEM

/* Where a wrapper's output comes from. */
enum { S_OUT, S_IN, S_ZERO };

typedef struct ctl_src {
    int kind;
    int idx;      /* S_OUT: p's output; S_IN: the wrapper's input */
    oly_aval aval; /* S_ZERO */
} ctl_src;

oly_aval oly__ctl_out_aval(const oly_program *p, int k);

/* Fails unless got equals want (ignoring weak); what/i name the value. */
oly_status oly__ctl_same_aval(const char *who, const char *what, int i, const oly_aval *want,
                            const oly_aval *got);

void *oly__ctl_tnew(ctl_tmp *t, int n, size_t size);

/* Takes ownership of p (released by tfree; released now on failure). */
oly_status oly__ctl_keep(ctl_tmp *t, oly_program *p);

void oly__ctl_tfree(ctl_tmp *t);

bool oly__ctl_inexact(const oly_aval *a);

/* out[k]: output k of p depends on some input i with in[i] (conservative:
 * through any equation). Exactly the outputs a transform that copies
 * equations without flagged inputs unchanged leaves untouched. */
oly_status oly__ctl_depends(const oly_program *p, const bool *in, bool *out);

ctl_src oly__ctl_from_out(int k);

ctl_src oly__ctl_from_in(int i);

ctl_src oly__ctl_zeros(oly_aval a);

/* A program with inputs of avals av[0..n_in) that runs p (inline) with p's
 * input i bound to the wrapper's input pin[i] and returns os[0..n_out). */
oly_status oly__ctl_wrap(oly_program *p, int n_in, const oly_aval *av, const int *pin, int n_out,
                       const ctl_src *os, oly_program **out);

/* *p replaced by its DCE'd form (the old one stays kept in tp). */
oly_status oly__ctl_dce_kept(ctl_tmp *tp, oly_program **p);

/* Input avals of p, in order, into av (room for p->n_in). */
void oly__ctl_in_avals(const oly_program *p, oly_aval *av);

/* vmap p: input i batched at 0 where in_b[i], output k batched at 0 where out_b[k]. */
oly_status oly__ctl_vmap_sub(ctl_tmp *tp, oly_program *p, const bool *in_b, const bool *out_b,
                           int64_t size, oly_program **out);

/* jvp of p with tangents for the inputs with nz_in (inexact only), then
 * wrapped so that every output with force[k] (inexact only; may be NULL) has
 * a tangent too (zeros). nz_out: which outputs have tangents. */
oly_status oly__ctl_jvp_sub(ctl_tmp *tp, oly_program *p, const bool *nz_in, const bool *force,
                          oly_program **out, bool *nz_out);

/* Tangent operand: the given tangent, or zeros of aval when it is symbolic. */
oly_status oly__ctl_tangent_or_zeros(oly_builder *b, const oly_atom *tangent, const bool *tan_nz,
                                   int i, const oly_aval *aval, oly_atom *out);

/* Known input i as an atom of the unknown program (a residual). */
oly_status oly__ctl_as_unknown(oly_pe_ctx *ctx, const oly_atom *known_in, const oly_atom *unknown_in,
                             const bool *unknown, int i, oly_atom *out);

/* The whole equation on the unknown side, known inputs passed as residuals. */
oly_status oly__ctl_pe_all_unknown(oly_pe_ctx *ctx, const oly_eqn *eqn, const oly_atom *known_in,
                                 const oly_atom *unknown_in, const bool *unknown,
                                 oly_atom *unknown_out, bool *out_unknown);

#endif /* OLYMPUS_PRIMS_CONTROL_H */
