/* test_rows.c — walks every row of prims.def: a shape rule, every rule slot
 * filled or marked empty on purpose (no_rule), an entry in src/cpu's kernel
 * table, and for the plain families (elementwise, special, structural, reduce,
 * sort, gather, fft, linalg) a kernel that runs for every dtype the shape rule
 * accepts. */
#include "test.h"

static const struct {
    const char *ident;
    const oly_prim *row;
} rows[] = {
#define OLY_PRIM(name) {#name, &oly__prim_##name},
#include "prims/prims.def"
#undef OLY_PRIM
};

TEST(rows_rules_filled_or_marked)
{
    CHECK_EQ(OLY_ARRAY_LEN(rows), OLY_PRIM_ID_COUNT);
    for (int id = 0; id < OLY_ARRAY_LEN(rows); id++) {
        const oly_prim *p = rows[id].row;
        const char *n = rows[id].ident;
        if (!p->name) {
            CHECK_FAIL_("prims.def row %s has no name", n);
            continue;
        }
        if (!p->shape) CHECK_FAIL_("%s: no shape rule", n);
        const struct {
            bool filled;
            unsigned bit;
            const char *slot;
        } slot[] = {{p->batch != NULL, OLY_RULE_BATCH, "batch"},
                    {p->jvp != NULL, OLY_RULE_JVP, "jvp"},
                    {p->transpose != NULL, OLY_RULE_TRANSPOSE, "transpose"},
                    {p->partial_eval != NULL, OLY_RULE_PARTIAL_EVAL, "partial_eval"}};
        for (int k = 0; k < OLY_ARRAY_LEN(slot); k++) {
            bool marked = (p->no_rule & slot[k].bit) != 0;
            if (!slot[k].filled && !marked)
                CHECK_FAIL_("%s: %s rule is NULL but not marked no_rule (OLY_RULE_*)", n,
                            slot[k].slot);
            if (slot[k].filled && marked)
                CHECK_FAIL_("%s: %s rule is set and also marked no_rule", n, slot[k].slot);
        }
        CHECK_EQ(oly__prim_id(p), id);
        const oly_cpu_kernel *k = oly__cpu_kernel_at(id);
        if (!k || !k->fn) CHECK_FAIL_("%s: no CPU kernel in src/cpu's table", n);
        else CHECK(oly__cpu_kernel(p) == k);
    }
    CHECK(oly__cpu_kernel_at(-1) == NULL);
    CHECK(oly__cpu_kernel_at(OLY_PRIM_ID_COUNT) == NULL);
}

/* Builds `outs = p(ins)` for n_in inputs of dtype t and rank rank (dims 3)
 * with zeroed params, and runs it when the shape rule accepts. Returns false
 * when the shape rule (or the verifier) refused. */
static bool try_run(const oly_prim *p, oly_dtype t, int n_in, int rank, const void *params)
{
    int64_t dims[1] = {3};
    oly_aval a;
    if (oly_aval_make(t, rank, dims, &a) != OLY_OK) return false;
    oly_builder *b = NULL;
    CHECK_OK(oly_builder_new(&b));
    oly_atom in[4];
    oly_array *arr[4] = {0};
    for (int i = 0; i < n_in; i++) {
        oly_var *v = NULL;
        CHECK_OK(oly_builder_add_input(b, &a, &v));
        in[i] = oly_atom_var(v);
        CHECK_OK(oly_array_new(&a, &arr[i])); /* zeroed */
    }
    oly_var *outv[8];
    int n_out = 0;
    bool accepted = false;
    oly_program *prog = NULL;
    if (oly_builder_append(b, p, in, n_in, params, NULL, 0, outv, 8, &n_out) == OLY_OK) {
        oly_atom outs[8];
        for (int k = 0; k < n_out; k++) outs[k] = oly_atom_var(outv[k]);
        if (oly_builder_finish(b, outs, n_out, &prog) == OLY_OK) {
            accepted = true;
            oly_array *res[8] = {0};
            oly_status st = oly_program_run(prog, 0, arr, n_in, res, n_out);
            if (st == OLY_ERR_UNSUPPORTED)
                CHECK_FAIL_("%s(%d x %s, rank %d): accepted by the shape rule but: %s", p->name,
                            n_in, oly_dtype_name(t), rank, oly_last_error());
            for (int k = 0; k < n_out; k++) oly_array_release(res[k]);
        }
    }
    oly_program_release(prog);
    oly_builder_free(b);
    for (int i = 0; i < n_in; i++) oly_array_release(arr[i]);
    return accepted;
}

TEST(rows_every_accepted_dtype_has_a_kernel)
{
    /* prims.def lists the plain families first, dot_general last of them; the
     * rows after it need nested programs or host functions (their table
     * entries are checked above). */
    for (int id = 0; id <= OLY_PRIM_ID_dot_general; id++) {
        const oly_prim *p = rows[id].row;
        /* gather and the scatters take integer indices beside an operand of
         * any dtype, which one-dtype inputs cannot express: test_gather.c
         * runs their kernels for every dtype. */
        if (id >= OLY_PRIM_ID_gather && id <= OLY_PRIM_ID_scatter_max) continue;
        void *params = calloc(1, p->params_size ? p->params_size : 1);
        if (!params) {
            CHECK_FAIL_("%s: out of memory", p->name);
            continue;
        }
        /* sort needs num_keys >= 1; other int fields stay 0. */
        if (p == &oly__prim_sort) ((oly_params_sort *)params)->num_keys = 1;
        /* Two params variants: int lists empty, then each (0) (argmax needs
         * one axis); dtype params (index_dtype, new_dtype) are int32. */
        int accepted = 0;
        for (int variant = 0; variant < 2; variant++) {
            for (int k = 0; k < p->n_fields; k++) {
                char *f = (char *)params + p->fields[k].offset;
                if (p->fields[k].kind == OLY_FIELD_DTYPE) *(oly_dtype *)f = OLY_INT32;
                if (p->fields[k].kind == OLY_FIELD_INTS)
                    *(oly_ints *)f = (oly_ints){.n = variant, .v = {0}};
            }
            /* fft's lengths must match the operand's trailing dim: (3) (type
             * FFT; test_fft.c walks every type and dtype) */
            if (p == &oly__prim_fft && variant) ((oly_params_fft *)params)->fft_lengths.v[0] = 3;
            for (int n = 0; n <= 4; n++) { /* threefry2x32 has 4 */
                if (p->n_in >= 0 && n != p->n_in) continue;
                for (int t = 0; t < OLY_DTYPE_COUNT; t++)
                    for (int rank = 0; rank <= 1; rank++)
                        accepted += try_run(p, (oly_dtype)t, n, rank,
                                            p->params_size ? params : NULL);
            }
        }
        free(params);
        if (accepted == 0 && p->n_in != 0)
            CHECK_FAIL_("%s: the shape rule accepted no dtype with zeroed params (test blind)",
                        p->name);
    }
}

/* The elementwise rows (prims.def's first section, up to select_n, and the
 * special functions after it, erf to zeta) state the operand dtypes they
 * accept (oly_prim.dtypes): the shape rule accepts exactly those, and
 * src/cpu's kernel has a loop for each (rank-0 operands, zeroed params;
 * select_n's predicate is bool). */
TEST(rows_elementwise_dtypes_have_kernels)
{
    for (int id = 0; id <= OLY_PRIM_ID_zeta; id++) {
        const oly_prim *p = rows[id].row;
        const oly_cpu_kernel *k = oly__cpu_kernel(p);
        if (!p->dtypes || !k) {
            CHECK_FAIL_("%s: an elementwise row needs accepted dtypes and a kernel", p->name);
            continue;
        }
        void *params = p->params_size ? calloc(1, p->params_size) : NULL;
        int n_in = p->n_in >= 0 ? p->n_in : 3;
        for (int t = 0; t < OLY_DTYPE_COUNT; t++) {
            oly_aval in_aval[3] = {{.dtype = (oly_dtype)t}, {.dtype = (oly_dtype)t},
                                   {.dtype = (oly_dtype)t}}, out_aval;
            if (p == &oly__prim_select_n) in_aval[0].dtype = OLY_BOOL;
            oly_shape_ctx sc = {.prim = p, .params = params, .n_in = n_in, .in = in_aval,
                                .n_out = 1};
            oly_status s = p->shape(&sc, &out_aval);
            const char *tn = oly_dtype_name((oly_dtype)t);
            if (!(p->dtypes >> t & 1)) {
                if (s != OLY_ERR_TYPE)
                    CHECK_FAIL_("%s(%s): outside the row's dtypes, but the shape rule gave %s",
                                p->name, tn, oly_status_name(s));
                continue;
            }
            if (s != OLY_OK) {
                CHECK_FAIL_("%s(%s): in the row's dtypes, but the shape rule refused: %s",
                            p->name, tn, oly_last_error());
                continue;
            }
            _Alignas(16) unsigned char buf[4][16] = {{0}};
            const void *in[3] = {buf[0], buf[1], buf[2]};
            void *out[1] = {buf[3]};
            oly_kernel_ctx kc = {.params = params, .n_in = n_in, .in = in, .in_aval = in_aval,
                                 .n_out = 1, .out = out, .out_aval = &out_aval, .nth = 1};
            s = k->fn(&kc);
            if (s != OLY_OK)
                CHECK_FAIL_("%s(%s): accepted, but the CPU kernel failed: %s", p->name, tn,
                            oly_last_error());
        }
        free(params);
    }
}
