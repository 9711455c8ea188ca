/* run.c — the CPU interpreter: runs an executable's steps in order on the
 * calling thread. Every run owns its scratch block and value tables, so runs
 * are re-entrant (a host function may run another program on the same
 * thread) and thread-safe. Nesting depth per thread is bounded so runaway
 * recursion is an error rather than a stack overflow. */
#include "exec/exec.h"

static _Thread_local int thread_depth;

int oly__run_device(const oly_run *run) { return run ? run->device : 0; }

/* Per-run tables in one allocation. */
typedef struct run_tables {
    void **val;                 /* n_vars: where each var's bytes are */
    oly_array **arr;            /* n_vars: the var as an array, where it is one */
    bool *owned;                /* n_vars: arr[v] is a reference this run holds */
    const void **in_ptr;        /* max_in */
    void **out_ptr;             /* max_out */
    oly_array **in_arr;         /* max_in */
} run_tables;

static const void *ref_data(const oly_exe *exe, const run_tables *t, int ref)
{
    return ref >= 0 ? t->val[ref] : oly_array_data(exe->lit[-ref - 1]);
}

static oly_array *ref_array(const oly_exe *exe, const run_tables *t, int ref)
{
    return ref >= 0 ? t->arr[ref] : exe->lit[-ref - 1];
}

oly_status oly__exec_run(oly_run *parent, const oly_exe *exe, int device, const void *const *in,
                         oly_array *const *in_arrays, void *const *out)
{
    const oly_program *p = exe->prog;
    oly_status st = OLY_OK;
    if (thread_depth >= OLY_EXEC_MAX_DEPTH)
        return oly__error(OLY_ERR_INVALID,
                          "program nesting deeper than %d levels (runaway recursion through "
                          "nested programs or host functions?)",
                          OLY_EXEC_MAX_DEPTH);
    oly_run run = {parent, device, thread_depth + 1};

    uint32_t nv = exe->n_vars;
    size_t mi = (size_t)exe->max_in, mo = (size_t)exe->max_out;
    size_t bytes = nv * (sizeof(void *) + sizeof(oly_array *) + sizeof(bool)) +
                   mi * (sizeof(void *) + sizeof(oly_array *)) + mo * sizeof(void *);
    /* Pointers first, bools last, so every table is aligned. */
    unsigned char *mem = oly__calloc(1, bytes);
    if (!mem) return OLY_ERR_NOMEM;
    run_tables t;
    t.val = (void **)mem;
    t.arr = (oly_array **)(t.val + nv);
    t.in_ptr = (const void **)(t.arr + nv);
    t.in_arr = (oly_array **)(t.in_ptr + mi);
    t.out_ptr = (void **)(t.in_arr + mi);
    t.owned = (bool *)(t.out_ptr + mo);

    unsigned char *scratch = NULL;
    if (exe->scratch_bytes > 0) {
        scratch = aligned_alloc(OLY_EXEC_ALIGN, exe->scratch_bytes);
        if (!scratch) {
            free(mem);
            return oly__error(OLY_ERR_NOMEM, "out of memory allocating %zu bytes of scratch",
                              exe->scratch_bytes);
        }
    }

    /* Resolve every var's location for this run. */
    for (int i = 0; i < p->n_in; i++) {
        uint32_t v = p->in[i]->id;
        if (in_arrays) {
            t.arr[v] = in_arrays[i];
            t.val[v] = (void *)oly_array_data(in_arrays[i]);
        } else if (exe->in_needs_array[i]) {
            /* A host function may keep this value: give it an array of its own. */
            if ((st = oly_array_from_data(&p->in[i]->aval, in[i], &t.arr[v])) != OLY_OK)
                goto done;
            t.owned[v] = true;
            t.arr[v]->device = device;
            t.val[v] = (void *)oly_array_data(t.arr[v]);
        } else {
            t.val[v] = (void *)in[i];
        }
    }
    for (int i = 0; i < p->n_const; i++) {
        uint32_t v = p->constvar[i]->id;
        t.arr[v] = p->constval[i];
        t.val[v] = (void *)oly_array_data(p->constval[i]);
    }
    for (int i = 0; i < p->n_eqn; i++) {
        const oly_eqn *e = &p->eqn[i];
        for (int j = 0; j < e->n_out; j++) {
            uint32_t v = e->out[j]->id;
            const oly_loc *l = &exe->loc[v];
            switch (l->kind) {
            case OLY_LOC_SCRATCH: t.val[v] = scratch + l->off; break;
            case OLY_LOC_OUT: t.val[v] = out[l->idx]; break;
            case OLY_LOC_OWN:
                if ((st = oly_array_new(&e->out[j]->aval, &t.arr[v])) != OLY_OK) goto done;
                t.owned[v] = true;
                t.arr[v]->device = device;
                t.val[v] = oly_array_mutable_data(t.arr[v]);
                break;
            default:
                st = oly__error(OLY_ERR_INTERNAL, "exec: output var %u has location %d", v,
                                (int)l->kind);
                goto done;
            }
        }
    }

    thread_depth++;
    for (int i = 0; i < exe->n_step; i++) {
        const oly_step *s = &exe->step[i];
        const oly_eqn *e = s->eqn;
        bool arrays = e->prim->wants_arrays;
        for (int j = 0; j < s->n_in; j++) {
            t.in_ptr[j] = ref_data(exe, &t, s->in_ref[j]);
            if (arrays) t.in_arr[j] = ref_array(exe, &t, s->in_ref[j]);
        }
        for (int j = 0; j < s->n_out; j++) t.out_ptr[j] = t.val[s->out_var[j]];
        oly_kernel_ctx ctx = {
            .eqn = e,
            .params = e->params,
            .n_in = s->n_in,
            .in = t.in_ptr,
            .in_aval = s->in_aval,
            .n_out = s->n_out,
            .out = t.out_ptr,
            .out_aval = s->out_aval,
            .ith = 0,
            .nth = 1,
            .run = &run,
            .in_array = arrays ? t.in_arr : NULL,
        };
        st = s->kernel(&ctx);
        if (st != OLY_OK) {
            if ((unsigned)st >= OLY_STATUS_COUNT) st = OLY_ERR_CALLBACK;
            /* Host function failures keep their message (and payload) intact;
             * nested programs have named their failing primitive already. */
            if (st != OLY_ERR_CALLBACK && !arrays && e->n_sub == 0)
                oly__error_prefix(st, "%s", e->prim->name);
            break;
        }
    }
    thread_depth--;
    if (st != OLY_OK) goto done;

    /* Outputs that are inputs, constants, literals, repeats or callback
     * arguments are copied into their buffers. */
    for (int k = 0; k < p->n_out; k++) {
        const oly_out_src *o = &exe->out_src[k];
        if (o->direct) continue;
        oly_aval a = oly__atom_aval(&p->out[k]);
        memcpy(out[k], ref_data(exe, &t, o->ref), oly_aval_nbytes(&a));
    }

done:
    for (uint32_t v = 0; v < nv; v++)
        if (t.owned[v]) oly_array_release(t.arr[v]);
    free(scratch);
    free(mem);
    return st;
}

oly_status oly__exec_run_raw(oly_run *run, oly_program *p, int device, const void *const *in,
                             void *const *out)
{
    const oly_exe *exe;
    OLY_TRY(oly__exec_get(p, &exe));
    return oly__exec_run(run, exe, device, in, NULL, out);
}

static oly_status check_input(const oly_program *p, int i, const oly_array *a)
{
    const oly_aval *want = &p->in[i]->aval;
    if (!a) return oly__error(OLY_ERR_INVALID, "input %d: expected an array, got NULL", i);
    const oly_aval *got = &a->aval;
    if (oly_aval_equal(want, got)) return OLY_OK;
    char w[256], g[256];
    oly_aval_format(w, sizeof w, want);
    oly_aval_format(g, sizeof g, got);
    return oly__error(want->dtype != got->dtype ? OLY_ERR_TYPE : OLY_ERR_SHAPE,
                      "input %d: expected %s, got %s", i, w, g);
}

oly_status oly_program_run(oly_program *p, int device, oly_array *const *inputs, int n_in,
                           oly_array **outputs, int n_out)
{
    if (!p) return oly__error(OLY_ERR_INVALID, "oly_program_run: program is NULL");
    if (device < 0 || device >= oly_device_count())
        return oly__error(OLY_ERR_INVALID, "oly_program_run: device %d out of range [0, %d)",
                          device, oly_device_count());
    if (n_in != p->n_in)
        return oly__error(OLY_ERR_INVALID, "oly_program_run: program takes %d inputs, got %d",
                          p->n_in, n_in);
    if (n_out != p->n_out)
        return oly__error(OLY_ERR_INVALID,
                          "oly_program_run: program has %d outputs, room given for %d", p->n_out,
                          n_out);
    if (n_in > 0 && !inputs) return oly__error(OLY_ERR_INVALID, "oly_program_run: inputs is NULL");
    if (n_out > 0 && !outputs)
        return oly__error(OLY_ERR_INVALID, "oly_program_run: outputs is NULL");
    for (int i = 0; i < n_in; i++) OLY_TRY(check_input(p, i, inputs[i]));

    const oly_exe *exe;
    OLY_TRY(oly__exec_get(p, &exe));

    oly_status st = OLY_OK;
    enum { SMALL = 8 };
    const void *in_small[SMALL];
    void *out_small[SMALL];
    oly_array *res_small[SMALL] = {0};
    const void **in = n_in <= SMALL ? in_small : oly__malloc((size_t)n_in * sizeof *in);
    void **out = n_out <= SMALL ? out_small : oly__malloc((size_t)n_out * sizeof *out);
    oly_array **res = n_out <= SMALL ? res_small : oly__calloc((size_t)n_out, sizeof *res);
    if (!in || !out || !res) {
        st = OLY_ERR_NOMEM;
        goto done;
    }
    for (int i = 0; i < n_in; i++) in[i] = oly_array_data(inputs[i]);
    for (int k = 0; k < n_out; k++) {
        oly_aval a = oly__atom_aval(&p->out[k]);
        if ((st = oly_array_new(&a, &res[k])) != OLY_OK) goto done;
        res[k]->device = device;
        out[k] = oly_array_mutable_data(res[k]);
    }
    st = oly__exec_run(NULL, exe, device, in, inputs, out);
    if (st == OLY_OK) {
        for (int k = 0; k < n_out; k++) {
            outputs[k] = res[k];
            res[k] = NULL;
        }
    }

done:
    if (res)
        for (int k = 0; k < n_out; k++) oly_array_release(res[k]);
    if (in != in_small) free(in);
    if (out != out_small) free(out);
    if (res != res_small) free(res);
    return st;
}
