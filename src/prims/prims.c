/* prims.c — THE primitive table: every row listed in prims.def, looked up by
 * name. The references are strong, so linking the registry links every family
 * file (a plain static link of libolympus.a finds every primitive). */
#include "internal.h"

#include <pthread.h>

/* In prims.def order (the rows are declared in internal.h). */
static const oly_prim *const declared[] = {
#define OLY_PRIM(name) &oly__prim_##name,
#include "prims/prims.def"
#undef OLY_PRIM
};

#define N_DECLARED OLY_ARRAY_LEN(declared)
#define HASH_SLOTS 512 /* power of two, > 2 * N_DECLARED */

static const oly_prim *table[N_DECLARED]; /* the defined rows, in prims.def order */
static int n_table;
static const oly_prim *slots[HASH_SLOTS]; /* open addressing on the name */
static pthread_once_t once = PTHREAD_ONCE_INIT;

static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static void build(void)
{
    _Static_assert(HASH_SLOTS > 2 * N_DECLARED, "grow HASH_SLOTS");
    for (int i = 0; i < N_DECLARED; i++) {
        const oly_prim *p = declared[i];
        if (!p || !p->name) continue;
        table[n_table++] = p;
        uint32_t h = name_hash(p->name) & (HASH_SLOTS - 1);
        while (slots[h]) h = (h + 1) & (HASH_SLOTS - 1);
        slots[h] = p;
    }
}

static void ensure(void) { pthread_once(&once, build); }

const oly_prim *oly_prim_lookup(const char *name)
{
    if (!name) return NULL;
    ensure();
    for (uint32_t h = name_hash(name) & (HASH_SLOTS - 1); slots[h]; h = (h + 1) & (HASH_SLOTS - 1))
        if (strcmp(slots[h]->name, name) == 0) return slots[h];
    return NULL;
}

const char *oly_prim_name(const oly_prim *p) { return p ? p->name : "(null)"; }

const oly_param_field *oly_prim_fields(const oly_prim *p, int *n_fields, size_t *params_size)
{
    if (n_fields) *n_fields = p ? p->n_fields : 0;
    if (params_size) *params_size = p ? p->params_size : 0;
    return p ? p->fields : NULL;
}

int oly_prim_num_outputs(const oly_prim *p, const void *params, int n_in)
{
    if (!p) return -1;
    return p->num_outputs ? p->num_outputs(params, n_in) : p->n_out;
}

void oly_prim_foreach(void (*fn)(const oly_prim *p, void *ctx), void *ctx)
{
    ensure();
    for (int i = 0; i < n_table; i++) fn(table[i], ctx);
}

const oly_prim *oly__prim_at(int i)
{
    ensure();
    return i >= 0 && i < n_table ? table[i] : NULL;
}

int oly__prim_count(void)
{
    ensure();
    return n_table;
}
