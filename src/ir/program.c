/* program.c — the builder that records a program, and the program object:
 * refcounting, accessors, atoms and effects.
 *
 * Ownership: the builder allocates vars, equation arrays and params in an arena
 * that becomes the program's on finish. Constants and subprograms are owned
 * references, params may hold references (host functions); all move to the
 * program on finish, or are dropped by oly_builder_free otherwise. */
#include "internal.h"

struct oly_builder {
    oly_arena *arena;       /* owned until finish */
    oly_var **vars;         /* owned (malloc): by id, to recognise this builder's vars */
    uint32_t n_vars, cap_vars;
    oly_var **in;           /* owned (malloc) */
    int n_in, cap_in;
    oly_var **constvar;     /* owned (malloc) */
    oly_array **constval;   /* owned (malloc) array of owned references */
    int n_const, cap_const;
    oly_eqn *eqn;           /* owned (malloc); params, subs owned through it */
    int n_eqn, cap_eqn;
    bool finished;          /* ownership moved to a program (or dropped) */
};

static atomic_uint_least64_t next_uid = 1;

/* Grows *arr (elements of size) to hold at least need; 0 or NOMEM. */
static oly_status grow(void **arr, int *cap, int need, size_t size)
{
    if (need <= *cap) return OLY_OK;
    int c = *cap ? *cap : 8;
    while (c < need) c *= 2;
    void *p = oly__realloc(*arr, (size_t)c * size);
    if (!p) return OLY_ERR_NOMEM;
    *arr = p;
    *cap = c;
    return OLY_OK;
}

oly_status oly_builder_new(oly_builder **out)
{
    if (!out) return oly__error(OLY_ERR_INVALID, "oly_builder_new: out is NULL");
    oly_builder *b = oly__calloc(1, sizeof *b);
    if (!b) return OLY_ERR_NOMEM;
    b->arena = oly__arena_new();
    if (!b->arena) {
        free(b);
        return OLY_ERR_NOMEM;
    }
    *out = b;
    return OLY_OK;
}

static void eqn_drop(oly_eqn *e)
{
    if (e->params) oly__params_release(e->prim, e->params);
    for (int j = 0; j < e->n_sub; j++) oly_program_release(e->sub[j]);
}

void oly_builder_free(oly_builder *b)
{
    if (!b) return;
    if (!b->finished) {
        for (int i = 0; i < b->n_const; i++) oly_array_release(b->constval[i]);
        for (int i = 0; i < b->n_eqn; i++) eqn_drop(&b->eqn[i]);
        oly__arena_free(b->arena);
    }
    free(b->vars);
    free(b->in);
    free(b->constvar);
    free(b->constval);
    free(b->eqn);
    free(b);
}

static oly_status new_var(oly_builder *b, const oly_aval *aval, oly_var **out)
{
    if (b->n_vars == b->cap_vars) {
        uint32_t c = b->cap_vars ? b->cap_vars * 2 : 32;
        oly_var **v = oly__realloc(b->vars, (size_t)c * sizeof *v);
        if (!v) return OLY_ERR_NOMEM;
        b->vars = v;
        b->cap_vars = c;
    }
    oly_var *v = oly__arena_alloc(b->arena, sizeof *v);
    if (!v) return OLY_ERR_NOMEM;
    v->id = b->n_vars;
    v->aval = *aval;
    b->vars[b->n_vars++] = v;
    *out = v;
    return OLY_OK;
}

static bool owns(const oly_builder *b, const oly_var *v)
{
    return v && v->id < b->n_vars && b->vars[v->id] == v;
}

/* dtype, rank and dims >= 0 (what a shape rule must get right); check_aval adds
 * the element-count check (what a user's shape can get wrong). */
static oly_status check_aval_form(const char *who, const oly_aval *a)
{
    if (!a) return oly__error(OLY_ERR_INVALID, "%s: aval is NULL", who);
    if ((unsigned)a->dtype >= OLY_DTYPE_COUNT)
        return oly__error(OLY_ERR_INVALID, "%s: invalid dtype %d", who, (int)a->dtype);
    if (a->rank < 0 || a->rank > OLY_MAX_RANK)
        return oly__error(OLY_ERR_INVALID, "%s: rank %d outside [0, %d]", who, a->rank,
                          OLY_MAX_RANK);
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] < 0)
            return oly__error(OLY_ERR_INVALID, "%s: negative dimension %lld at axis %d", who,
                              (long long)a->dims[i], i);
    return OLY_OK;
}

static oly_status check_aval(const char *who, const oly_aval *a)
{
    OLY_TRY(check_aval_form(who, a));
    return oly__dims_check(who, a->rank, a->dims);
}

static oly_status check_builder(const char *who, const oly_builder *b)
{
    if (!b) return oly__error(OLY_ERR_INVALID, "%s: builder is NULL", who);
    if (b->finished)
        return oly__error(OLY_ERR_INVALID, "%s: the builder was already finished", who);
    return OLY_OK;
}

oly_status oly_builder_add_input(oly_builder *b, const oly_aval *aval, oly_var **out)
{
    OLY_TRY(check_builder("oly_builder_add_input", b));
    OLY_TRY(check_aval("oly_builder_add_input", aval));
    OLY_TRY(grow((void **)&b->in, &b->cap_in, b->n_in + 1, sizeof *b->in));
    oly_var *v;
    OLY_TRY(new_var(b, aval, &v));
    b->in[b->n_in++] = v;
    if (out) *out = v;
    return OLY_OK;
}

oly_status oly_builder_add_const(oly_builder *b, oly_array *value, oly_var **out)
{
    OLY_TRY(check_builder("oly_builder_add_const", b));
    if (!value) return oly__error(OLY_ERR_INVALID, "oly_builder_add_const: value is NULL");
    int cap = b->cap_const;
    OLY_TRY(grow((void **)&b->constvar, &cap, b->n_const + 1, sizeof *b->constvar));
    cap = b->cap_const;
    OLY_TRY(grow((void **)&b->constval, &cap, b->n_const + 1, sizeof *b->constval));
    b->cap_const = cap;
    oly_var *v;
    OLY_TRY(new_var(b, oly_array_aval(value), &v));
    b->constvar[b->n_const] = v;
    b->constval[b->n_const++] = oly_array_retain(value);
    if (out) *out = v;
    return OLY_OK;
}

oly_atom oly_atom_var(oly_var *v)
{
    oly_atom a;
    memset(&a, 0, sizeof a);
    a.kind = OLY_ATOM_VAR;
    a.var = v;
    return a;
}

oly_atom oly_atom_lit(oly_scalar s)
{
    oly_atom a;
    memset(&a, 0, sizeof a);
    a.kind = OLY_ATOM_LIT;
    a.lit = s;
    return a;
}

const oly_aval *oly_var_aval(const oly_var *v) { return v ? &v->aval : NULL; }

oly_aval oly__atom_aval(const oly_atom *a)
{
    oly_aval r;
    memset(&r, 0, sizeof r);
    if (a->kind == OLY_ATOM_VAR) return a->var->aval;
    r.dtype = a->lit.dtype;
    r.weak = a->lit.weak;
    return r;
}

uint32_t oly__eqn_effects(const oly_prim *p, const void *params, oly_program *const *subs,
                          int n_sub)
{
    uint32_t e = p && p->effects ? p->effects(params) : 0;
    for (int i = 0; i < n_sub; i++)
        if (subs[i]) e |= subs[i]->effects;
    return e;
}

/* Checks one atom used by builder b; who/what/i name it in the message. */
static oly_status check_atom(const oly_builder *b, const oly_atom *a, const char *who,
                             const char *what, int i)
{
    if (a->kind == OLY_ATOM_VAR) {
        if (!a->var)
            return oly__error(OLY_ERR_INVALID, "%s: %s %d is a NULL variable", who, what, i);
        if (!owns(b, a->var))
            return oly__error(OLY_ERR_INVALID, "%s: %s %d is a variable from another program",
                              who, what, i);
        return OLY_OK;
    }
    if (a->kind == OLY_ATOM_LIT) {
        if ((unsigned)a->lit.dtype >= OLY_DTYPE_COUNT)
            return oly__error(OLY_ERR_INVALID, "%s: %s %d is a literal of invalid dtype %d", who,
                              what, i, (int)a->lit.dtype);
        return OLY_OK;
    }
    return oly__error(OLY_ERR_INVALID, "%s: %s %d has invalid atom kind %d", who, what, i,
                      (int)a->kind);
}

oly_status oly_builder_append(oly_builder *b, const oly_prim *p, const oly_atom *in, int n_in,
                              const void *params, oly_program *const *subs, int n_sub,
                              oly_var **outs, int max_out, int *n_out)
{
    OLY_TRY(check_builder("oly_builder_append", b));
    if (!p) return oly__error(OLY_ERR_INVALID, "oly_builder_append: primitive is NULL");
    const char *name = p->name;
    if (n_in < 0 || (n_in > 0 && !in))
        return oly__error(OLY_ERR_INVALID, "%s: %d inputs at %p", name, n_in, (const void *)in);
    if (p->n_in >= 0 && n_in != p->n_in)
        return oly__error(OLY_ERR_INVALID, "%s: expected %d input%s, got %d", name, p->n_in,
                          p->n_in == 1 ? "" : "s", n_in);
    if (n_sub < 0 || (n_sub > 0 && !subs))
        return oly__error(OLY_ERR_INVALID, "%s: %d nested programs at %p", name, n_sub,
                          (const void *)subs);
    for (int i = 0; i < n_sub; i++)
        if (!subs[i]) return oly__error(OLY_ERR_INVALID, "%s: nested program %d is NULL", name, i);
    if (p->params_size > 0 && !params)
        return oly__error(OLY_ERR_INVALID, "%s: params are required, got NULL", name);
    if (p->params_size == 0) params = NULL;
    if (max_out < 0 || (max_out > 0 && !outs))
        return oly__error(OLY_ERR_INVALID, "%s: room for %d outputs at %p", name, max_out,
                          (void *)outs);
    for (int i = 0; i < n_in; i++) OLY_TRY(check_atom(b, &in[i], name, "input", i));
    if (!p->shape)
        return oly__error(OLY_ERR_UNSUPPORTED, "%s has no shape rule", name);
    int nout = oly_prim_num_outputs(p, params, n_in);
    if (nout < 0)
        return oly__error(OLY_ERR_INVALID, "%s: cannot have %d outputs (with %d inputs)", name,
                          nout, n_in);

    oly_status s = OLY_OK;
    oly_aval *in_aval = oly__calloc((size_t)n_in + 1, sizeof *in_aval);
    oly_aval *out_aval = oly__calloc((size_t)nout + 1, sizeof *out_aval);
    void *pcopy = NULL;
    if (!in_aval || !out_aval) {
        s = OLY_ERR_NOMEM;
        goto fail;
    }
    for (int i = 0; i < n_in; i++) in_aval[i] = oly__atom_aval(&in[i]);
    oly_shape_ctx ctx = {.prim = p, .params = params, .n_in = n_in, .in = in_aval,
                         .n_sub = n_sub, .sub = subs, .n_out = nout};
    s = p->shape(&ctx, out_aval);
    if (s != OLY_OK) goto fail;
    for (int i = 0; i < nout; i++) {
        s = check_aval_form(name, &out_aval[i]);
        if (s != OLY_OK) {
            s = oly__error_prefix(OLY_ERR_INTERNAL, "shape rule output %d", i);
            goto fail;
        }
        s = oly__dims_check(name, out_aval[i].rank, out_aval[i].dims);
        if (s != OLY_OK) goto fail;
    }

    s = grow((void **)&b->eqn, &b->cap_eqn, b->n_eqn + 1, sizeof *b->eqn);
    if (s != OLY_OK) goto fail;
    oly_eqn e;
    memset(&e, 0, sizeof e);
    e.prim = p;
    e.n_in = n_in;
    e.n_out = nout;
    e.in = oly__arena_alloc(b->arena, ((size_t)n_in + 1) * sizeof *e.in);
    e.out = oly__arena_alloc(b->arena, ((size_t)nout + 1) * sizeof *e.out);
    e.sub = oly__arena_alloc(b->arena, ((size_t)n_sub + 1) * sizeof *e.sub);
    if (!e.in || !e.out || !e.sub) {
        s = OLY_ERR_NOMEM;
        goto fail;
    }
    for (int i = 0; i < nout; i++) {
        s = new_var(b, &out_aval[i], &e.out[i]);
        if (s != OLY_OK) goto fail; /* the unused vars stay in the arena: harmless */
    }
    if (n_in) memcpy(e.in, in, (size_t)n_in * sizeof *in);
    if (params) {
        s = oly__params_copy(p, b->arena, params, &pcopy);
        if (s != OLY_OK) goto fail;
    }
    e.params = pcopy;
    e.n_sub = n_sub;
    for (int i = 0; i < n_sub; i++) e.sub[i] = oly_program_retain(subs[i]);
    e.effects = oly__eqn_effects(p, e.params, e.sub, n_sub);
    b->eqn[b->n_eqn++] = e;

    for (int i = 0; i < nout && i < max_out; i++) outs[i] = e.out[i];
    if (n_out) *n_out = nout;
    free(in_aval);
    free(out_aval);
    return OLY_OK;

fail:
    free(in_aval);
    free(out_aval);
    return s;
}

oly_status oly_builder_finish(oly_builder *b, const oly_atom *outs, int n_out, oly_program **out)
{
    OLY_TRY(check_builder("oly_builder_finish", b));
    if (!out) return oly__error(OLY_ERR_INVALID, "oly_builder_finish: out is NULL");
    if (n_out < 0 || (n_out > 0 && !outs))
        return oly__error(OLY_ERR_INVALID, "oly_builder_finish: %d outputs at %p", n_out,
                          (const void *)outs);
    for (int i = 0; i < n_out; i++)
        OLY_TRY(check_atom(b, &outs[i], "oly_builder_finish", "output", i));

    oly_program *p = oly__calloc(1, sizeof *p);
    if (!p) return OLY_ERR_NOMEM;
    oly_arena *a = b->arena;
    p->in = oly__arena_alloc(a, ((size_t)b->n_in + 1) * sizeof *p->in);
    p->constvar = oly__arena_alloc(a, ((size_t)b->n_const + 1) * sizeof *p->constvar);
    p->constval = oly__arena_alloc(a, ((size_t)b->n_const + 1) * sizeof *p->constval);
    p->eqn = oly__arena_alloc(a, ((size_t)b->n_eqn + 1) * sizeof *p->eqn);
    p->out = oly__arena_alloc(a, ((size_t)n_out + 1) * sizeof *p->out);
    p->out_aval = oly__arena_alloc(a, ((size_t)n_out + 1) * sizeof *p->out_aval);
    if (!p->in || !p->constvar || !p->constval || !p->eqn || !p->out || !p->out_aval) {
        free(p); /* the arena keeps the partial allocations; the builder still owns it */
        return OLY_ERR_NOMEM;
    }
    atomic_init(&p->refcount, 1);
    atomic_init(&p->exec_slot, NULL);
    p->exec_slot_free = NULL;
    p->uid = atomic_fetch_add(&next_uid, 1);
    p->arena = a;
    p->n_vars = b->n_vars;
    p->n_in = b->n_in;
    p->n_const = b->n_const;
    p->n_eqn = b->n_eqn;
    p->n_out = n_out;
    if (b->n_in) memcpy(p->in, b->in, (size_t)b->n_in * sizeof *p->in);
    if (b->n_const) {
        memcpy(p->constvar, b->constvar, (size_t)b->n_const * sizeof *p->constvar);
        memcpy(p->constval, b->constval, (size_t)b->n_const * sizeof *p->constval);
    }
    if (b->n_eqn) memcpy(p->eqn, b->eqn, (size_t)b->n_eqn * sizeof *p->eqn);
    if (n_out) memcpy(p->out, outs, (size_t)n_out * sizeof *outs);
    for (int i = 0; i < n_out; i++) p->out_aval[i] = oly__atom_aval(&outs[i]);
    uint32_t eff = 0;
    for (int i = 0; i < p->n_eqn; i++) eff |= p->eqn[i].effects;
    p->effects = eff;
    b->finished = true; /* everything now belongs to p */
    b->arena = NULL;

    oly_status s = oly_program_verify(p);
    if (s != OLY_OK) {
        oly_program_release(p);
        return s;
    }
    *out = p;
    return OLY_OK;
}

/* ---------------------------------------------------------------- programs */

oly_program *oly_program_retain(oly_program *p)
{
    if (p) atomic_fetch_add_explicit(&p->refcount, 1, memory_order_relaxed);
    return p;
}

void oly_program_release(oly_program *p)
{
    if (!p) return;
    if (atomic_fetch_sub_explicit(&p->refcount, 1, memory_order_acq_rel) != 1) return;
    for (int i = 0; i < p->n_const; i++) oly_array_release(p->constval[i]);
    for (int i = 0; i < p->n_eqn; i++) eqn_drop(&p->eqn[i]);
    void *slot = atomic_load_explicit(&p->exec_slot, memory_order_acquire);
    if (slot && p->exec_slot_free) p->exec_slot_free(slot);
    oly__arena_free(p->arena);
    free(p);
}

void *oly__program_cache_set(oly_program *p, void *ptr, void (*dtor)(void *))
{
    void *expected = NULL;
    if (!atomic_compare_exchange_strong_explicit(&p->exec_slot, &expected, ptr,
                                                 memory_order_acq_rel, memory_order_acquire))
        return expected;
    /* Only the winner writes it; the last release reads it after the refcount's
     * acq_rel, so the write is visible there. */
    p->exec_slot_free = dtor;
    return ptr;
}

int oly_program_num_inputs(const oly_program *p) { return p ? p->n_in : 0; }
int oly_program_num_outputs(const oly_program *p) { return p ? p->n_out : 0; }
int oly_program_num_eqns(const oly_program *p) { return p ? p->n_eqn : 0; }

const oly_aval *oly_program_input_aval(const oly_program *p, int i)
{
    if (!p || i < 0 || i >= p->n_in) return NULL;
    return &p->in[i]->aval;
}

const oly_aval *oly_program_output_aval(const oly_program *p, int i)
{
    if (!p || i < 0 || i >= p->n_out) return NULL;
    if (p->out_aval) return &p->out_aval[i];
    return p->out[i].kind == OLY_ATOM_VAR ? &p->out[i].var->aval : NULL;
}

uint32_t oly_program_effects(const oly_program *p) { return p ? p->effects : 0; }

uint32_t oly_prim_effects(const oly_prim *p, const void *params, oly_program *const *subs,
                          int n_sub)
{
    return oly__eqn_effects(p, params, subs, subs ? n_sub : 0);
}

oly_status oly_program_of_eqn(const oly_prim *p, const void *params, const oly_aval *in_avals,
                              int n_in, oly_program *const *subs, int n_sub, oly_program **out)
{
    if (!p) return oly__error(OLY_ERR_INVALID, "oly_program_of_eqn: primitive is NULL");
    if (!out) return oly__error(OLY_ERR_INVALID, "oly_program_of_eqn: out is NULL");
    if (n_in < 0 || (n_in > 0 && !in_avals))
        return oly__error(OLY_ERR_INVALID, "oly_program_of_eqn: %d inputs, in_avals=%p", n_in,
                          (const void *)in_avals);
    int n_res = oly_prim_num_outputs(p, params, n_in);
    if (n_res < 0) return oly__error(OLY_ERR_INVALID, "%s: cannot take %d inputs", p->name, n_in);
    oly_builder *b = NULL;
    oly_atom *atoms = oly__calloc((size_t)n_in + 1, sizeof *atoms);
    oly_var **outs = oly__calloc((size_t)n_res + 1, sizeof *outs);
    oly_atom *out_atoms = oly__calloc((size_t)n_res + 1, sizeof *out_atoms);
    oly_status st = atoms && outs && out_atoms ? oly_builder_new(&b) : OLY_ERR_NOMEM;
    for (int i = 0; i < n_in && st == OLY_OK; i++) {
        oly_var *v;
        st = oly_builder_add_input(b, &in_avals[i], &v);
        if (st == OLY_OK) atoms[i] = oly_atom_var(v);
    }
    int got = 0;
    if (st == OLY_OK)
        st = oly_builder_append(b, p, atoms, n_in, params, subs, n_sub, outs, n_res, &got);
    if (got > n_res) got = n_res;
    for (int k = 0; st == OLY_OK && k < got; k++) out_atoms[k] = oly_atom_var(outs[k]);
    if (st == OLY_OK) st = oly_builder_finish(b, out_atoms, got, out);
    oly_builder_free(b);
    free(atoms);
    free(outs);
    free(out_atoms);
    return st;
}
