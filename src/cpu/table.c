/* table.c — THE CPU kernel table: the kernel entry of every row of prims.def,
 * indexed by oly_prim_id, and the lookup the executor asks for an equation's
 * kernel (oly__cpu_kernel). Rows defined outside prims.def (tests, embedders)
 * bring their kernels with oly__cpu_register. The references are strong, so
 * a static link of libolympus.a brings every kernel family in, and a row in
 * prims.def without an entry does not link. */
#include "cpu/cpu.h"

#include <pthread.h>

/* In prims.def order: rows[i] runs with kernels[i]. */
static const oly_prim *const rows[OLY_PRIM_ID_COUNT] = {
#define OLY_PRIM(name) [OLY_PRIM_ID_##name] = &oly__prim_##name,
#include "prims/prims.def"
#undef OLY_PRIM
};

static const oly_cpu_kernel *const kernels[OLY_PRIM_ID_COUNT] = {
#define OLY_PRIM(name) [OLY_PRIM_ID_##name] = &oly__cpu_##name,
#include "prims/prims.def"
#undef OLY_PRIM
};

#define HASH_SLOTS 512 /* power of two, > 2 * OLY_PRIM_ID_COUNT */
#define MAX_REGISTERED 64

static short slots[HASH_SLOTS]; /* open addressing on the row's address: id + 1, 0 empty */
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* Rows registered at run time; guarded by reg_lock (compile-time lookups only). */
typedef struct registered {
    const oly_prim *row;          /* borrowed: lives as long as the process uses it */
    const oly_cpu_kernel *kernel; /* borrowed, likewise */
} registered;
static registered reg[MAX_REGISTERED];
static int n_reg;
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;

static uint32_t ptr_hash(const oly_prim *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (uint32_t)x & (HASH_SLOTS - 1);
}

static void build(void)
{
    _Static_assert(HASH_SLOTS > 2 * OLY_PRIM_ID_COUNT, "grow HASH_SLOTS");
    for (int i = 0; i < OLY_PRIM_ID_COUNT; i++) {
        uint32_t h = ptr_hash(rows[i]);
        while (slots[h]) h = (h + 1) & (HASH_SLOTS - 1);
        slots[h] = (short)(i + 1);
    }
}

int oly__prim_id(const oly_prim *p)
{
    if (!p) return -1;
    pthread_once(&once, build);
    for (uint32_t h = ptr_hash(p); slots[h]; h = (h + 1) & (HASH_SLOTS - 1))
        if (rows[slots[h] - 1] == p) return slots[h] - 1;
    return -1;
}

const oly_cpu_kernel *oly__cpu_kernel_at(int id)
{
    return id >= 0 && id < OLY_PRIM_ID_COUNT ? kernels[id] : NULL;
}

const oly_cpu_kernel *oly__cpu_kernel(const oly_prim *p)
{
    int id = oly__prim_id(p);
    if (id >= 0) return kernels[id]->fn ? kernels[id] : NULL;
    const oly_cpu_kernel *k = NULL;
    pthread_mutex_lock(&reg_lock);
    for (int i = 0; i < n_reg; i++)
        if (reg[i].row == p) k = reg[i].kernel;
    pthread_mutex_unlock(&reg_lock);
    return k && k->fn ? k : NULL;
}

oly_status oly__cpu_register(const oly_prim *p, const oly_cpu_kernel *k)
{
    if (!p || !k) return oly__error(OLY_ERR_INVALID, "oly__cpu_register: row or kernel is NULL");
    if (oly__prim_id(p) >= 0)
        return oly__error(OLY_ERR_INVALID, "oly__cpu_register: %s is a prims.def row; its "
                          "kernel is in src/cpu's table", p->name);
    oly_status st = OLY_OK;
    pthread_mutex_lock(&reg_lock);
    int i = 0;
    while (i < n_reg && reg[i].row != p) i++;
    if (i < n_reg) reg[i].kernel = k; /* a row registered again gets the new kernel */
    else if (n_reg < MAX_REGISTERED) reg[n_reg++] = (registered){p, k};
    else st = OLY_ERR_INVALID;
    pthread_mutex_unlock(&reg_lock);
    if (st != OLY_OK)
        return oly__error(st, "oly__cpu_register: %s: table full (%d rows)", p->name,
                          MAX_REGISTERED);
    return OLY_OK;
}
