/* fuse.c — what the executor does to a program's equations before it plans
 * buffers (compile.c): common-subexpression elimination, then fusion of
 * elementwise chains into groups that run tile by tile (src/cpu/fused.c).
 * The program itself is untouched (make_jaxpr and the transforms see it as
 * traced); the rewritten list of equations belongs to the executable.
 *
 * CSE: a pure equation of a prims.def row (no effect, no nested program, no
 * host code, no aliasing) with the same primitive, params and inputs as an
 * earlier one is dropped and its outputs read the earlier one's.
 *
 * Fusion: equations are taken in order; an elementwise row (elementwise.c and
 * special.c: unary, binary, select_n, convert_element_type, integer_pow, ...),
 * a broadcast_in_dim, or a reshape / squeeze / expand_dims / copy joins the
 * open group of its output's element count n (one open group per n; values
 * under FUSE_MIN_ELEMS elements are left alone). A group
 * is emitted (closed) before any other equation that reads one of its values,
 * before a member of another group that reads one (a scalar for a bigger
 * group, a broadcast's operand), before an effectful equation or host code
 * (nothing moves across those), and at the end. Emitting a group where it
 * closes is sound: none of the equations it moved past reads its values, and
 * its members read only values computed before. A group of two or more
 * equations, one of them arithmetic, becomes one equation of the "fused" row
 * below whose params are the cpu plan (oly_fused); its inputs are the values
 * it reads from outside and its outputs the values read outside it (later
 * equations or the program's outputs), so nothing else reaches memory.
 *
 * OLYMPUS_FUSION=0 / OLYMPUS_CSE=0 turn the passes off (read once);
 * OLYMPUS_DEBUG_FUSION=1 prints every compiled program's groups to stderr. */
#include "exec/exec.h"
#include "cpu/fused.h"

/* Bytes of one tile buffer: 2048 float32 elements, 1024 float64. */
#define TILE_BYTES 8192
/* Smaller values are not fused: they stay in cache anyway, and a group's
 * kernel sets up its members' contexts per call (~60 instructions a member),
 * which a run of separate steps has prepared once (measured: 4 f32 ops break
 * even near 4096 elements; 8 elements cost ~50 ns more fused). */
#define FUSE_MIN_ELEMS 4096

/* The row of a fused group's equation: exists only in executables. */
static const oly_prim fused_row = {.name = "fused", .n_in = -1, .n_out = -1};

/* ---------------------------------------------------------------- switches */

/* 0: not read yet, 1: on, 2: off. */
static atomic_int fusion_state, cse_state;
/* The least element count fused; -1: FUSE_MIN_ELEMS. */
static _Atomic int64_t fuse_min = -1;

static bool flag(atomic_int *f, const char *env)
{
    int s = atomic_load_explicit(f, memory_order_relaxed);
    if (s == 0) {
        const char *e = getenv(env);
        s = e && *e && strcmp(e, "0") == 0 ? 2 : 1;
        atomic_store_explicit(f, s, memory_order_relaxed);
    }
    return s == 1;
}

void oly__exec_set_rewrites(int fusion, int cse, int64_t min_elems)
{
    atomic_store(&fusion_state, fusion < 0 ? 0 : fusion ? 1 : 2);
    atomic_store(&cse_state, cse < 0 ? 0 : cse ? 1 : 2);
    atomic_store(&fuse_min, min_elems < 0 ? -1 : min_elems);
}

static int64_t min_elems(void)
{
    int64_t m = atomic_load_explicit(&fuse_min, memory_order_relaxed);
    return m < 0 ? FUSE_MIN_ELEMS : m;
}

/* ---------------------------------------------------------------- the pass state */

typedef enum fkind { K_NONE, K_COMPUTE, K_ALIAS, K_BCAST } fkind;

typedef struct group {
    int64_t n;                  /* elements of every member's output */
    int *mem;                   /* owned: list positions, in order */
    int n_mem, cap;
    bool open;
} group;

typedef struct pass {
    const oly_program *p;
    oly_rewrite *rw;
    /* The list after CSE: equations (inputs substituted), kernels, and where
     * each came from in the program. */
    int n_l;
    oly_eqn *leq;               /* arena */
    const oly_cpu_kernel **lk;  /* owned */
    const oly_eqn **lsrc;       /* owned: borrowed program equations */
    fkind *kind;                /* owned */
    /* Per var (owned): reads by the list and the program's outputs; reads by
     * the group being planned; the open group producing it; planning maps. */
    int *uses, *inner, *grp_of, *vslot, *vgin;
    group *g;                   /* owned */
    int n_g, cap_g;
    int *ord;                   /* owned: >= 0 list position, < 0 group -(g + 1) */
    int n_ord;
} pass;

/* ---------------------------------------------------------------- CSE */

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h;
}

static uint64_t dbits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static uint64_t lit_hash(const oly_scalar *s)
{
    uint64_t h = mix((uint64_t)s->dtype, s->weak);
    if (oly_dtype_is_complex(s->dtype)) return mix(mix(h, dbits(s->v.c[0])), dbits(s->v.c[1]));
    if (oly_dtype_is_float(s->dtype)) return mix(h, dbits(s->v.f));
    return mix(h, s->v.u);
}

static bool lit_same(const oly_scalar *a, const oly_scalar *b)
{
    if (a->dtype != b->dtype || a->weak != b->weak) return false;
    if (oly_dtype_is_complex(a->dtype))
        return dbits(a->v.c[0]) == dbits(b->v.c[0]) && dbits(a->v.c[1]) == dbits(b->v.c[1]);
    if (oly_dtype_is_float(a->dtype)) return dbits(a->v.f) == dbits(b->v.f);
    return a->v.u == b->v.u;
}

static bool cse_ok(const oly_eqn *e, const oly_cpu_kernel *k)
{
    return oly__prim_id(e->prim) >= 0 && e->effects == 0 && e->n_sub == 0 && e->n_out > 0 &&
           !k->wants_arrays && !k->alias_input;
}

static uint64_t eqn_hash(const oly_eqn *e)
{
    uint64_t h = mix((uint64_t)(uintptr_t)e->prim, (uint64_t)e->n_in);
    if (e->prim->params_size) h = mix(h, oly__params_hash(e->prim, e->params));
    for (int j = 0; j < e->n_in; j++)
        h = mix(h, e->in[j].kind == OLY_ATOM_VAR ? e->in[j].var->id : lit_hash(&e->in[j].lit));
    return h;
}

static bool eqn_same(const oly_eqn *a, const oly_eqn *b)
{
    if (a->prim != b->prim || a->n_in != b->n_in || a->n_out != b->n_out) return false;
    for (int j = 0; j < a->n_in; j++) {
        const oly_atom *x = &a->in[j], *y = &b->in[j];
        if (x->kind != y->kind) return false;
        if (x->kind == OLY_ATOM_VAR ? x->var != y->var : !lit_same(&x->lit, &y->lit))
            return false;
    }
    if (!oly__params_equal(a->prim, a->params, b->params)) return false;
    for (int j = 0; j < a->n_out; j++) {
        const oly_aval *x = &a->out[j]->aval, *y = &b->out[j]->aval;
        if (!oly_aval_equal(x, y) || x->weak != y->weak) return false;
    }
    return true;
}

/* The list: every equation with its inputs read through canon (the earlier
 * equation's outputs for a dropped one's), duplicates dropped when cse. */
static oly_status build_list(pass *ps, bool cse)
{
    const oly_program *p = ps->p;
    oly_arena *ar = ps->rw->arena;
    oly_status st = OLY_OK;
    oly_var **canon = oly__calloc(p->n_vars + 1, sizeof *canon);
    size_t cap = 16;
    while (cap < 2 * (size_t)p->n_eqn + 2) cap *= 2;
    int *tab = oly__malloc(cap * sizeof *tab);
    ps->leq = oly__arena_alloc(ar, ((size_t)p->n_eqn + 1) * sizeof *ps->leq);
    ps->lk = oly__calloc((size_t)p->n_eqn + 1, sizeof *ps->lk);
    ps->lsrc = oly__calloc((size_t)p->n_eqn + 1, sizeof *ps->lsrc);
    if (!canon || !tab || !ps->leq || !ps->lk || !ps->lsrc) {
        st = OLY_ERR_NOMEM;
        goto done;
    }
    for (size_t i = 0; i < cap; i++) tab[i] = -1;
    for (int i = 0; i < p->n_eqn; i++) {
        const oly_eqn *e = &p->eqn[i];
        const oly_cpu_kernel *k = oly__cpu_kernel(e->prim);
        if (!k) {
            st = oly__error(OLY_ERR_UNSUPPORTED,
                            "%s: no CPU kernel for this primitive (equation %d)", e->prim->name,
                            i);
            goto done;
        }
        oly_eqn ne = *e;
        bool renamed = false;
        for (int j = 0; j < e->n_in; j++)
            renamed |= e->in[j].kind == OLY_ATOM_VAR && canon[e->in[j].var->id];
        if (renamed) {
            oly_atom *in = oly__arena_alloc(ar, (size_t)e->n_in * sizeof *in);
            if (!in) {
                st = OLY_ERR_NOMEM;
                goto done;
            }
            for (int j = 0; j < e->n_in; j++) {
                in[j] = e->in[j];
                if (in[j].kind == OLY_ATOM_VAR && canon[in[j].var->id])
                    in[j].var = canon[in[j].var->id];
            }
            ne.in = in;
        }
        if (cse && cse_ok(e, k)) {
            size_t h = (size_t)eqn_hash(&ne) & (cap - 1);
            int found = -1;
            for (; tab[h] >= 0; h = (h + 1) & (cap - 1))
                if (eqn_same(&ps->leq[tab[h]], &ne)) {
                    found = tab[h];
                    break;
                }
            if (found >= 0) {
                for (int j = 0; j < e->n_out; j++) canon[e->out[j]->id] = ps->leq[found].out[j];
                ps->rw->n_cse++;
                continue;
            }
            tab[h] = ps->n_l;
        }
        ps->leq[ps->n_l] = ne;
        ps->lk[ps->n_l] = k;
        ps->lsrc[ps->n_l] = e;
        ps->n_l++;
    }
    ps->rw->out = oly__arena_alloc(ar, ((size_t)p->n_out + 1) * sizeof *ps->rw->out);
    if (!ps->rw->out) {
        st = OLY_ERR_NOMEM;
        goto done;
    }
    for (int k = 0; k < p->n_out; k++) {
        ps->rw->out[k] = p->out[k];
        if (p->out[k].kind == OLY_ATOM_VAR && canon[p->out[k].var->id])
            ps->rw->out[k].var = canon[p->out[k].var->id];
    }
done:
    free(canon);
    free(tab);
    return st;
}

/* ---------------------------------------------------------------- broadcasts */

/* The read of broadcast_in_dim e's operand over its output's index space:
 * unit dims dropped, dense neighbours merged (stride 0 merges with 0). */
static void bcast_plan(const oly_eqn *e, oly_fbcast *b)
{
    const oly_params_broadcast_in_dim *prm = e->params;
    const oly_aval *out = &e->out[0]->aval;
    oly_aval x = oly__atom_aval(&e->in[0]);
    int64_t xs[OLY_MAX_RANK], st[OLY_MAX_RANK] = {0};
    oly__strides(&x, xs);
    for (int i = 0; i < x.rank; i++)
        if (x.dims[i] != 1) st[prm->broadcast_dimensions.v[i]] = xs[i];
    int w = 0;
    for (int d = 0; d < out->rank; d++) {
        if (out->dims[d] == 1) continue;
        if (w > 0 && b->stride[w - 1] == st[d] * out->dims[d]) {
            b->dims[w - 1] *= out->dims[d];
            b->stride[w - 1] = st[d];
            continue;
        }
        b->dims[w] = out->dims[d];
        b->stride[w] = st[d];
        w++;
    }
    b->rank = w;
    b->constant = true;
    for (int d = 0; d < w; d++) b->constant &= b->stride[d] == 0;
}

/* The broadcast reads its operand in order, element for element: a reshape. */
static bool bcast_identity(const oly_fbcast *b)
{
    return b->rank == 0 || (b->rank == 1 && b->stride[0] == 1);
}

/* ---------------------------------------------------------------- grouping */

static bool is_binary(int id)
{
    return (id >= OLY_PRIM_ID_add && id <= OLY_PRIM_ID_ge) ||
           (id >= OLY_PRIM_ID_igamma && id <= OLY_PRIM_ID_zeta);
}

/* How e may join a group. Elementwise rows are the prims.def ranges neg ..
 * select_n (elementwise.c) and erf .. zeta (special.c): their kernels map
 * element i of every full operand to element i of the output (rank-0
 * operands broadcast), so a tile of the flat index space runs them as is. */
static fkind classify(const oly_eqn *e, const oly_cpu_kernel *k)
{
    if (e->effects || e->n_sub || e->n_out != 1 || k->wants_arrays || k->alias_input)
        return K_NONE;
    int id = oly__prim_id(e->prim);
    if (((id >= OLY_PRIM_ID_neg && id <= OLY_PRIM_ID_select_n) ||
         (id >= OLY_PRIM_ID_erf && id <= OLY_PRIM_ID_zeta)) && e->prim->dtypes)
        return K_COMPUTE;
    switch (id) {
    case OLY_PRIM_ID_reshape:
    case OLY_PRIM_ID_squeeze:
    case OLY_PRIM_ID_expand_dims:
    case OLY_PRIM_ID_copy: return e->in[0].kind == OLY_ATOM_VAR ? K_ALIAS : K_NONE;
    case OLY_PRIM_ID_broadcast_in_dim: return K_BCAST;
    default: return K_NONE;
    }
}

/* Appends list position v (>= 0) or group -(v + 1) to the run order. */
static void emit(pass *ps, int v) { ps->ord[ps->n_ord++] = v; }

static void close_group(pass *ps, int gi)
{
    if (!ps->g[gi].open) return;
    ps->g[gi].open = false;
    emit(ps, -(gi + 1));
}

static void close_all(pass *ps)
{
    for (int gi = 0; gi < ps->n_g; gi++) close_group(ps, gi);
}

/* Closes the open group producing atom a unless it is group `keep`. */
static void close_producer(pass *ps, const oly_atom *a, int keep)
{
    if (a->kind != OLY_ATOM_VAR) return;
    int gi = ps->grp_of[a->var->id];
    if (gi >= 0 && gi != keep && ps->g[gi].open) close_group(ps, gi);
}

static oly_status join(pass *ps, int li, int64_t n)
{
    int gi = -1;
    for (int i = 0; i < ps->n_g; i++)
        if (ps->g[i].open && ps->g[i].n == n) gi = i;
    if (gi < 0) {
        if (ps->n_g == ps->cap_g) {
            int cap = ps->cap_g ? 2 * ps->cap_g : 8;
            group *g = oly__realloc(ps->g, (size_t)cap * sizeof *g);
            if (!g) return OLY_ERR_NOMEM;
            ps->g = g;
            ps->cap_g = cap;
        }
        gi = ps->n_g++;
        ps->g[gi] = (group){.n = n, .open = true};
    }
    group *g = &ps->g[gi];
    if (g->n_mem == g->cap) {
        int cap = g->cap ? 2 * g->cap : 8;
        int *m = oly__realloc(g->mem, (size_t)cap * sizeof *m);
        if (!m) return OLY_ERR_NOMEM;
        g->mem = m;
        g->cap = cap;
    }
    g->mem[g->n_mem++] = li;
    ps->grp_of[ps->leq[li].out[0]->id] = gi;
    return OLY_OK;
}

static int open_group_of(const pass *ps, int64_t n)
{
    for (int i = 0; i < ps->n_g; i++)
        if (ps->g[i].open && ps->g[i].n == n) return i;
    return -1;
}

/* Decides the groups and the order: ps->ord. */
static oly_status group_list(pass *ps, bool fuse)
{
    int64_t least = min_elems();
    for (int li = 0; li < ps->n_l; li++) {
        const oly_eqn *e = &ps->leq[li];
        fkind k = fuse ? classify(e, ps->lk[li]) : K_NONE;
        int64_t n = k != K_NONE ? oly_aval_size(&e->out[0]->aval) : 0;
        if (n < least) k = K_NONE;
        if (k == K_BCAST) {
            /* The operand is read whole, not tile by tile: computed before
             * the group, unless the broadcast is a plain reshape of a value
             * of the same group. */
            oly_fbcast b;
            bcast_plan(e, &b);
            int mine = open_group_of(ps, n);
            int gi = e->in[0].kind == OLY_ATOM_VAR ? ps->grp_of[e->in[0].var->id] : -1;
            if (gi >= 0 && gi == mine && !bcast_identity(&b)) k = K_NONE;
            else close_producer(ps, &e->in[0], bcast_identity(&b) ? mine : -1);
        }
        ps->kind[li] = k;
        if (k == K_NONE) {
            if (e->effects || ps->lk[li]->wants_arrays) close_all(ps);
            else
                for (int j = 0; j < e->n_in; j++) close_producer(ps, &e->in[j], -1);
            emit(ps, li);
            continue;
        }
        int mine = open_group_of(ps, n);
        for (int j = 0; j < e->n_in; j++) close_producer(ps, &e->in[j], mine);
        OLY_TRY(join(ps, li, n));
    }
    close_all(ps);
    return OLY_OK;
}

/* ---------------------------------------------------------------- a group's plan */

typedef struct planner {
    pass *ps;
    const group *g;
    oly_arena *ar;
    oly_atom *gin;              /* group inputs */
    bool *gin_bc;               /* input gathered by a broadcast */
    int n_gin;
    oly_var **gout;             /* group outputs */
    int n_gout;
    oly_fslot *slot;
    int n_slot;
    oly_fop *op;
    const oly_cpu_kernel **opk; /* each op's member kernel (NULL for copies) */
    int n_op;
    int *ref;
    int n_ref;
    oly_fbcast *bc;
    int n_bc;
} planner;

static int add_input(planner *pl, const oly_atom *a)
{
    if (a->kind == OLY_ATOM_VAR && pl->ps->vgin[a->var->id] >= 0)
        return pl->ps->vgin[a->var->id];
    int gi = pl->n_gin++;
    pl->gin[gi] = *a;
    pl->gin_bc[gi] = false;
    if (a->kind == OLY_ATOM_VAR) pl->ps->vgin[a->var->id] = gi;
    return gi;
}

static int new_slot(planner *pl, oly_fslot_kind kind, oly_dtype t, int idx)
{
    pl->slot[pl->n_slot] = (oly_fslot){.kind = kind, .dtype = t, .es = oly_dtype_size(t),
                                       .idx = idx, .bc_in = -1, .bc = -1};
    return pl->n_slot++;
}

/* The slot operand a is read from. */
static int in_slot(planner *pl, const oly_atom *a)
{
    if (a->kind == OLY_ATOM_VAR && pl->ps->vslot[a->var->id] >= 0)
        return pl->ps->vslot[a->var->id];
    oly_aval av = oly__atom_aval(a);
    int gi = add_input(pl, a);
    int s = new_slot(pl, oly_aval_size(&av) == pl->g->n ? OLY_FSLOT_IN : OLY_FSLOT_SCALAR,
                     av.dtype, gi);
    if (a->kind == OLY_ATOM_VAR) pl->ps->vslot[a->var->id] = s;
    return s;
}

static bool leaves_group(const pass *ps, const oly_var *v)
{
    return ps->uses[v->id] > ps->inner[v->id];
}

static int out_slot(planner *pl, const oly_var *v)
{
    if (leaves_group(pl->ps, v)) {
        pl->gout[pl->n_gout] = (oly_var *)v;
        return new_slot(pl, OLY_FSLOT_OUT, v->aval.dtype, pl->n_gout++);
    }
    return new_slot(pl, OLY_FSLOT_TEMP, v->aval.dtype, -1);
}

static void add_op(planner *pl, oly_kernel_fn fn, const oly_cpu_kernel *k, const oly_eqn *src,
                   const int *slots, int n_in)
{
    oly_fop *o = &pl->op[pl->n_op];
    *o = (oly_fop){.fn = fn, .eqn = src, .n_in = n_in, .n_out = 1, .ref = pl->n_ref};
    for (int j = 0; j <= n_in; j++) pl->ref[pl->n_ref++] = slots[j];
    pl->opk[pl->n_op++] = k;
}

/* v takes slot s, or a copy of it when v leaves the group. */
static void alias_value(planner *pl, const oly_eqn *src, const oly_var *v, int s)
{
    if (!leaves_group(pl->ps, v)) {
        pl->ps->vslot[v->id] = s;
        return;
    }
    int sl[2] = {s, out_slot(pl, v)};
    add_op(pl, NULL, NULL, src, sl, 1);
    pl->ps->vslot[v->id] = sl[1];
}

/* A broadcast of one element whose every reader takes a rank-0 operand there
 * (binary rows beside a full operand, select_n's predicate) is read as a
 * scalar, with no tile buffer at all. */
static bool scalar_ok(const planner *pl, int s)
{
    for (int k = 0; k < pl->n_op; k++) {
        const oly_fop *o = &pl->op[k];
        for (int j = 0; j < o->n_in; j++) {
            if (pl->ref[o->ref + j] != s) continue;
            if (!o->fn) return false;
            int id = oly__prim_id(o->eqn->prim);
            if (id == OLY_PRIM_ID_select_n && j == 0) continue;
            if (!is_binary(id)) return false;
            int other = pl->ref[o->ref + 1 - j];
            if (other == s || pl->slot[other].kind == OLY_FSLOT_SCALAR) return false;
        }
    }
    return true;
}

static size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

static oly_status plan_group(pass *ps, const group *g, oly_eqn *fe, const oly_cpu_kernel **fk)
{
    oly_status st = OLY_OK;
    oly_arena *ar = ps->rw->arena;
    int cap_in = 0, cap_ref = 0;
    for (int m = 0; m < g->n_mem; m++) {
        const oly_eqn *e = &ps->leq[g->mem[m]];
        cap_in += e->n_in;
        cap_ref += e->n_in + e->n_out + 1;
        for (int j = 0; j < e->n_in; j++)
            if (e->in[j].kind == OLY_ATOM_VAR) ps->inner[e->in[j].var->id]++;
    }
    planner pl = {.ps = ps, .g = g, .ar = ar};
    int cap_slot = cap_in + 2 * g->n_mem + 1;
    pl.gin = oly__arena_alloc(ar, (size_t)(cap_in + 1) * sizeof *pl.gin);
    pl.gin_bc = oly__calloc((size_t)cap_in + 1, sizeof *pl.gin_bc);
    pl.gout = oly__arena_alloc(ar, (size_t)(g->n_mem + 1) * sizeof *pl.gout);
    pl.slot = oly__arena_alloc(ar, (size_t)cap_slot * sizeof *pl.slot);
    pl.op = oly__arena_alloc(ar, (size_t)(g->n_mem + 1) * sizeof *pl.op);
    pl.opk = oly__calloc((size_t)g->n_mem + 1, sizeof *pl.opk);
    pl.ref = oly__arena_alloc(ar, (size_t)cap_ref * sizeof *pl.ref);
    pl.bc = oly__arena_alloc(ar, (size_t)(g->n_mem + 1) * sizeof *pl.bc);
    int *last_read = oly__malloc((size_t)cap_slot * sizeof *last_read);
    int *free_buf = oly__malloc((size_t)cap_slot * sizeof *free_buf);
    int *perm = oly__malloc((size_t)(cap_in + 1) * sizeof *perm);
    oly_fused *fu = oly__arena_alloc(ar, sizeof *fu);
    if (!pl.gin || !pl.gin_bc || !pl.gout || !pl.slot || !pl.op || !pl.opk || !pl.ref || !pl.bc ||
        !last_read || !free_buf || !perm || !fu) {
        st = OLY_ERR_NOMEM;
        goto done;
    }

    /* Slots and ops, member by member. */
    for (int m = 0; m < g->n_mem; m++) {
        int li = g->mem[m];
        const oly_eqn *e = &ps->leq[li];
        const oly_var *v = e->out[0];
        switch (ps->kind[li]) {
        case K_COMPUTE: {
            int sl[OLY_MAX_RANK + 2], *s = e->n_in + 1 <= OLY_ARRAY_LEN(sl) ? sl : NULL;
            int *heap = NULL;
            if (!s && !(s = heap = oly__malloc((size_t)(e->n_in + 1) * sizeof *s))) {
                st = OLY_ERR_NOMEM;
                goto done;
            }
            for (int j = 0; j < e->n_in; j++) s[j] = in_slot(&pl, &e->in[j]);
            s[e->n_in] = out_slot(&pl, v);
            ps->vslot[v->id] = s[e->n_in];
            add_op(&pl, ps->lk[li]->fn, ps->lk[li], ps->lsrc[li], s, e->n_in);
            free(heap);
            break;
        }
        case K_ALIAS: alias_value(&pl, ps->lsrc[li], v, in_slot(&pl, &e->in[0])); break;
        case K_BCAST: {
            oly_fbcast b = {0};
            bcast_plan(e, &b);
            if (bcast_identity(&b)) {
                alias_value(&pl, ps->lsrc[li], v, in_slot(&pl, &e->in[0]));
                break;
            }
            int gi = add_input(&pl, &e->in[0]);
            pl.gin_bc[gi] = true;
            pl.bc[pl.n_bc] = b;
            int s = new_slot(&pl, OLY_FSLOT_BCAST, v->aval.dtype, -1);
            pl.slot[s].bc_in = gi;
            pl.slot[s].bc = pl.n_bc++;
            alias_value(&pl, ps->lsrc[li], v, s);
            break;
        }
        case K_NONE: OLY_ASSERT(0); break;
        }
    }

    /* Broadcast scalars read in place. */
    for (int s = 0; s < pl.n_slot; s++)
        if (pl.slot[s].kind == OLY_FSLOT_BCAST && pl.bc[pl.slot[s].bc].constant &&
            scalar_ok(&pl, s)) {
            pl.slot[s].kind = OLY_FSLOT_SCALAR;
            pl.slot[s].idx = pl.slot[s].bc_in;
        }

    /* Tile buffers: temps by liveness (output 0 over a dying input 0 where
     * the kernel allows it), then one per broadcast gathered per tile. */
    size_t max_es = 1;
    for (int s = 0; s < pl.n_slot; s++) {
        last_read[s] = -1;
        if (pl.slot[s].kind == OLY_FSLOT_TEMP || pl.slot[s].kind == OLY_FSLOT_BCAST) {
            size_t es = oly_dtype_size(pl.slot[s].dtype);
            if (es > max_es) max_es = es;
        }
    }
    for (int k = 0; k < pl.n_op; k++)
        for (int j = 0; j < pl.op[k].n_in; j++) last_read[pl.ref[pl.op[k].ref + j]] = k;
    int n_temp = 0, n_free = 0;
    for (int k = 0; k < pl.n_op; k++) {
        const oly_fop *o = &pl.op[k];
        const int *r = &pl.ref[o->ref];
        int so = r[o->n_in], reuse = -1;
        if (pl.slot[so].kind == OLY_FSLOT_TEMP) {
            if (o->fn && pl.opk[k]->inplace_ok && o->n_in > 0 &&
                pl.slot[r[0]].kind == OLY_FSLOT_TEMP && last_read[r[0]] == k &&
                oly_dtype_size(pl.slot[r[0]].dtype) == oly_dtype_size(pl.slot[so].dtype)) {
                reuse = r[0];
                for (int j = 1; j < o->n_in; j++)
                    if (r[j] == r[0]) reuse = -1;
            }
            pl.slot[so].idx = reuse >= 0 ? pl.slot[reuse].idx
                              : n_free ? free_buf[--n_free] : n_temp++;
        }
        for (int j = 0; j < o->n_in; j++) {
            int s = r[j];
            bool dup = false;
            for (int i = 0; i < j; i++) dup |= r[i] == s;
            if (!dup && s != reuse && pl.slot[s].kind == OLY_FSLOT_TEMP && last_read[s] == k)
                free_buf[n_free++] = pl.slot[s].idx;
        }
        if (pl.slot[so].kind == OLY_FSLOT_TEMP && last_read[so] < 0)
            free_buf[n_free++] = pl.slot[so].idx;
    }
    int n_buf = n_temp;
    for (int s = 0; s < pl.n_slot; s++)
        if (pl.slot[s].kind == OLY_FSLOT_BCAST) pl.slot[s].idx = n_buf++;

    /* Input 0 may share output 0's buffer (the plan's in-place rule) when the
     * last op alone writes the group's one output after every read of the
     * input's tile; an input gathered by a broadcast is read across tiles. */
    bool inplace = false;
    int first = -1;
    const oly_fop *lo = pl.n_op ? &pl.op[pl.n_op - 1] : NULL;
    if (pl.n_gout == 1 && lo && lo->fn && pl.slot[pl.ref[lo->ref + lo->n_in]].kind == OLY_FSLOT_OUT) {
        size_t oes = oly_dtype_size(pl.gout[0]->aval.dtype);
        for (int s = 0; s < pl.n_slot && first < 0; s++) {
            const oly_fslot *sl = &pl.slot[s];
            if (sl->kind != OLY_FSLOT_IN || pl.gin_bc[sl->idx] ||
                pl.gin[sl->idx].kind != OLY_ATOM_VAR || oly_dtype_size(sl->dtype) != oes)
                continue;
            bool ok = true;
            for (int j = 0; j < lo->n_in; j++)
                if (pl.ref[lo->ref + j] == s && (j != 0 || !pl.opk[pl.n_op - 1]->inplace_ok))
                    ok = false;
            if (ok) first = sl->idx;
        }
        inplace = first >= 0;
    }
    for (int i = 0; i < pl.n_gin; i++) perm[i] = i;
    if (first > 0) {
        oly_atom a = pl.gin[first];
        bool b = pl.gin_bc[first];
        for (int i = first; i > 0; i--) {
            pl.gin[i] = pl.gin[i - 1];
            pl.gin_bc[i] = pl.gin_bc[i - 1];
        }
        pl.gin[0] = a;
        pl.gin_bc[0] = b;
        for (int i = 0; i < first; i++) perm[i] = i + 1;
        perm[first] = 0;
        for (int s = 0; s < pl.n_slot; s++) {
            oly_fslot *sl = &pl.slot[s];
            if (sl->kind == OLY_FSLOT_IN || sl->kind == OLY_FSLOT_SCALAR) sl->idx = perm[sl->idx];
            if (sl->bc_in >= 0) sl->bc_in = perm[sl->bc_in];
        }
    }

    /* Tiles and the members' tile avals. */
    int64_t n = g->n, tile = (int64_t)(TILE_BYTES / max_es);
    if (tile > n) tile = n > 0 ? n : 1;
    int64_t n_tiles = (n + tile - 1) / tile, last_m = n ? n - (n_tiles - 1) * tile : 0;
    for (int k = 0; k < pl.n_op; k++) {
        oly_fop *o = &pl.op[k];
        int na = o->n_in + o->n_out;
        oly_aval *a = oly__arena_alloc(ar, 2 * (size_t)na * sizeof *a);
        if (!a) {
            st = OLY_ERR_NOMEM;
            goto done;
        }
        for (int j = 0; j < na; j++) {
            const oly_fslot *sl = &pl.slot[pl.ref[o->ref + j]];
            a[j].dtype = a[na + j].dtype = sl->dtype;
            if (sl->kind == OLY_FSLOT_SCALAR) continue;
            a[j].rank = a[na + j].rank = 1;
            a[j].dims[0] = tile;
            a[na + j].dims[0] = last_m;
        }
        o->aval = a;
        o->aval_last = a + na;
    }

    /* What moves per tile: IN / OUT operands, gathered broadcasts. */
    oly_fmove *mv = oly__arena_alloc(ar, ((size_t)pl.n_ref + 1) * sizeof *mv);
    int *gat = oly__arena_alloc(ar, ((size_t)pl.n_slot + 1) * sizeof *gat);
    if (!mv || !gat) {
        st = OLY_ERR_NOMEM;
        goto done;
    }
    int n_move = 0, n_gather = 0;
    for (int r = 0; r < pl.n_ref; r++) {
        const oly_fslot *sl = &pl.slot[pl.ref[r]];
        if (sl->kind == OLY_FSLOT_IN || sl->kind == OLY_FSLOT_OUT)
            mv[n_move++] = (oly_fmove){r, pl.ref[r], sl->es};
        else if (sl->kind == OLY_FSLOT_BCAST && !pl.bc[sl->bc].constant)
            mv[n_move++] = (oly_fmove){r, pl.ref[r], 0};
    }
    for (int s = 0; s < pl.n_slot; s++)
        if (pl.slot[s].kind == OLY_FSLOT_BCAST && !pl.bc[pl.slot[s].bc].constant)
            gat[n_gather++] = s;

    *fu = (oly_fused){.n = n, .tile = tile, .n_in = pl.n_gin, .n_out = pl.n_gout,
                      .n_slot = pl.n_slot, .n_op = pl.n_op, .n_ref = pl.n_ref, .n_buf = n_buf,
                      .n_bcast = pl.n_bc, .buf_bytes = round64((size_t)tile * max_es),
                      .slot = pl.slot, .op = pl.op, .ref_slot = pl.ref, .bcast = pl.bc,
                      .n_move = n_move, .n_gather = n_gather, .move = mv, .gather = gat,
                      .last_differs = last_m != tile};
    fu->chain = oly__cpu_fused_chain(fu, ar);
    fu->regs = fu->chain ? NULL : oly__cpu_fused_regs(fu, ar);
    *fe = (oly_eqn){.prim = &fused_row, .params = fu, .n_in = pl.n_gin, .n_out = pl.n_gout,
                    .in = pl.gin, .out = pl.gout};
    *fk = &oly__cpu_fused_entry[inplace];

done:
    /* Reset the per-var maps for the next group. */
    for (int m = 0; m < g->n_mem; m++) {
        const oly_eqn *e = &ps->leq[g->mem[m]];
        for (int j = 0; j < e->n_in; j++)
            if (e->in[j].kind == OLY_ATOM_VAR) {
                uint32_t u = e->in[j].var->id;
                ps->inner[u] = 0;
                ps->vslot[u] = -1;
                ps->vgin[u] = -1;
            }
        ps->vslot[e->out[0]->id] = -1;
    }
    free(pl.gin_bc);
    free(pl.opk);
    free(last_read);
    free(free_buf);
    free(perm);
    return st;
}

/* A group worth fusing: two members or more, one of them arithmetic. */
static bool worth(const pass *ps, const group *g)
{
    if (g->n_mem < 2) return false;
    for (int m = 0; m < g->n_mem; m++)
        if (ps->kind[g->mem[m]] == K_COMPUTE) return true;
    return false;
}

/* ---------------------------------------------------------------- the rewrite */

void oly__exec_rewrite_free(oly_rewrite *rw)
{
    if (!rw) return;
    free(rw->kern);
    oly__arena_free(rw->arena);
    free(rw);
}

static oly_status finish(pass *ps)
{
    oly_rewrite *rw = ps->rw;
    int n = 0;
    for (int i = 0; i < ps->n_ord; i++) {
        int o = ps->ord[i];
        n += o >= 0 ? 1 : worth(ps, &ps->g[-o - 1]) ? 1 : ps->g[-o - 1].n_mem;
    }
    rw->eqn = oly__arena_alloc(rw->arena, ((size_t)n + 1) * sizeof *rw->eqn);
    rw->kern = oly__calloc((size_t)n + 1, sizeof *rw->kern);
    if (!rw->eqn || !rw->kern) return OLY_ERR_NOMEM;
    for (int i = 0; i < ps->n_ord; i++) {
        int o = ps->ord[i];
        if (o >= 0) {
            rw->eqn[rw->n_eqn] = ps->leq[o];
            rw->kern[rw->n_eqn++] = ps->lk[o];
            continue;
        }
        const group *g = &ps->g[-o - 1];
        if (!worth(ps, g)) {
            for (int m = 0; m < g->n_mem; m++) {
                rw->eqn[rw->n_eqn] = ps->leq[g->mem[m]];
                rw->kern[rw->n_eqn++] = ps->lk[g->mem[m]];
            }
            continue;
        }
        OLY_TRY(plan_group(ps, g, &rw->eqn[rw->n_eqn], &rw->kern[rw->n_eqn]));
        rw->n_eqn++;
        rw->n_group++;
        rw->n_fused += g->n_mem;
    }
    return OLY_OK;
}

oly_status oly__exec_rewrite(const oly_program *p, oly_rewrite **out)
{
    oly_status st = OLY_ERR_NOMEM;
    pass ps = {.p = p};
    size_t nv = (size_t)p->n_vars + 1;
    oly_rewrite *rw = oly__calloc(1, sizeof *rw);
    if (!rw || !(rw->arena = oly__arena_new())) goto fail;
    ps.rw = rw;
    if ((st = build_list(&ps, flag(&cse_state, "OLYMPUS_CSE"))) != OLY_OK) goto fail;
    st = OLY_ERR_NOMEM;
    ps.kind = oly__calloc((size_t)ps.n_l + 1, sizeof *ps.kind);
    ps.ord = oly__calloc((size_t)ps.n_l + 1, sizeof *ps.ord);
    ps.uses = oly__calloc(nv, sizeof *ps.uses);
    ps.inner = oly__calloc(nv, sizeof *ps.inner);
    ps.grp_of = oly__malloc(nv * sizeof *ps.grp_of);
    ps.vslot = oly__malloc(nv * sizeof *ps.vslot);
    ps.vgin = oly__malloc(nv * sizeof *ps.vgin);
    if (!ps.kind || !ps.ord || !ps.uses || !ps.inner || !ps.grp_of || !ps.vslot || !ps.vgin)
        goto fail;
    for (size_t v = 0; v < nv; v++) ps.grp_of[v] = ps.vslot[v] = ps.vgin[v] = -1;
    for (int li = 0; li < ps.n_l; li++)
        for (int j = 0; j < ps.leq[li].n_in; j++)
            if (ps.leq[li].in[j].kind == OLY_ATOM_VAR) ps.uses[ps.leq[li].in[j].var->id]++;
    for (int k = 0; k < p->n_out; k++)
        if (rw->out[k].kind == OLY_ATOM_VAR) ps.uses[rw->out[k].var->id]++;
    if ((st = group_list(&ps, flag(&fusion_state, "OLYMPUS_FUSION"))) != OLY_OK) goto fail;
    if ((st = finish(&ps)) != OLY_OK) goto fail;
    const char *dbg = getenv("OLYMPUS_DEBUG_FUSION");
    if (dbg && *dbg && strcmp(dbg, "0") != 0) {
        oly_strbuf sb = {0};
        oly__sb_printf(&sb, "olympus: program %llu: ", (unsigned long long)p->uid);
        oly__exec_rewrite_describe(p, rw, &sb);
        if (!sb.failed && sb.data) fputs(sb.data, stderr);
        free(sb.data);
    }
    *out = rw;
    rw = NULL;
fail:
    for (int i = 0; i < ps.n_g; i++) free(ps.g[i].mem);
    free(ps.g);
    free(ps.lk);
    free(ps.lsrc);
    free(ps.kind);
    free(ps.ord);
    free(ps.uses);
    free(ps.inner);
    free(ps.grp_of);
    free(ps.vslot);
    free(ps.vgin);
    oly__exec_rewrite_free(rw);
    return st;
}

/* ---------------------------------------------------------------- description */

static const char *slot_kind_name(oly_fslot_kind k)
{
    static const char *const names[OLY_FSLOT_KIND_COUNT] = {"in", "scalar", "bcast", "temp",
                                                            "out"};
    return (unsigned)k < OLY_FSLOT_KIND_COUNT ? names[k] : "?";
}

void oly__exec_rewrite_describe(const oly_program *p, const oly_rewrite *rw, oly_strbuf *sb)
{
    oly__sb_printf(sb, "%d equations -> %d steps; %d removed as duplicates; %d fused in %d "
                   "groups\n", p->n_eqn, rw->n_eqn, rw->n_cse, rw->n_fused, rw->n_group);
    int gi = 0;
    for (int i = 0; i < rw->n_eqn; i++) {
        const oly_eqn *e = &rw->eqn[i];
        if (e->prim != &fused_row) continue;
        const oly_fused *g = e->params;
        int n_scalar = 0, n_bcast = 0;
        for (int s = 0; s < g->n_slot; s++) {
            n_scalar += g->slot[s].kind == OLY_FSLOT_SCALAR;
            n_bcast += g->slot[s].kind == OLY_FSLOT_BCAST;
        }
        oly__sb_printf(sb, "  group %d (step %d): n=%lld tile=%lld buffers=%d in=%d out=%d "
                       "scalars=%d bcasts=%d%s%s%s:", gi++, i, (long long)g->n,
                       (long long)g->tile, g->n_buf, g->n_in, g->n_out, n_scalar, n_bcast,
                       rw->kern[i]->inplace_ok ? " inplace" : "", g->chain ? " chain" : "",
                       g->regs ? " regs" : "");
        for (int k = 0; k < g->n_op; k++) {
            const oly_fop *o = &g->op[k];
            oly__sb_printf(sb, " %s#%d", o->fn ? o->eqn->prim->name : "copy",
                           (int)(o->eqn - p->eqn));
            oly__sb_puts(sb, "(");
            for (int j = 0; j < o->n_in + o->n_out; j++) {
                const oly_fslot *sl = &g->slot[g->ref_slot[o->ref + j]];
                oly__sb_printf(sb, "%s%s", j ? (j == o->n_in ? "->" : ",") : "",
                               slot_kind_name(sl->kind));
            }
            oly__sb_puts(sb, ")");
        }
        oly__sb_puts(sb, "\n");
    }
}

oly_status oly__exec_describe(oly_program *p, char **text)
{
    const oly_exe *exe;
    OLY_TRY(oly__exec_get(p, &exe));
    oly_strbuf sb = {0};
    oly__exec_rewrite_describe(p, exe->rw, &sb);
    if (sb.failed || !sb.data) {
        free(sb.data);
        return oly__error(OLY_ERR_NOMEM, "out of memory describing a program's fusion");
    }
    *text = sb.data;
    return OLY_OK;
}
