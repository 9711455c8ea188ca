/* sprog.c — an executable as a register program (oly_scalar_prog) when it is
 * only one-element steps: loop bodies such as fori_loop's `i + 1; x * a + b`,
 * and calls of host functions that borrow their one-element arguments (an
 * ffi_call per iteration: the call is an op whose frame is prepared once),
 * and gated taps (a progress bar's outside_call: a test of its counter,
 * moves for its outputs; steps with zero-size results are no ops).
 * A loop kernel then runs the ops on a register file per iteration instead of
 * a run of the executable (src/cpu/loop.c), and a run of the executable
 * itself loads its inputs into registers, runs the ops and stores its outputs
 * (run.c). Registers are the value slots (var ids, then literals), so the
 * steps' operand references are the registers; constants and literals are
 * loaded once into init. */
#include "exec/exec.h"

#include <limits.h>

static bool one_element(const oly_aval *a)
{
    return oly_aval_size(a) == 1 && !oly_dtype_is_complex(a->dtype) &&
           oly_dtype_size(a->dtype) <= 8;
}

/* The host function step i only calls, on one-element operands into
 * one-element results (the kernel entry's host_call), or NULL. */
static oly_host_fn *step_call(const oly_exe *exe, int i, const char **kind, const char **flavour)
{
    const oly_step *s = &exe->step[i];
    const oly_cpu_kernel *k = exe->rw->kern[i];
    if (s->scalar || s->wants_arrays || !k->host_call || s->eqn->n_sub) return NULL;
    for (int j = 0; j < s->n_in; j++)
        if (!one_element(&s->in_aval[j])) return NULL;
    for (int j = 0; j < s->n_out; j++)
        if (!one_element(&s->out_aval[j])) return NULL;
    return k->host_call(s->eqn->params, kind, flavour);
}

/* The gated tap step i is, on one-element or zero-size operands with an
 * integer counter (input 0), or NULL. */
static const oly_params_outside_call *step_tap(const oly_exe *exe, int i)
{
    const oly_step *s = &exe->step[i];
    const oly_cpu_kernel *k = exe->rw->kern[i];
    if (s->scalar || !k->gated_tap || s->eqn->n_sub || s->n_in < 1 || s->n_out != s->n_in)
        return NULL;
    if (!oly_dtype_is_int(s->in_aval[0].dtype))
        return NULL;
    for (int j = 0; j < s->n_in; j++) {
        int64_t n = oly_aval_size(&s->in_aval[j]);
        if ((n != 0 && !one_element(&s->in_aval[j])) ||
            oly_aval_size(&s->out_aval[j]) != n || s->out_aval[j].dtype != s->in_aval[j].dtype)
            return NULL;
    }
    return k->gated_tap(s->eqn->params);
}

void oly__exec_sprog_free(oly_scalar_prog *sp)
{
    if (!sp) return;
    if (sp->n_calls) free((void *)sp->calls[0].arg_reg);
    free((void *)sp->calls);
    free((void *)sp->ops);
    free((void *)sp->init);
    free((void *)sp->in_reg);
    free((void *)sp->in_size);
    free(sp);
}

oly_status oly__exec_sprog_build(oly_exe *exe)
{
    const oly_program *p = exe->prog;
    /* Values held as arrays (exe->own) serve host code that wants arrays:
     * gated taps, which here send copies of the registers instead, or steps
     * the loop below turns down. */
    if (exe->n_slots > 65535) return OLY_OK;
    int n_calls = 0, n_ops = 0;
    size_t n_call_ptrs = 0;
    for (int i = 0; i < exe->n_step; i++) {
        const oly_step *s = &exe->step[i];
        const char *kind, *flavour;
        if (s->scalar) {
            n_ops++;
        } else if (s->nothing) { /* zero-size results: no op */
        } else if (step_tap(exe, i)) {
            n_calls++;
            n_call_ptrs += (size_t)s->n_in;
            n_ops++;
            for (int j = 0; j < s->n_in; j++) n_ops += oly_aval_size(&s->in_aval[j]) == 1; /* at most */
        } else if (step_call(exe, i, &kind, &flavour)) {
            n_calls++;
            n_call_ptrs += (size_t)(s->n_in + s->n_out);
            n_ops++;
        } else {
            return OLY_OK;
        }
    }
    if (n_calls > 32767 || n_call_ptrs > INT_MAX / 4) return OLY_OK;
    for (int i = 0; i < p->n_in; i++)
        if (!one_element(&p->in[i]->aval)) return OLY_OK;
    for (int i = 0; i < p->n_const; i++)
        if (!one_element(&p->constvar[i]->aval)) return OLY_OK;
    for (int k = 0; k < p->n_out; k++)
        if (!one_element(&exe->out_aval[k])) return OLY_OK;

    /* which registers some op or an output reads: a tap's output nobody
     * reads gets no move */
    uint8_t *read = oly__calloc(exe->n_slots + 1, 1);
    if (!read) return OLY_ERR_NOMEM;
    for (int i = 0; i < exe->n_step; i++)
        for (int j = 0; j < exe->step[i].n_in; j++) read[exe->step[i].in_ref[j]] = 1;
    for (int k = 0; k < p->n_out; k++) read[exe->out_src[k].ref] = 1;

    int n_in = p->n_in, n_out = p->n_out;
    oly_scalar_prog *sp = oly__calloc(1, sizeof *sp);
    oly_sop *ops = oly__calloc((size_t)n_ops + 1, sizeof *ops);
    oly_sreg *init = oly__calloc(exe->n_slots + 1, sizeof *init);
    /* in_reg, out_reg, then in_size, out_size: two blocks */
    uint16_t *regs = oly__calloc((size_t)(n_in + n_out) + 1, sizeof *regs);
    uint8_t *sizes = oly__calloc((size_t)(n_in + n_out) + 1, 1);
    oly_scall *calls = oly__calloc((size_t)n_calls + 1, sizeof *calls);
    uint16_t *call_regs = oly__calloc(n_call_ptrs + 1, sizeof *call_regs);
    if (!sp || !ops || !init || !regs || !sizes || !calls || !call_regs) {
        free(read);
        free(sp);
        free(ops);
        free(init);
        free(regs);
        free(sizes);
        free(calls);
        free(call_regs);
        return OLY_ERR_NOMEM;
    }
    int ci = 0, o = 0;
    uint16_t *cr = call_regs;
    for (int i = 0; i < exe->n_step; i++) {
        const oly_step *s = &exe->step[i];
        if (s->nothing && !s->scalar) continue;
        const oly_params_outside_call *tap = s->scalar ? NULL : step_tap(exe, i);
        if (tap) { /* the gate on the operand registers, then the identity's moves */
            oly_scall *k = &calls[ci];
            *k = (oly_scall){.fn = tap->callback, .kind = "outside_call",
                             .flavour = "host_callback.id_tap", .n_args = s->n_in,
                             .arg_reg = cr, .res_reg = cr + s->n_in, .arg_avals = s->in_aval,
                             .res_avals = s->out_aval, .tap = tap};
            for (int j = 0; j < s->n_in; j++) *cr++ = (uint16_t)s->in_ref[j];
            ops[o++] = (oly_sop){.code = (uint16_t)oly__cpu_scalar_tap_code(), .a = (uint16_t)ci++};
            for (int j = 0; j < s->n_in; j++)
                if (oly_aval_size(&s->in_aval[j]) == 1 && read[s->out_var[j]])
                    ops[o++] = (oly_sop){.code = (uint16_t)oly__cpu_scalar_move_code(),
                                         .a = (uint16_t)s->in_ref[j],
                                         .out = (uint16_t)s->out_var[j]};
            continue;
        }
        if (!s->scalar) { /* a call: its operands and results are registers */
            oly_scall *k = &calls[ci];
            k->fn = step_call(exe, i, &k->kind, &k->flavour);
            k->n_args = s->n_in;
            k->n_results = s->n_out;
            k->arg_reg = cr;
            for (int j = 0; j < s->n_in; j++) *cr++ = (uint16_t)s->in_ref[j];
            k->res_reg = cr;
            for (int j = 0; j < s->n_out; j++) *cr++ = (uint16_t)s->out_var[j];
            k->arg_avals = s->in_aval;
            k->res_avals = s->out_aval;
            ops[o++] = (oly_sop){.code = (uint16_t)oly__cpu_scalar_call_code(), .a = (uint16_t)ci++};
            continue;
        }
        oly_sop *op = &ops[o++];
        *op = s->sop;
        op->a = (uint16_t)(s->n_in > 0 ? s->in_ref[0] : 0);
        op->b = (uint16_t)(s->n_in > 1 ? s->in_ref[1] : 0);
        op->c = (uint16_t)(s->n_in > 2 ? s->in_ref[2] : 0);
        op->out = (uint16_t)s->out_var[0];
    }
    for (int i = 0; i < p->n_const; i++) {
        const oly_array *c = p->constval[i];
        oly__sreg_load(&init[p->constvar[i]->id], oly_array_data(c),
                       oly_dtype_size(c->aval.dtype));
    }
    for (int k = 0; k < exe->n_lit; k++) {
        const oly_array *l = exe->lit[k];
        if (!one_element(&l->aval)) continue; /* read by no op (a zero-size operand's) */
        oly__sreg_load(&init[exe->n_vars + (uint32_t)k], oly_array_data(l),
                       oly_dtype_size(l->aval.dtype));
    }
    for (int i = 0; i < n_in; i++) {
        regs[i] = (uint16_t)p->in[i]->id;
        sizes[i] = (uint8_t)oly_dtype_size(p->in[i]->aval.dtype);
    }
    for (int k = 0; k < n_out; k++) {
        regs[n_in + k] = (uint16_t)exe->out_src[k].ref;
        sizes[n_in + k] = (uint8_t)oly_dtype_size(exe->out_aval[k].dtype);
    }
    *sp = (oly_scalar_prog){.n_ops = o, .ops = ops, .n_regs = (int)exe->n_slots,
                            .init = init, .n_in = n_in, .n_out = n_out, .in_reg = regs,
                            .out_reg = regs + n_in, .in_size = sizes, .out_size = sizes + n_in,
                            .n_calls = n_calls, .calls = calls, .n_call_ptrs = (int)n_call_ptrs};
    free(read);
    if (!n_calls) free(call_regs); /* the first call's arg_reg owns the block */
    exe->sprog = sp;
    return OLY_OK;
}
