/* pmap.c — `pmap`: the nested program sub[0] (one member's body) run once
 * per member of a device mesh at the same time (a group run, src/rt/group.c),
 * with the mesh's axis names bound for the collectives inside. Every input
 * and output has a leading member axis of size prod(sizes); member k gets
 * slice k. Across processes (olympus.distributed) devices are global ids and
 * that axis holds this process's members only, in member order. Params: axis_name (the mesh's names as the collectives' tuple
 * text), sizes, devices (tuple text, one per member), n_out (hidden).
 * Rules, as JAX's: batch (a vmap outside the pmap) vmaps the body, the batch
 * dim right after the member axis; jvp is the pmap of the body's JVP;
 * partial evaluation a known pmap (the body's known part, returning its
 * residuals stacked per member) and an unknown one taking them; transpose
 * the pmap of the body transposed as a whole (residuals first); effects are
 * the body's (oly__eqn_effects). */
#include "prims/control.h"

static const oly_param_field pmap_fields[] = {
    OLY_FIELD(oly_params_pmap, axis_name, OLY_FIELD_STR),
    OLY_FIELD(oly_params_pmap, sizes, OLY_FIELD_INTS),
    OLY_FIELD(oly_params_pmap, devices, OLY_FIELD_STR),
    {.name = "n_out", .kind = OLY_FIELD_INT, .offset = offsetof(oly_params_pmap, n_out),
     .hidden = true},
};

int oly__pmap_mesh(const oly_params_pmap *p, char *buf, size_t n, const char **names,
                   int *devices, int max_members)
{
    const char *s[OLY_MAX_RANK];
    int len[OLY_MAX_RANK];
    if (!p) return oly__error(OLY_ERR_INVALID, "pmap: params are NULL"), -1;
    int na = oly__axis_names(p->axis_name, s, len, OLY_MAX_RANK);
    if (na < 1 || na > OLY_MAX_RANK || na != p->sizes.n) {
        oly__error(OLY_ERR_INVALID,
                   "pmap: axis_name must be the tuple text of one name per mesh axis such as "
                   "('i',), with sizes of the same length; got %s and sizes %s",
                   p->axis_name ? p->axis_name : "NULL", oly__show_ints(&p->sizes).s);
        return -1;
    }
    int64_t members = 1;
    for (int a = 0; a < na; a++) {
        if (p->sizes.v[a] < 1 || p->sizes.v[a] > OLY_GROUP_MAX) {
            oly__error(OLY_ERR_INVALID, "pmap: mesh axis sizes must be >= 1, got %s",
                       oly__show_ints(&p->sizes).s);
            return -1;
        }
        members *= p->sizes.v[a];
        if (members > OLY_GROUP_MAX) {
            oly__error(OLY_ERR_INVALID, "pmap: at most %d members, got sizes %s", OLY_GROUP_MAX,
                       oly__show_ints(&p->sizes).s);
            return -1;
        }
    }
    size_t used = 0;
    for (int a = 0; names && a < na; a++) {
        if (used + (size_t)len[a] + 1 > n) return oly__error(OLY_ERR_INVALID, "pmap: axis names too long"), -1;
        memcpy(buf + used, s[a], (size_t)len[a]);
        buf[used + (size_t)len[a]] = '\0';
        names[a] = buf + used;
        used += (size_t)len[a] + 1;
    }
    /* devices: "(0, 1, 2)" with one entry per member ("(0,)" for one) */
    const char *t = p->devices;
    int count = 0;
    if (t && *t == '(') {
        t++;
        for (;;) {
            while (*t == ' ') t++;
            if (*t == ')') break;
            char *end;
            long d = strtol(t, &end, 10);
            if (end == t || d < 0) { count = -1; break; }
            if (devices && count < max_members) devices[count] = (int)d;
            count++;
            t = end;
            while (*t == ' ') t++;
            if (*t == ',') t++;
            else if (*t != ')') { count = -1; break; }
        }
    } else {
        count = -1;
    }
    if (count != members) {
        oly__error(OLY_ERR_INVALID,
                   "pmap: devices must be the tuple text of %lld device ids (one per member), "
                   "got %s", (long long)members, p->devices ? p->devices : "NULL");
        return -1;
    }
    return (int)members;
}

int oly__pmap_local(const oly_params_pmap *p, int members)
{
    int *devices = oly__malloc((size_t)members * sizeof *devices);
    if (!devices) return oly__error(OLY_ERR_NOMEM, "pmap: out of memory"), -1;
    char buf[1];
    oly__pmap_mesh(p, buf, 0, NULL, devices, members);
    int n = oly__mesh_local_count(devices, members);
    free(devices);
    return n;
}

static int pmap_num_outputs(const void *params, int n_in)
{
    const oly_params_pmap *p = params;
    if (!p || p->n_out < 0 || p->n_out > 1 << 20) return -1;
    return (int)p->n_out;
}

static oly_status pmap_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_pmap *p = ctx->params;
    int m = oly__pmap_mesh(p, NULL, 0, NULL, NULL, 0);
    if (m < 0) return OLY_ERR_INVALID;
    m = oly__pmap_local(p, m); /* the members this process runs (all of one process) */
    if (m < 0) return OLY_ERR_NOMEM;
    if (ctx->n_sub != 1 || !ctx->sub || !ctx->sub[0])
        return oly__error(OLY_ERR_INVALID, "pmap: expected 1 nested program, got %d", ctx->n_sub);
    const oly_program *sub = ctx->sub[0];
    if (ctx->n_in != sub->n_in)
        return oly__error(OLY_ERR_INVALID, "pmap: nested program takes %d inputs, got %d",
                          sub->n_in, ctx->n_in);
    if (ctx->n_out != sub->n_out)
        return oly__error(OLY_ERR_INVALID,
                          "pmap: params n_out is %d but the nested program has %d outputs",
                          ctx->n_out, sub->n_out);
    for (int i = 0; i < ctx->n_in; i++) {
        const oly_aval *want = &sub->in[i]->aval, *got = &ctx->in[i];
        bool ok = got->dtype == want->dtype && got->rank == want->rank + 1 && got->dims[0] == m;
        for (int d = 0; ok && d < want->rank; d++) ok = got->dims[d + 1] == want->dims[d];
        if (!ok)
            return oly__error(want->dtype != got->dtype ? OLY_ERR_TYPE : OLY_ERR_SHAPE,
                              "pmap: input %d: expected the body's %s with a leading member axis "
                              "of size %d, got %s",
                              i, oly__show_aval(want).s, m, oly__show_aval(got).s);
    }
    for (int k = 0; k < sub->n_out; k++) {
        oly_aval a = oly__atom_aval(&sub->out[k]);
        if (a.rank >= OLY_MAX_RANK)
            return oly__error(OLY_ERR_SHAPE, "pmap: output %d (%s) has the largest rank already",
                              k, oly__show_aval(&a).s);
        out[k] = a;
        out[k].rank = a.rank + 1;
        out[k].weak = false;
        out[k].dims[0] = m;
        for (int d = 0; d < a.rank; d++) out[k].dims[d + 1] = a.dims[d];
    }
    return OLY_OK;
}

/* A pmap of prog with eqn's mesh. */
static oly_status emit_pmap(oly_builder *b, const oly_eqn *eqn, oly_program *prog,
                            const oly_atom *in, oly_atom *out)
{
    oly_params_pmap q = *(const oly_params_pmap *)eqn->params;
    q.n_out = prog->n_out;
    return oly__emit(b, eqn->prim, in, prog->n_in, &q, &prog, 1, out);
}

/* vmap outside: the batch dim of every mapped input moved to 1 (right after
 * the member axis), the body vmapped over it (unmapped inputs stay so), its
 * outputs batched at 1. */
static oly_status pmap_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                             const int *in_bdim, oly_atom *out, int *out_bdim)
{
    int n = eqn->n_in, m = eqn->n_out;
    int *axes = oly__calloc((size_t)n + (size_t)m + 1, sizeof *axes);
    oly_atom *args = oly__calloc((size_t)n + 1, sizeof *args);
    oly_status st = axes && args ? OLY_OK : OLY_ERR_NOMEM;
    for (int i = 0; i < n && st == OLY_OK; i++) {
        args[i] = in[i];
        axes[i] = OLY_NOT_MAPPED;
        if (in_bdim[i] == OLY_NOT_MAPPED) continue;
        axes[i] = 0;
        st = oly__batch_move(ctx, in[i], in_bdim[i], 1, &args[i]);
    }
    oly_program *sub = NULL;
    if (st == OLY_OK) st = oly_program_vmap(eqn->sub[0], axes, ctx->size, axes + n, &sub);
    if (st == OLY_OK) st = emit_pmap(ctx->b, eqn, sub, args, out);
    for (int j = 0; st == OLY_OK && j < m; j++) out_bdim[j] = 1;
    oly_program_release(sub);
    free(axes);
    free(args);
    return st;
}

/* jvp: one pmap of the body's JVP (primal and tangent outputs). Under
 * linearize, partial evaluation splits it again (pmap_pe), so the primal is
 * computed once and a body's effects run once. */
static oly_status pmap_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                           const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                           oly_atom *tangent_out, bool *out_nz)
{
    return oly__call_jvp_with(emit_pmap, ctx, eqn, primal, tangent, tan_nz, primal_out,
                              tangent_out, out_nz);
}

/* Partial evaluation splits the body (oly__partial_eval) into K (known
 * inputs -> known outputs, residuals) and U (residuals, unknown inputs ->
 * unknown outputs) and emits a pmap of each: the known one returns its
 * residuals stacked per member (a leading member axis, like every pmap
 * output) and the unknown one takes them back, member k reading slice k. A
 * residual that is a known input of the body is passed as the stacked input
 * itself, not copied out of the known pmap. Each body equation lands in
 * exactly one of the two bodies, so the primal is computed once and effects
 * run once. */
static oly_status pmap_pe(oly_pe_ctx *ctx, const oly_eqn *eqn, const oly_atom *known_in,
                          const oly_atom *unknown_in, const bool *unknown, oly_atom *known_out,
                          oly_atom *unknown_out, bool *out_unknown)
{
    int n = eqn->n_in, no = eqn->n_out;
    TMP_BEGIN;
    oly_program *K, *U, *K2;
    int nres = 0;
    bool *ou;
    ALLOC(ou, no);
    TRY(oly__partial_eval(eqn->sub[0], unknown, &K, &U, &nres, ou));
    TRY(oly__ctl_keep(&t, K));
    TRY(oly__ctl_keep(&t, U));
    int nki = K->n_in, nkn = 0, nun = 0;
    for (int k = 0; k < no; k++) *(ou[k] ? &nun : &nkn) += 1;
    /* pass[r] >= 0: residual r is the body's input pass[r] (known), taken from
     * the equation's own input; otherwise the known pmap returns it */
    int *pass, *pin, *kidx;
    ALLOC(pass, nres);
    ALLOC(pin, nki);
    ALLOC(kidx, nki);
    for (int i = 0, c = 0; i < n; i++)
        if (!unknown[i]) kidx[c++] = i;
    int nout_res = 0;
    for (int r = 0; r < nres; r++) {
        const oly_atom *a = &K->out[nkn + r];
        pass[r] = -1;
        for (int i = 0; i < nki && a->kind == OLY_ATOM_VAR; i++)
            if (a->var == K->in[i]) pass[r] = kidx[i];
        nout_res += pass[r] < 0;
    }
    ctl_src *os;
    oly_aval *av;
    ALLOC(os, nkn + nout_res);
    ALLOC(av, nki);
    int m = 0;
    for (int k = 0; k < nkn; k++) os[m++] = oly__ctl_from_out(k);
    for (int r = 0; r < nres; r++)
        if (pass[r] < 0) os[m++] = oly__ctl_from_out(nkn + r);
    oly__ctl_in_avals(K, av);
    for (int i = 0; i < nki; i++) pin[i] = i;
    TRY(oly__ctl_wrap(K, nki, av, pin, m, os, &K2));
    TRY(oly__ctl_keep(&t, K2));
    TRY(oly__ctl_dce_kept(&t, &K2));
    TRY(oly__ctl_dce_kept(&t, &U));

    oly_atom *kin, *kout, *uin, *uout;
    ALLOC(kin, nki);
    ALLOC(kout, m);
    ALLOC(uin, nres + (n - nki));
    ALLOC(uout, nun);
    for (int i = 0; i < nki; i++) kin[i] = known_in[kidx[i]];
    if (m > 0 || K2->effects) TRY(emit_pmap(ctx->known, eqn, K2, kin, kout));
    if (nun > 0 || U->effects) {
        int c = 0;
        for (int r = 0, o = nkn; r < nres; r++)
            TRY(oly__pe_residual(ctx, pass[r] >= 0 ? known_in[pass[r]] : kout[o++], &uin[c++]));
        for (int i = 0; i < n; i++)
            if (unknown[i]) uin[c++] = unknown_in[i];
        TRY(emit_pmap(ctx->unknown, eqn, U, uin, uout));
    }
    for (int k = 0, a = 0, c = 0; k < no; k++) {
        out_unknown[k] = ou[k];
        if (ou[k])
            unknown_out[k] = uout[c++];
        else
            known_out[k] = kout[a++];
    }
done:
    oly__ctl_tfree(&t);
    return s;
}

/* DCE: the body keeps only the used outputs (and the equations they need,
 * effects included), and the pmap drops the inputs that body no longer
 * reads. NULL replacement when nothing is dropped (DCE then cleans the body
 * in place). */
static oly_status pmap_dce(const oly_eqn *eqn, const bool *used_out, bool *used_in,
                           oly_program **out)
{
    oly_program *sub = eqn->sub[0];
    int n = eqn->n_in, no = eqn->n_out;
    *out = NULL;
    TMP_BEGIN;
    int nuo = 0, nui = 0;
    for (int k = 0; k < no; k++) nuo += used_out[k];
    ctl_src *os;
    oly_aval *av;
    int *pin;
    ALLOC(os, nuo);
    ALLOC(av, n);
    ALLOC(pin, n);
    for (int k = 0, m = 0; k < no; k++)
        if (used_out[k]) os[m++] = oly__ctl_from_out(k);
    oly__ctl_in_avals(sub, av);
    for (int i = 0; i < n; i++) pin[i] = i;
    oly_program *body;
    TRY(oly__ctl_wrap(sub, n, av, pin, nuo, os, &body));
    TRY(oly__ctl_keep(&t, body));
    TRY(oly__ctl_dce_kept(&t, &body));
    /* the inputs the cleaned body reads */
    for (int i = 0; i < n; i++) used_in[i] = false;
    for (int k = 0; k < body->n_eqn; k++)
        for (int i = 0; i < body->eqn[k].n_in; i++)
            for (int j = 0; j < n && body->eqn[k].in[i].kind == OLY_ATOM_VAR; j++)
                used_in[j] |= body->eqn[k].in[i].var == body->in[j];
    for (int k = 0; k < nuo; k++)
        for (int j = 0; j < n && body->out[k].kind == OLY_ATOM_VAR; j++)
            used_in[j] |= body->out[k].var == body->in[j];
    for (int i = 0; i < n; i++) nui += used_in[i];
    if (nuo == no && nui == n) {
        for (int i = 0; i < n; i++) used_in[i] = true;
        goto done;
    }
    /* the body over the used inputs only (the others are never read: zeros
     * stand in for them and are cleaned away) */
    oly_builder *b = NULL;
    oly_atom *bin, *bout, *rin, *rout;
    ALLOC(bin, n);
    ALLOC(bout, nuo);
    ALLOC(rin, nui);
    ALLOC(rout, nuo);
    oly_program *body2 = NULL, *r = NULL;
    TRY(oly_builder_new(&b));
    for (int i = 0; i < n && s == OLY_OK; i++) {
        oly_var *v = NULL;
        if (used_in[i]) {
            s = oly_builder_add_input(b, &av[i], &v);
            bin[i] = oly_atom_var(v);
        } else {
            s = oly__emit_full(b, &av[i], 0.0, &bin[i]);
        }
    }
    if (s == OLY_OK) s = oly__emit_inline(b, body, bin, bout);
    if (s == OLY_OK) s = oly_builder_finish(b, bout, nuo, &body2);
    oly_builder_free(b);
    b = NULL;
    if (s == OLY_OK) s = oly__ctl_keep(&t, body2);
    if (s == OLY_OK) s = oly__ctl_dce_kept(&t, &body2);
    /* the replacement: one pmap over the used inputs' stacked avals */
    if (s == OLY_OK) s = oly_builder_new(&b);
    for (int i = 0, c = 0; i < n && s == OLY_OK; i++) {
        if (!used_in[i]) continue;
        oly_var *v = NULL;
        oly_aval a = oly__atom_aval(&eqn->in[i]);
        s = oly_builder_add_input(b, &a, &v);
        rin[c++] = oly_atom_var(v);
    }
    if (s == OLY_OK) s = emit_pmap(b, eqn, body2, rin, rout);
    if (s == OLY_OK) s = oly_builder_finish(b, rout, nuo, &r);
    oly_builder_free(b);
    if (s == OLY_OK) *out = r;
done:
    oly__ctl_tfree(&t);
    return s;
}

static oly_status pmap_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                 const bool *linear, const oly_atom *ct, const bool *ct_nz,
                                 oly_atom *ct_in, bool *ct_in_nz)
{
    return oly__call_transpose_with(emit_pmap, ctx, eqn, in, linear, ct, ct_nz, ct_in, ct_in_nz);
}

const oly_prim oly__prim_pmap = {
    .name = "pmap",
    .n_in = -1,
    .num_outputs = pmap_num_outputs,
    .params_size = sizeof(oly_params_pmap),
    .fields = pmap_fields,
    .n_fields = OLY_ARRAY_LEN(pmap_fields),
    .shape = pmap_shape,
    .batch = pmap_batch,
    .jvp = pmap_jvp,
    .transpose = pmap_transpose,
    .partial_eval = pmap_pe,
    .dce = pmap_dce,
};
