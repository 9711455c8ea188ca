/* testutil.c — see testutil.h. */
#include "testutil.h"

#include <math.h>

oly_aval tu_aval(oly_dtype t, int rank, const int64_t *dims)
{
    oly_aval a;
    if (oly_aval_make(t, rank, dims, &a) != OLY_OK) {
        fprintf(stderr, "tu_aval: %s\n", oly_last_error());
        abort();
    }
    return a;
}

oly_array *tu_array(oly_dtype t, int rank, const int64_t *dims, const double *values)
{
    oly_aval av;
    oly_array *a = NULL;
    if (oly_aval_make(t, rank, dims, &av) != OLY_OK || oly_array_new(&av, &a) != OLY_OK) {
        fprintf(stderr, "    tu_array: %s\n", oly_last_error());
        return NULL;
    }
    if (values) oly__convert(values, OLY_FLOAT64, oly_array_mutable_data(a), t, oly_aval_size(&av));
    return a;
}

oly_array *tu_scalar(oly_dtype t, double v) { return tu_array(t, 0, NULL, &v); }

double tu_get(const oly_array *a, int64_t flat)
{
    const oly_aval *av = oly_array_aval(a);
    if (flat < 0 || flat >= oly_aval_size(av)) {
        fprintf(stderr, "    tu_get: index %lld out of range for %lld elements\n",
                (long long)flat, (long long)oly_aval_size(av));
        return NAN;
    }
    size_t es = oly_dtype_size(av->dtype);
    double v = 0;
    oly__convert((const char *)oly_array_data(a) + (size_t)flat * es, av->dtype, &v, OLY_FLOAT64,
                 1);
    return v;
}

static int num_outputs(const oly_prim *p, const void *params, int n_in)
{
    return p->num_outputs ? p->num_outputs(params, n_in) : p->n_out;
}

oly_status tu_run_kernel(const oly_prim *p, const void *params, oly_array *const *in, int n_in,
                         oly_array **out, int max_out, int *n_out)
{
    if (!p) return oly__error(OLY_ERR_INVALID, "tu_run_kernel: prim is NULL");
    if (p->n_in >= 0 && n_in != p->n_in)
        return oly__error(OLY_ERR_INVALID, "tu_run_kernel: %s takes %d inputs, got %d", p->name,
                          p->n_in, n_in);
    int no = num_outputs(p, params, n_in);
    if (no < 0) return oly__error(OLY_ERR_INVALID, "tu_run_kernel: %s: bad output count %d", p->name, no);
    if (no > max_out)
        return oly__error(OLY_ERR_INVALID, "tu_run_kernel: %s has %d outputs, room for %d",
                          p->name, no, max_out);
    if (!p->shape) return oly__error(OLY_ERR_UNSUPPORTED, "%s: no shape rule", p->name);
    const oly_cpu_kernel *k = oly__cpu_kernel(p);
    if (!k) return oly__error(OLY_ERR_UNSUPPORTED, "%s: no CPU kernel", p->name);

    oly_status s = OLY_ERR_NOMEM;
    int nia = n_in > 0 ? n_in : 1, noa = no > 0 ? no : 1;
    oly_aval *in_aval = calloc((size_t)nia, sizeof *in_aval);
    oly_aval *out_aval = calloc((size_t)noa, sizeof *out_aval);
    const void **in_data = calloc((size_t)nia, sizeof *in_data);
    void **out_data = calloc((size_t)noa, sizeof *out_data);
    oly_array **res = calloc((size_t)noa, sizeof *res);
    oly_var *in_var = calloc((size_t)nia, sizeof *in_var);
    oly_var *out_var = calloc((size_t)noa, sizeof *out_var);
    oly_var **out_varp = calloc((size_t)noa, sizeof *out_varp);
    oly_atom *atoms = calloc((size_t)nia, sizeof *atoms);
    if (!in_aval || !out_aval || !in_data || !out_data || !res || !in_var || !out_var ||
        !out_varp || !atoms) {
        oly__error(OLY_ERR_NOMEM, "tu_run_kernel: out of memory");
        goto done;
    }
    for (int i = 0; i < n_in; i++) {
        in_aval[i] = *oly_array_aval(in[i]);
        in_data[i] = oly_array_data(in[i]);
        in_var[i].id = (uint32_t)i;
        in_var[i].aval = in_aval[i];
        atoms[i] = (oly_atom){.kind = OLY_ATOM_VAR, .var = &in_var[i]};
    }
    oly_shape_ctx sc = {.prim = p, .params = params, .n_in = n_in, .in = in_aval, .n_out = no};
    s = p->shape(&sc, out_aval);
    if (s != OLY_OK) goto done;
    for (int i = 0; i < no; i++) {
        s = oly_array_new(&out_aval[i], &res[i]);
        if (s != OLY_OK) goto done;
        out_data[i] = oly_array_mutable_data(res[i]);
        out_var[i].id = (uint32_t)(n_in + i);
        out_var[i].aval = out_aval[i];
        out_varp[i] = &out_var[i];
    }
    oly_eqn eqn = {.prim = p, .params = (void *)(uintptr_t)params, .n_in = n_in, .n_out = no,
                   .n_sub = 0, .in = atoms, .out = out_varp, .sub = NULL,
                   .effects = p->effects ? p->effects(params) : 0};
    oly_kernel_ctx kc = {.eqn = &eqn, .params = params, .n_in = n_in, .in = in_data,
                         .in_aval = in_aval, .n_out = no, .out = out_data, .out_aval = out_aval,
                         .ith = 0, .nth = 1, .run = NULL, .in_array = in};
    s = k->fn(&kc);
    if (s != OLY_OK) goto done;
    for (int i = 0; i < no; i++) {
        out[i] = res[i];
        res[i] = NULL;
    }
    if (n_out) *n_out = no;
done:
    if (res)
        for (int i = 0; i < no; i++) oly_array_release(res[i]);
    free(in_aval);
    free(out_aval);
    free(in_data);
    free(out_data);
    free(res);
    free(in_var);
    free(out_var);
    free(out_varp);
    free(atoms);
    return s;
}

bool tu_allclose(const oly_array *a, const double *expect, int64_t n, double rtol, double atol)
{
    const oly_aval *av = oly_array_aval(a);
    if (oly_aval_size(av) != n) {
        char buf[512];
        oly_aval_format(buf, sizeof buf, av);
        fprintf(stderr, "    tu_allclose: array %s has %lld elements, expected %lld\n", buf,
                (long long)oly_aval_size(av), (long long)n);
        return false;
    }
    for (int64_t i = 0; i < n; i++) {
        double g = tu_get(a, i), e = expect[i];
        bool ok;
        if (isnan(e)) ok = isnan(g);
        else if (isinf(e)) ok = g == e;
        else ok = !isnan(g) && fabs(g - e) <= atol + rtol * fabs(e);
        if (!ok) {
            fprintf(stderr, "    tu_allclose: element %lld: got %.17g, want %.17g (rtol %g atol %g)\n",
                    (long long)i, g, e, rtol, atol);
            return false;
        }
    }
    return true;
}
