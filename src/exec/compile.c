/* compile.c — turns a program into an executable for the CPU interpreter:
 * the equations in order with their kernels, literals materialised once as
 * 0-d arrays, and a buffer plan. The plan gives every intermediate an offset
 * in one scratch block, assigned greedily by liveness so dead values' space is
 * reused; an in-place row may write output 0 over a dying input 0, and an
 * aliasing row (alias_input) an output over its dying aliased input, even
 * when that output is a program output (the input is then computed straight
 * into the caller's buffer). Values a
 * host function may keep (callback arguments) get their own arrays instead,
 * and program outputs are written straight into the caller's buffers. The
 * executable is cached in the program's exec slot (oly__program_cache_set:
 * set once, by compare-and-swap, freed with the program). The plan is made
 * for the program's equations as fuse.c rewrites them (duplicates removed,
 * elementwise chains fused into one step each). */
#include "exec/exec.h"

/* ---------------------------------------------------------------- allocator */

/* Live blocks sorted by offset; a new block goes into the tightest gap that
 * fits, else after the last block. */
typedef struct block {
    size_t off, size;
    uint32_t var;
} block;

typedef struct planner {
    block *live;
    int n_live, cap;
    size_t peak;
} planner;

static size_t round_up(size_t n)
{
    if (n == 0) n = 1;
    return (n + OLY_EXEC_ALIGN - 1) & ~(size_t)(OLY_EXEC_ALIGN - 1);
}

static oly_status plan_alloc(planner *pl, uint32_t var, size_t nbytes, size_t *off)
{
    size_t size = round_up(nbytes);
    if (pl->n_live == pl->cap) {
        int cap = pl->cap ? pl->cap * 2 : 16;
        block *b = oly__realloc(pl->live, (size_t)cap * sizeof *b);
        if (!b) return OLY_ERR_NOMEM;
        pl->live = b;
        pl->cap = cap;
    }
    size_t prev_end = 0, best_gap = (size_t)-1;
    int best = -1;
    for (int i = 0; i < pl->n_live; i++) {
        size_t gap = pl->live[i].off - prev_end;
        if (gap >= size && gap < best_gap) {
            best_gap = gap;
            best = i;
        }
        prev_end = pl->live[i].off + pl->live[i].size;
    }
    int at = best >= 0 ? best : pl->n_live;
    size_t o = best >= 0 ? (best > 0 ? pl->live[best - 1].off + pl->live[best - 1].size : 0)
                         : prev_end;
    memmove(pl->live + at + 1, pl->live + at, (size_t)(pl->n_live - at) * sizeof *pl->live);
    pl->live[at] = (block){o, size, var};
    pl->n_live++;
    if (o + size > pl->peak) pl->peak = o + size;
    *off = o;
    return OLY_OK;
}

static void plan_free(planner *pl, uint32_t var)
{
    for (int i = 0; i < pl->n_live; i++) {
        if (pl->live[i].var == var) {
            memmove(pl->live + i, pl->live + i + 1,
                    (size_t)(pl->n_live - i - 1) * sizeof *pl->live);
            pl->n_live--;
            return;
        }
    }
}

/* Hands var from's block to var to (an in-place output takes its input's slot). */
static void plan_transfer(planner *pl, uint32_t from, uint32_t to)
{
    for (int i = 0; i < pl->n_live; i++) {
        if (pl->live[i].var == from) {
            pl->live[i].var = to;
            return;
        }
    }
}

/* ---------------------------------------------------------------- empty outputs */

/* An equation whose outputs are all empty, with no effect and no host code to
 * call, has nothing to compute: its kernel is skipped. Kernels therefore never
 * walk the rows of an empty result (a (2**55, 0) concatenate used to loop
 * 2**55 times writing nothing). */
static bool produces_nothing(const oly_eqn *e, const oly_cpu_kernel *k)
{
    if (e->n_out == 0 || e->effects || k->wants_arrays) return false;
    for (int j = 0; j < e->n_out; j++)
        if (oly_aval_size(&e->out[j]->aval) != 0) return false;
    return true;
}

/* Whether e's step gets its inputs as arrays: host code that may keep them,
 * unless its host function borrows them (then plain buffers, no held arrays,
 * no copies per run: an ffi_call in a loop body). */
static bool step_wants_arrays(const oly_eqn *e, const oly_cpu_kernel *k)
{
    return k->wants_arrays && !(k->borrows_args && k->borrows_args(e->params));
}

static oly_status skip_kernel(const oly_kernel_ctx *ctx)
{
    (void)ctx;
    return OLY_OK;
}

/* ---------------------------------------------------------------- threads */

/* How much an equation computes, in elements: its outputs', or its largest
 * input's when that is more (a reduction, a gather's operand is not read in
 * full, but a cumulative scan's is). What decides splitting (run.c). */
static int64_t step_work(const oly_eqn *e)
{
    int64_t out = 0, in = 0;
    for (int j = 0; j < e->n_out; j++) out += oly_aval_size(&e->out[j]->aval);
    for (int j = 0; j < e->n_in; j++)
        if (e->in[j].kind == OLY_ATOM_VAR) {
            int64_t n = oly_aval_size(&e->in[j].var->aval);
            if (n > in) in = n;
        }
    return out > in ? out : in;
}

/* ---------------------------------------------------------------- aliases */

/* The input output j of e may be written over (alias_input), when that input
 * is a var of the run's scratch read by no later equation and by no other
 * operand of e, with output j's size; else NULL. */
static const oly_var *alias_source(const oly_eqn *e, int i, int j, const oly_cpu_kernel *k,
                                   const oly_exe *exe, const int *last_use, const bool *freed)
{
    int src = k->alias_input ? k->alias_input(e->params, j) : -1;
    if (src < 0 || src >= e->n_in || e->in[src].kind != OLY_ATOM_VAR) return NULL;
    const oly_var *u = e->in[src].var;
    if (exe->loc[u->id].kind != OLY_LOC_SCRATCH || last_use[u->id] != i || freed[u->id] ||
        oly_aval_nbytes(&u->aval) != oly_aval_nbytes(&e->out[j]->aval))
        return NULL;
    for (int m = 0; m < e->n_in; m++)
        if (m != src && e->in[m].kind == OLY_ATOM_VAR && e->in[m].var == u) return NULL;
    return u;
}

/* ---------------------------------------------------------------- exe */

void oly__exec_free(void *p)
{
    oly_exe *exe = p;
    if (!exe) return;
    oly__exec_drop_spare(exe);
    oly__exec_rewrite_free(exe->rw);
    oly__exec_sprog_free(exe->sprog);
    for (int i = 0; i < exe->n_lit; i++) oly_array_release(exe->lit[i]);
    free(exe->lit);
    free(exe->step);
    free(exe->loc);
    free(exe->out_src);
    free(exe->out_aval);
    free(exe->in_needs_array);
    free(exe->own);
    free(exe->out_loc_var);
    free(exe->refs);
    free(exe->patch);
    free(exe->avals);
    free(exe);
}

static oly_status make_literal(oly_exe *exe, const oly_scalar *s, int *ref)
{
    oly_aval a;
    OLY_TRY(oly_aval_make(s->dtype, 0, NULL, &a));
    a.weak = s->weak;
    oly_array *arr;
    OLY_TRY(oly_array_new(&a, &arr));
    oly_scalar_store(s, s->dtype, oly_array_mutable_data(arr));
    exe->lit[exe->n_lit] = arr;
    *ref = (int)exe->n_vars + exe->n_lit;
    exe->n_lit++;
    return OLY_OK;
}

static oly_status compile(oly_program *p, oly_exe **out)
{
    oly_status st = OLY_OK;
    uint32_t nv = p->n_vars;
    int *last_use = NULL, *n_uses_by_cb = NULL, *out_first = NULL;
    bool *freed = NULL;
    planner pl = {0};
    oly_exe *exe = oly__calloc(1, sizeof *exe);
    if (!exe) return OLY_ERR_NOMEM;
    exe->prog = p;
    exe->n_vars = nv;
    /* The equations to plan, each with its kernel (src/cpu's table or a fused group's). */
    if ((st = oly__exec_rewrite(p, &exe->rw)) != OLY_OK) goto fail;
    const int n_eqn = exe->rw->n_eqn;
    const oly_eqn *const eqns = exe->rw->eqn;
    const oly_cpu_kernel *const *kern = exe->rw->kern;
    const oly_atom *const outs = exe->rw->out;
    exe->n_step = n_eqn;

    /* Sizes of the side tables. */
    size_t n_refs = 0, n_lits = 0;
    for (int i = 0; i < n_eqn; i++) {
        const oly_eqn *e = &eqns[i];
        n_refs += (size_t)e->n_in + (size_t)e->n_out;
        for (int j = 0; j < e->n_in; j++) n_lits += e->in[j].kind == OLY_ATOM_LIT;
        if (e->n_in > exe->max_in) exe->max_in = e->n_in;
        if (e->n_out > exe->max_out) exe->max_out = e->n_out;
    }
    for (int k = 0; k < p->n_out; k++) n_lits += outs[k].kind == OLY_ATOM_LIT;

    exe->step = oly__calloc((size_t)n_eqn, sizeof *exe->step);
    exe->loc = oly__calloc(nv, sizeof *exe->loc);
    exe->lit = oly__calloc(n_lits, sizeof *exe->lit);
    exe->out_src = oly__calloc((size_t)p->n_out, sizeof *exe->out_src);
    exe->out_aval = oly__calloc((size_t)p->n_out, sizeof *exe->out_aval);
    exe->in_needs_array = oly__calloc((size_t)p->n_in, sizeof *exe->in_needs_array);
    exe->own = oly__calloc(nv + (size_t)p->n_in + 1, sizeof *exe->own);
    exe->out_loc_var = oly__calloc(nv + 1, sizeof *exe->out_loc_var);
    exe->refs = oly__calloc(n_refs, sizeof *exe->refs);
    exe->n_refs = n_refs;
    exe->avals = oly__calloc(n_refs, sizeof *exe->avals);
    last_use = oly__calloc(nv, sizeof *last_use);
    n_uses_by_cb = oly__calloc(nv, sizeof *n_uses_by_cb);
    out_first = oly__calloc(nv, sizeof *out_first);
    freed = oly__calloc(nv, sizeof *freed);
    if (!exe->step || !exe->loc || !exe->lit || !exe->out_src || !exe->out_aval ||
        !exe->in_needs_array ||
        !exe->own || !exe->out_loc_var || !exe->refs || !exe->avals || !last_use || !n_uses_by_cb || !out_first || !freed) {
        st = OLY_ERR_NOMEM;
        goto fail;
    }

    /* Where inputs and constants live; everything else is decided below. */
    for (uint32_t v = 0; v < nv; v++) {
        last_use[v] = -1;
        out_first[v] = -1;
        exe->loc[v] = (oly_loc){OLY_LOC_SCRATCH, 0, 0};
    }
    for (int i = 0; i < p->n_in; i++) exe->loc[p->in[i]->id] = (oly_loc){OLY_LOC_INPUT, i, 0};
    for (int i = 0; i < p->n_const; i++)
        exe->loc[p->constvar[i]->id] = (oly_loc){OLY_LOC_CONST, i, 0};

    /* Liveness: last equation reading each var; program outputs live to the end. */
    for (int i = 0; i < n_eqn; i++) {
        const oly_eqn *e = &eqns[i];
        for (int j = 0; j < e->n_in; j++) {
            if (e->in[j].kind != OLY_ATOM_VAR) continue;
            uint32_t v = e->in[j].var->id;
            last_use[v] = i;
            if (step_wants_arrays(e, kern[i])) n_uses_by_cb[v]++;
        }
    }
    for (int k = 0; k < p->n_out; k++) {
        if (outs[k].kind != OLY_ATOM_VAR) continue;
        uint32_t v = outs[k].var->id;
        last_use[v] = n_eqn;
        if (out_first[v] < 0) out_first[v] = k;
    }
    for (int i = 0; i < p->n_in; i++) exe->in_needs_array[i] = n_uses_by_cb[p->in[i]->id] > 0;

    /* Steps and the buffer plan, equation by equation. */
    int *r = exe->refs;
    oly_aval *av = exe->avals;
    for (int i = 0; i < n_eqn; i++) {
        const oly_eqn *e = &eqns[i];
        oly_step *s = &exe->step[i];
        s->eqn = e;
        s->nothing = produces_nothing(e, kern[i]);
        s->kernel = s->nothing ? skip_kernel : kern[i]->fn;
        s->wants_arrays = step_wants_arrays(e, kern[i]);
        s->work = step_work(e);
        s->split = kern[i]->splits && s->kernel != skip_kernel && s->work >= OLY_EXEC_SPLIT_MIN;
        s->n_in = e->n_in;
        s->n_out = e->n_out;
        s->in_ref = r;
        r += e->n_in;
        s->out_var = r;
        r += e->n_out;
        s->in_aval = av;
        av += e->n_in;
        s->out_aval = av;
        av += e->n_out;
        for (int j = 0; j < e->n_in; j++) {
            s->in_aval[j] = oly__atom_aval(&e->in[j]);
            if (e->in[j].kind == OLY_ATOM_VAR) {
                s->in_ref[j] = (int)e->in[j].var->id;
            } else if ((st = make_literal(exe, &e->in[j].lit, &s->in_ref[j])) != OLY_OK) {
                goto fail;
            }
        }
        for (int j = 0; j < e->n_out; j++) {
            uint32_t v = e->out[j]->id;
            s->out_var[j] = (int)v;
            s->out_aval[j] = e->out[j]->aval;
            if (n_uses_by_cb[v] > 0) {
                exe->own[exe->n_own] = (oly_own){v, -1, &e->out[j]->aval,
                                                 oly_aval_nbytes(&e->out[j]->aval)};
                exe->loc[v] = (oly_loc){OLY_LOC_OWN, exe->n_own++, 0};
            } else if (out_first[v] >= 0) {
                exe->loc[v] = (oly_loc){OLY_LOC_OUT, out_first[v], 0};
                exe->out_loc_var[exe->n_out_loc++] = v;
                /* The aliased input moves into the output buffer too: its
                 * producer writes it there and this equation in place. */
                const oly_var *u = alias_source(e, i, j, kern[i], exe, last_use, freed);
                if (u) {
                    plan_free(&pl, u->id);
                    freed[u->id] = true;
                    exe->loc[u->id] = exe->loc[v];
                    exe->out_loc_var[exe->n_out_loc++] = u->id;
                }
            } else {
                if (last_use[v] < 0) last_use[v] = i; /* never read: dies here */
                size_t nb = oly_aval_nbytes(&e->out[j]->aval);
                const oly_atom *a0 = e->n_in > 0 ? &e->in[0] : NULL;
                const oly_var *alias = alias_source(e, i, j, kern[i], exe, last_use, freed);
                if (j == 0 && kern[i]->inplace_ok && a0 && a0->kind == OLY_ATOM_VAR &&
                    exe->loc[a0->var->id].kind == OLY_LOC_SCRATCH && last_use[a0->var->id] == i &&
                    !freed[a0->var->id] && oly_aval_nbytes(&a0->var->aval) == nb) {
                    uint32_t u = a0->var->id;
                    exe->loc[v] = (oly_loc){OLY_LOC_SCRATCH, 0, exe->loc[u].off};
                    plan_transfer(&pl, u, v);
                    freed[u] = true;
                } else if (alias) {
                    uint32_t u = alias->id;
                    exe->loc[v] = (oly_loc){OLY_LOC_SCRATCH, 0, exe->loc[u].off};
                    plan_transfer(&pl, u, v);
                    freed[u] = true;
                } else {
                    size_t off;
                    if ((st = plan_alloc(&pl, v, nb, &off)) != OLY_OK) goto fail;
                    exe->loc[v] = (oly_loc){OLY_LOC_SCRATCH, 0, off};
                }
                exe->sum_intermediate_bytes += round_up(nb);
            }
        }
        /* Inputs read for the last time, and outputs nobody reads, die here. */
        for (int j = 0; j < e->n_in; j++) {
            if (e->in[j].kind != OLY_ATOM_VAR) continue;
            uint32_t u = e->in[j].var->id;
            if (exe->loc[u].kind == OLY_LOC_SCRATCH && last_use[u] == i && !freed[u]) {
                plan_free(&pl, u);
                freed[u] = true;
            }
        }
        for (int j = 0; j < e->n_out; j++) {
            uint32_t v = e->out[j]->id;
            if (exe->loc[v].kind == OLY_LOC_SCRATCH && last_use[v] == i && !freed[v]) {
                plan_free(&pl, v);
                freed[v] = true;
            }
        }
    }
    exe->scratch_bytes = pl.peak;

    /* Input copies (for callers without input arrays) follow the OWN vars. */
    exe->n_own_all = exe->n_own;
    size_t own_bytes = 0;
    for (int i = 0; i < p->n_in; i++)
        if (exe->in_needs_array[i])
            exe->own[exe->n_own_all++] =
                (oly_own){p->in[i]->id, i, &p->in[i]->aval, oly_aval_nbytes(&p->in[i]->aval)};
    for (int i = 0; i < exe->n_own_all; i++) own_bytes += round_up(exe->own[i].nbytes);
    exe->pool = exe->scratch_bytes + own_bytes <= OLY_EXEC_POOL_BYTES;
    if (exe->pool) {
        int n = oly_device_count();
        if (!(exe->spare = oly__calloc((size_t)n, sizeof *exe->spare))) {
            st = OLY_ERR_NOMEM;
            goto fail;
        }
        exe->n_spare = n;
    }

    /* Program outputs: written in place, or copied at the end of the run. */
    for (int k = 0; k < p->n_out; k++) {
        const oly_atom *a = &outs[k];
        if (a->kind == OLY_ATOM_LIT) {
            exe->out_src[k].direct = false;
            if ((st = make_literal(exe, &a->lit, &exe->out_src[k].ref)) != OLY_OK) goto fail;
        } else {
            uint32_t v = a->var->id;
            exe->out_src[k].ref = (int)v;
            exe->out_src[k].direct = exe->loc[v].kind == OLY_LOC_OUT && exe->loc[v].idx == k;
        }
        exe->out_aval[k] = oly__atom_aval(a);
        exe->out_src[k].nbytes = oly_aval_nbytes(&exe->out_aval[k]);
        exe->cost_bytes += exe->out_src[k].nbytes;
    }
    exe->cost_bytes += exe->sum_intermediate_bytes;

    exe->n_slots = nv + (uint32_t)exe->n_lit;

    /* One-element steps run as ops, without their kernel (src/cpu/scalar.c);
     * a program of nothing else becomes a register program (sprog.c). */
    for (int i = 0; i < exe->n_step; i++) {
        oly_step *s = &exe->step[i];
        int code = s->kernel == skip_kernel ? 0
                                            : oly__cpu_scalar_code(s->eqn, s->in_aval, s->out_aval);
        if (!code) continue;
        s->scalar = true;
        oly__cpu_scalar_op(code, s->in_aval, s->n_in, s->out_aval, 0, 1, 2, 3, &s->sop);
    }
    if ((st = oly__exec_sprog_build(exe)) != OLY_OK) goto fail;

    /* References whose pointer a run must refresh: inputs and in-place outputs. */
    for (int pass = 0; pass < 2; pass++) {
        exe->n_patch = 0;
        for (size_t i = 0; i < n_refs; i++) {
            int v = exe->refs[i];
            if ((uint32_t)v >= nv) continue;
            oly_loc_kind k = exe->loc[v].kind;
            if (k != OLY_LOC_INPUT && k != OLY_LOC_OUT) continue;
            if (pass) exe->patch[exe->n_patch] = (int)i;
            exe->n_patch++;
        }
        if (!pass && !(exe->patch = oly__calloc((size_t)exe->n_patch, sizeof *exe->patch))) {
            st = OLY_ERR_NOMEM;
            goto fail;
        }
    }

    free(pl.live);
    free(last_use);
    free(n_uses_by_cb);
    free(out_first);
    free(freed);
    *out = exe;
    return OLY_OK;

fail:
    free(pl.live);
    free(last_use);
    free(n_uses_by_cb);
    free(out_first);
    free(freed);
    oly__exec_free(exe);
    return st;
}

oly_status oly__exec_get(oly_program *p, const oly_exe **out)
{
    void *cur = oly__program_cache_get(p);
    if (!cur) {
        oly_exe *mine = NULL;
        OLY_TRY(compile(p, &mine));
        cur = oly__program_cache_set(p, mine, oly__exec_free);
        if (cur != mine) oly__exec_free(mine); /* another thread won; use its executable */
    }
    *out = cur;
    return OLY_OK;
}

oly_status oly__exec_plan_bytes(oly_program *p, size_t *scratch, size_t *sum_intermediates)
{
    const oly_exe *exe;
    OLY_TRY(oly__exec_get(p, &exe));
    if (scratch) *scratch = exe->scratch_bytes;
    if (sum_intermediates) *sum_intermediates = exe->sum_intermediate_bytes;
    return OLY_OK;
}
