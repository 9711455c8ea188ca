/* loop.c — the kernels of while and scan: they prepare their nested
 * programs once through the executor's ops (ctx->exec) and run them per
 * iteration; loop carries are double-buffered, scan slices xs and writes ys by
 * byte offsets. Bodies made only of one-element ops run on registers here,
 * without a run of the executor per iteration (register loops). */
#include "cpu/cpu.h"

/* Two sets of carry buffers in one block; a[k], b[k] point into it. */
typedef struct carries {
    unsigned char *block;
    void **a, **b;
} carries;

static oly_status carries_new(carries *c, int n, const oly_aval *av)
{
    size_t total = 0;
    for (int k = 0; k < n; k++) total += (oly_aval_nbytes(&av[k]) + 63) / 64 * 64;
    c->block = oly__malloc(2 * total + 64);
    c->a = oly__calloc((size_t)n + 1, sizeof *c->a);
    c->b = oly__calloc((size_t)n + 1, sizeof *c->b);
    if (!c->block || !c->a || !c->b) return OLY_ERR_NOMEM;
    size_t off = 0;
    for (int k = 0; k < n; k++) {
        c->a[k] = c->block + off;
        c->b[k] = c->block + total + off;
        off += (oly_aval_nbytes(&av[k]) + 63) / 64 * 64;
    }
    return OLY_OK;
}

static void carries_free(carries *c)
{
    free(c->block);
    free(c->a);
    free(c->b);
}

/* ---------------------------------------------------------------- register loops */

/* A loop whose programs are register programs (ctx->exec->scalar: one-element
 * ops only, every operand one element) runs on one register file here,
 * without a run of the executor per iteration (src/cpu/scalar.c: the carries
 * alternate between two register sets, so nothing is copied per iteration).
 * The values are those prepared_run gives. */

/* Host function calls among the ops (olympus.ffi's, C host functions that
 * borrow their arguments) get their frames once per loop, with this run's
 * device and group coordinates (env); a failing call ends the loop with its
 * status and message, the outputs unwritten. */

/* scan with no xs and no ys, its body a register program. */
static oly_status scan_registers(const oly_kernel_ctx *ctx, const oly_scalar_prog *sp, int nk,
                                 int nc, int64_t len)
{
    oly_callback_frame env;
    int64_t coords[OLY_MAX_RANK];
    oly__cpu_callback_env(ctx, &env, coords);
    oly_scalar_loop *L;
    OLY_TRY(oly__cpu_scalar_loop_new(sp, nk, NULL, 0, nc, &env, &L));
    oly__cpu_scalar_loop_load(L, ctx->in, NULL, ctx->in + nk);
    oly_status st = oly__cpu_scalar_loop_run(L, len);
    if (st == OLY_OK) oly__cpu_scalar_loop_store(L, ctx->out);
    oly__cpu_scalar_loop_free(L);
    return st;
}

/* while with both programs register programs. */
static oly_status while_registers(const oly_kernel_ctx *ctx, const oly_scalar_prog *cs,
                                  const oly_scalar_prog *bs, int cn, int bn, int nc)
{
    oly_callback_frame env;
    int64_t coords[OLY_MAX_RANK];
    oly__cpu_callback_env(ctx, &env, coords);
    oly_scalar_loop *L;
    OLY_TRY(oly__cpu_scalar_loop_new(bs, bn, cs, cn, nc, &env, &L));
    oly__cpu_scalar_loop_load(L, ctx->in + cn, ctx->in, ctx->in + cn + bn);
    oly_status st = oly__cpu_scalar_loop_run(L, INT64_MAX);
    if (st == OLY_OK) oly__cpu_scalar_loop_store(L, ctx->out);
    oly__cpu_scalar_loop_free(L);
    return st;
}

/* ---------------------------------------------------------------- executor loops */

/* Loops resolve each nested program's executable and take its run state once
 * (ctx->exec->prepare), then run it per iteration with prebuilt pointer
 * tables: one per parity, so the double-buffered carries swap by switching
 * tables rather than by rewriting them. */
static oly_status while_kernel(const oly_kernel_ctx *ctx)
{
    const oly_params_while *pw = ctx->params;
    int cn = (int)pw->cond_nconsts, bn = (int)pw->body_nconsts, nc = ctx->n_out;
    oly_program *cp = ctx->eqn->sub[0], *bp = ctx->eqn->sub[1];
    int dev = ctx->device;
    carries c = {0};
    oly_exec_prep cprep = {0}, bprep = {0};
    /* cin[par], bin[par] read carries set par (0: a, 1: b); the body writes
     * the other set. */
    size_t nci = (size_t)(cn + nc), nbi = (size_t)(bn + nc);
    const void **tab = oly__calloc(2 * (nci + nbi) + 1, sizeof *tab);
    oly_status s = tab ? carries_new(&c, nc, ctx->out_aval) : OLY_ERR_NOMEM;
    if (s != OLY_OK) goto done;
    if ((s = ctx->exec->prepare(ctx->run, cp, dev, &cprep)) != OLY_OK) goto done;
    if ((s = ctx->exec->prepare(ctx->run, bp, dev, &bprep)) != OLY_OK) goto done;
    const oly_scalar_prog *cs = ctx->exec->scalar(&cprep), *bs = ctx->exec->scalar(&bprep);
    if (cs && bs) {
        s = while_registers(ctx, cs, bs, cn, bn, nc);
        goto done;
    }
    const void **cin[2] = {tab, tab + nci}, **bin[2] = {tab + 2 * nci, tab + 2 * nci + nbi};
    void **bout[2] = {c.b, c.a};
    for (int par = 0; par < 2; par++) {
        void **cur = par ? c.b : c.a;
        for (int i = 0; i < cn; i++) cin[par][i] = ctx->in[i];
        for (int i = 0; i < bn; i++) bin[par][i] = ctx->in[cn + i];
        for (int k = 0; k < nc; k++) cin[par][cn + k] = bin[par][bn + k] = cur[k];
    }
    for (int k = 0; k < nc; k++)
        memcpy(c.a[k], ctx->in[cn + bn + k], oly_aval_nbytes(&ctx->out_aval[k]));
    int par = 0;
    for (;;) {
        bool pred = false;
        void *pout[1] = {&pred};
        if ((s = ctx->exec->prepared_run(&cprep, cin[par], pout)) != OLY_OK) goto done;
        if (!pred) break;
        if ((s = ctx->exec->prepared_run(&bprep, bin[par], bout[par])) != OLY_OK) goto done;
        par ^= 1;
    }
    {
        void **cur = par ? c.b : c.a;
        for (int k = 0; k < nc; k++) memcpy(ctx->out[k], cur[k], oly_aval_nbytes(&ctx->out_aval[k]));
    }
done:
    ctx->exec->prepared_done(&bprep);
    ctx->exec->prepared_done(&cprep);
    carries_free(&c);
    free(tab);
    return s;
}

static oly_status scan_kernel(const oly_kernel_ctx *ctx)
{
    const oly_params_scan *ps = ctx->params;
    int nk = (int)ps->num_consts, nc = (int)ps->num_carry, nx = ctx->n_in - nk - nc;
    int ny = ctx->n_out - nc;
    int64_t len = ps->length;
    oly_program *bp = ctx->eqn->sub[0];
    int dev = ctx->device;
    carries c = {0};
    oly_exec_prep prep = {0};
    size_t ni = (size_t)ctx->n_in, no = (size_t)ctx->n_out;
    /* in[par] reads carries set par (0: a, 1: b), out[par] writes the other. */
    const void **intab = oly__calloc(2 * ni + 1, sizeof *intab);
    void **outtab = oly__calloc(2 * no + 1, sizeof *outtab);
    size_t *xb = oly__calloc((size_t)nx + 1, sizeof *xb), *yb = oly__calloc((size_t)ny + 1, sizeof *yb);
    oly_status s = intab && outtab && xb && yb ? carries_new(&c, nc, ctx->out_aval) : OLY_ERR_NOMEM;
    if (s != OLY_OK) goto done;
    if (len > 0 && (s = ctx->exec->prepare(ctx->run, bp, dev, &prep)) != OLY_OK) goto done;
    const oly_scalar_prog *sp = len > 0 && nx == 0 && ny == 0 ? ctx->exec->scalar(&prep) : NULL;
    if (sp) {
        s = scan_registers(ctx, sp, nk, nc, len);
        goto done;
    }
    for (int j = 0; j < nx && len > 0; j++)
        xb[j] = oly_aval_nbytes(&ctx->in_aval[nk + nc + j]) / (size_t)len;
    for (int j = 0; j < ny && len > 0; j++)
        yb[j] = oly_aval_nbytes(&ctx->out_aval[nc + j]) / (size_t)len;
    const void **in[2] = {intab, intab + ni};
    void **out[2] = {outtab, outtab + no};
    for (int par = 0; par < 2; par++) {
        for (int i = 0; i < nk; i++) in[par][i] = ctx->in[i];
        for (int k = 0; k < nc; k++) {
            in[par][nk + k] = par ? c.b[k] : c.a[k];
            out[par][k] = par ? c.a[k] : c.b[k];
        }
    }
    for (int k = 0; k < nc; k++)
        memcpy(c.a[k], ctx->in[nk + k], oly_aval_nbytes(&ctx->out_aval[k]));
    int par = 0;
    for (int64_t it = 0; it < len; it++) {
        int64_t t = ps->reverse ? len - 1 - it : it;
        const void **ip = in[par];
        void **op = out[par];
        for (int j = 0; j < nx; j++)
            ip[nk + nc + j] = (const unsigned char *)ctx->in[nk + nc + j] + (size_t)t * xb[j];
        for (int j = 0; j < ny; j++) op[nc + j] = (unsigned char *)ctx->out[nc + j] + (size_t)t * yb[j];
        if ((s = ctx->exec->prepared_run(&prep, ip, op)) != OLY_OK) goto done;
        par ^= 1;
    }
    {
        void **cur = par ? c.b : c.a;
        for (int k = 0; k < nc; k++) memcpy(ctx->out[k], cur[k], oly_aval_nbytes(&ctx->out_aval[k]));
    }
done:
    ctx->exec->prepared_done(&prep);
    carries_free(&c);
    free(intab);
    free(outtab);
    free(xb);
    free(yb);
    return s;
}

const oly_cpu_kernel oly__cpu_while = {.fn = while_kernel};
const oly_cpu_kernel oly__cpu_scan = {.fn = scan_kernel};
