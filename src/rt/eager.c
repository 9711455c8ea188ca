/* eager.c — oly_apply: one primitive applied to concrete arrays through a
 * cached one-equation program. The cache is keyed by (primitive, params,
 * input avals incl. weak), bounded (oldest entry evicted first) and guarded by
 * one mutex. Programs are built and run outside the lock, and evicted entries
 * are freed outside it too (freeing may release a host function, which runs
 * user code). */
#include "exec/exec.h"

#include <pthread.h>

#define CACHE_CAP 1024
#define N_BUCKETS 256

typedef struct entry {
    struct entry *next;         /* borrowed: bucket chain */
    uint64_t hash;
    const oly_prim *prim;       /* borrowed: rows live for the process */
    oly_arena *arena;           /* owned: params copy and avals */
    void *params;               /* in arena; NULL when the prim has none */
    int n_in;
    oly_aval *avals;            /* in arena */
    oly_program *prog;          /* owned reference */
} entry;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static entry *buckets[N_BUCKETS];
static entry *order[CACHE_CAP]; /* FIFO ring: order[head] is the oldest */
static int head, count;
static long n_builds, n_hits;

static uint64_t mix(uint64_t h, uint64_t x)
{
    h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static bool has_params(const oly_prim *p, const void *params)
{
    return p->params_size > 0 && params != NULL;
}

static uint64_t key_hash(const oly_prim *p, const void *params, oly_array *const *in, int n_in)
{
    uint64_t h = mix(0x6f6c796d70757300ull, (uint64_t)(uintptr_t)p);
    if (has_params(p, params)) h = mix(h, oly__params_hash(p, params));
    h = mix(h, (uint64_t)n_in);
    for (int i = 0; i < n_in; i++) {
        const oly_aval *a = &in[i]->aval;
        h = mix(h, (uint64_t)a->dtype * 2 + (a->weak ? 1 : 0));
        h = mix(h, (uint64_t)a->rank);
        for (int d = 0; d < a->rank; d++) h = mix(h, (uint64_t)a->dims[d]);
    }
    return h;
}

static bool key_equal(const entry *e, uint64_t h, const oly_prim *p, const void *params,
                      oly_array *const *in, int n_in)
{
    if (e->hash != h || e->prim != p || e->n_in != n_in) return false;
    for (int i = 0; i < n_in; i++) {
        const oly_aval *a = &in[i]->aval;
        if (!oly_aval_equal(&e->avals[i], a) || e->avals[i].weak != a->weak) return false;
    }
    bool hp = has_params(p, params);
    if (hp != (e->params != NULL)) return false;
    return !hp || oly__params_equal(p, e->params, params);
}

static void entry_free(entry *e)
{
    if (!e) return;
    oly_program_release(e->prog);
    if (e->params) oly__params_release(e->prim, e->params);
    oly__arena_free(e->arena);
    free(e);
}

/* Call with the lock held. */
static entry *find(uint64_t h, const oly_prim *p, const void *params, oly_array *const *in,
                   int n_in)
{
    for (entry *e = buckets[h % N_BUCKETS]; e; e = e->next)
        if (key_equal(e, h, p, params, in, n_in)) return e;
    return NULL;
}

/* Call with the lock held. Returns the evicted entry (to free after unlocking). */
static entry *insert(entry *e)
{
    entry *old = NULL;
    if (count == CACHE_CAP) {
        old = order[head];
        head = (head + 1) % CACHE_CAP;
        count--;
        for (entry **pp = &buckets[old->hash % N_BUCKETS]; *pp; pp = &(*pp)->next) {
            if (*pp == old) {
                *pp = old->next;
                break;
            }
        }
    }
    e->next = buckets[e->hash % N_BUCKETS];
    buckets[e->hash % N_BUCKETS] = e;
    order[(head + count) % CACHE_CAP] = e;
    count++;
    return old;
}

static oly_status build(const oly_prim *p, const void *params, oly_array *const *in, int n_in,
                        oly_program **out)
{
    oly_aval small[8] = {{0}}, *av = n_in <= 8 ? small : oly__calloc((size_t)n_in, sizeof *av);
    if (!av) return OLY_ERR_NOMEM;
    for (int i = 0; i < n_in; i++) av[i] = in[i]->aval;
    oly_status st = oly_program_of_eqn(p, params, av, n_in, NULL, 0, out);
    if (av != small) free(av);
    return st;
}

static oly_status make_entry(uint64_t h, const oly_prim *p, const void *params,
                             oly_array *const *in, int n_in, oly_program *prog, entry **out)
{
    entry *e = oly__calloc(1, sizeof *e);
    if (!e) return OLY_ERR_NOMEM;
    e->hash = h;
    e->prim = p;
    e->n_in = n_in;
    e->arena = oly__arena_new();
    if (!e->arena) goto nomem;
    e->avals = oly__arena_alloc(e->arena, (size_t)(n_in > 0 ? n_in : 1) * sizeof *e->avals);
    if (!e->avals) goto nomem;
    for (int i = 0; i < n_in; i++) e->avals[i] = in[i]->aval;
    if (has_params(p, params)) {
        oly_status st = oly__params_copy(p, e->arena, params, &e->params);
        if (st != OLY_OK) {
            e->params = NULL;
            entry_free(e);
            return st;
        }
    }
    e->prog = oly_program_retain(prog);
    *out = e;
    return OLY_OK;
nomem:
    entry_free(e);
    return OLY_ERR_NOMEM;
}

oly_status oly_apply(const oly_prim *p, const void *params, oly_array *const *inputs, int n_in,
                     oly_array **outputs, int max_out, int *n_out)
{
    if (!p) return oly__error(OLY_ERR_INVALID, "oly_apply: primitive is NULL");
    if (n_in < 0 || (n_in > 0 && !inputs))
        return oly__error(OLY_ERR_INVALID, "%s: oly_apply given %d inputs and inputs=%p", p->name,
                          n_in, (const void *)inputs);
    for (int i = 0; i < n_in; i++)
        if (!inputs[i]) return oly__error(OLY_ERR_INVALID, "%s: input %d is NULL", p->name, i);
    if (p->params_size > 0 && !params)
        return oly__error(OLY_ERR_INVALID, "%s: params required, got NULL", p->name);

    uint64_t h = key_hash(p, params, inputs, n_in);
    oly_program *prog = NULL;
    pthread_mutex_lock(&lock);
    entry *e = find(h, p, params, inputs, n_in);
    if (e) {
        prog = oly_program_retain(e->prog);
        n_hits++;
    }
    pthread_mutex_unlock(&lock);

    if (!prog) {
        OLY_TRY(build(p, params, inputs, n_in, &prog));
        entry *fresh = NULL, *evicted = NULL;
        oly_status st = make_entry(h, p, params, inputs, n_in, prog, &fresh);
        if (st != OLY_OK) {
            oly_program_release(prog);
            return st;
        }
        pthread_mutex_lock(&lock);
        n_builds++;
        entry *again = find(h, p, params, inputs, n_in);
        if (again) {
            /* Another thread cached the same key meanwhile: use its program. */
            oly_program_release(prog);
            prog = oly_program_retain(again->prog);
            evicted = fresh;
        } else {
            evicted = insert(fresh);
        }
        pthread_mutex_unlock(&lock);
        entry_free(evicted);
    }

    oly_status st = OLY_OK;
    int n = oly_program_num_outputs(prog);
    if (n > max_out || (n > 0 && !outputs)) {
        st = oly__error(OLY_ERR_INVALID, "%s: has %d outputs, room given for %d", p->name, n,
                        outputs ? max_out : 0);
    } else {
        int device;
        bool committed;
        st = oly_placement(inputs, n_in, &device, &committed);
        if (st == OLY_OK) st = oly_program_run(prog, device, inputs, n_in, outputs, n);
        if (st == OLY_OK && n_out) *n_out = n;
    }
    oly_program_release(prog);
    return st;
}

void oly__apply_cache_stats(int *entries, long *builds, long *hits)
{
    pthread_mutex_lock(&lock);
    if (entries) *entries = count;
    if (builds) *builds = n_builds;
    if (hits) *hits = n_hits;
    pthread_mutex_unlock(&lock);
}

void oly__apply_cache_clear(void)
{
    pthread_mutex_lock(&lock);
    entry *list = NULL;
    for (int i = 0; i < count; i++) {
        entry *e = order[(head + i) % CACHE_CAP];
        e->next = list;
        list = e;
    }
    memset(buckets, 0, sizeof buckets);
    head = count = 0;
    pthread_mutex_unlock(&lock);
    while (list) {
        entry *next = list->next;
        entry_free(list);
        list = next;
    }
}
