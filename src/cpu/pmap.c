/* pmap.c — the pmap row's kernel: a group run of eqn->sub[0] over the mesh
 * in its params (ctx->exec->run_group), member k reading and writing slice k
 * of every stacked buffer (a pointer offset: no copy). Across processes the
 * buffers hold this process's members only (their slices in member order). */
#include "cpu/cpu.h"

static oly_status pmap_kernel(const oly_kernel_ctx *ctx)
{
    const oly_params_pmap *p = ctx->params;
    oly_program *sub = ctx->eqn->sub[0];
    char buf[1024];
    const char *names[OLY_MAX_RANK];
    int n_in = ctx->n_in, n_out = ctx->n_out;
    int m = oly__pmap_mesh(p, buf, sizeof buf, names, NULL, 0);
    if (m < 0) return OLY_ERR_INVALID;
    int nl = oly__pmap_local(p, m); /* the slices here: this process's members */
    if (nl < 1) return nl < 0 ? OLY_ERR_NOMEM : oly__error(OLY_ERR_INVALID, "pmap: no member "
                                                              "of the mesh is on this process");
    int *devices = oly__malloc((size_t)m * sizeof *devices);
    const void **in = oly__malloc(((size_t)m * (size_t)n_in + 1) * sizeof *in);
    void **out = oly__malloc(((size_t)m * (size_t)n_out + 1) * sizeof *out);
    oly_status st = OLY_ERR_NOMEM;
    if (devices && in && out) {
        oly__pmap_mesh(p, buf, sizeof buf, names, devices, m);
        int sizes[OLY_MAX_RANK];
        for (int a = 0; a < p->sizes.n; a++) sizes[a] = (int)p->sizes.v[a];
        for (int i = 0; i < n_in; i++) {
            size_t slice = oly_aval_nbytes(&ctx->in_aval[i]) / (size_t)nl;
            for (int k = 0; k < nl; k++)
                in[(size_t)k * n_in + i] = (const char *)ctx->in[i] + (size_t)k * slice;
        }
        for (int j = 0; j < n_out; j++) {
            size_t slice = oly_aval_nbytes(&ctx->out_aval[j]) / (size_t)nl;
            for (int k = 0; k < nl; k++) out[(size_t)k * n_out + j] = (char *)ctx->out[j] + (size_t)k * slice;
        }
        oly_mesh mesh = {.n_axes = p->sizes.n, .names = names, .sizes = sizes, .devices = devices};
        st = ctx->exec->run_group(ctx->run, sub, &mesh, in, out);
    }
    free(devices);
    free(in);
    free(out);
    return st;
}

const oly_cpu_kernel oly__cpu_pmap = {.fn = pmap_kernel};
