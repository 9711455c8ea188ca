/* alloc.c — the allocation funnel (every allocation of the library goes
 * through oly__malloc/calloc/realloc/aligned_alloc, which report OLY_ERR_NOMEM
 * and can be told to fail for tests: oly_fault_inject_alloc), the arena that
 * owns a program's IR, and the growable string used by the printer. */
#include "internal.h"

/* Fault injection: disarmed below 0; armed, it counts allocations down and
 * fails the one that finds it at 0 (every later one succeeds). One relaxed
 * load on the fast path. */
static _Atomic long inject = -1;
/* The one thread whose allocations count (its token's address), or NULL: all. */
static _Thread_local char thread_token;
static _Atomic(const char *) inject_owner = NULL;

void oly_fault_inject_alloc(long n)
{
    atomic_store(&inject_owner, NULL);
    atomic_store(&inject, n < 0 ? -1 : n);
}

void oly_fault_inject_alloc_this_thread(long n)
{
    atomic_store(&inject_owner, (const char *)&thread_token);
    atomic_store(&inject, n < 0 ? -1 : n);
}

long oly_fault_inject_left(void) { return atomic_load(&inject); }

static bool inject_fail(void)
{
    if (atomic_load_explicit(&inject, memory_order_relaxed) < 0) return false;
    const char *owner = atomic_load(&inject_owner);
    if (owner && owner != &thread_token) return false;
    long left = atomic_fetch_sub(&inject, 1);
    if (left == 0) return true;
    if (left < 0) atomic_store(&inject, -1); /* raced past the failure: disarm */
    return false;
}

bool oly__fault_injected(void) { return inject_fail(); }

void *oly__malloc(size_t n)
{
    void *p = inject_fail() ? NULL : malloc(n ? n : 1);
    if (!p) oly__error(OLY_ERR_NOMEM, "out of memory allocating %zu bytes", n);
    return p;
}

void *oly__calloc(size_t n, size_t size)
{
    void *p = inject_fail() ? NULL : calloc(n ? n : 1, size ? size : 1);
    if (!p) oly__error(OLY_ERR_NOMEM, "out of memory allocating %zu x %zu bytes", n, size);
    return p;
}

void *oly__realloc(void *p, size_t n)
{
    void *q = inject_fail() ? NULL : realloc(p, n ? n : 1);
    if (!q) oly__error(OLY_ERR_NOMEM, "out of memory reallocating %zu bytes", n);
    return q;
}

void *oly__aligned_alloc(size_t align, size_t n)
{
    size_t cap = (n + align - 1) / align * align;
    void *p = cap < n || inject_fail() ? NULL : aligned_alloc(align, cap ? cap : align);
    if (!p) oly__error(OLY_ERR_NOMEM, "out of memory allocating %zu bytes", n);
    return p;
}

char *oly__strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = oly__malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* ---------------------------------------------------------------- arena */

typedef struct chunk {
    struct chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} chunk;

struct oly_arena {
    chunk *head;
};

oly_arena *oly__arena_new(void) { return oly__calloc(1, sizeof(oly_arena)); }

void oly__arena_free(oly_arena *a)
{
    if (!a) return;
    for (chunk *c = a->head, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(a);
}

void *oly__arena_alloc(oly_arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    chunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > 4096 ? n : 4096;
        if (c && c->cap * 2 > cap && c->cap < (1u << 20)) cap = c->cap * 2;
        chunk *fresh = oly__malloc(sizeof(chunk) + cap);
        if (!fresh) return NULL;
        fresh->next = a->head;
        fresh->used = 0;
        fresh->cap = cap;
        a->head = c = fresh;
    }
    void *p = c->data + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

char *oly__arena_strdup(oly_arena *a, const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = oly__arena_alloc(a, n);
    if (d) memcpy(d, s, n);
    return d;
}

/* ---------------------------------------------------------------- strbuf */

static void sb_reserve(oly_strbuf *sb, size_t extra)
{
    if (sb->failed || sb->len + extra + 1 <= sb->cap) return;
    size_t cap = sb->cap ? sb->cap : 256;
    while (cap < sb->len + extra + 1) cap *= 2;
    char *d = oly__realloc(sb->data, cap);
    if (!d) {
        sb->failed = true;
        return;
    }
    sb->data = d;
    sb->cap = cap;
}

void oly__sb_puts(oly_strbuf *sb, const char *s)
{
    size_t n = strlen(s);
    sb_reserve(sb, n);
    if (sb->failed) return;
    memcpy(sb->data + sb->len, s, n + 1);
    sb->len += n;
}

void oly__sb_printf(oly_strbuf *sb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    sb_reserve(sb, (size_t)n);
    if (sb->failed) return;
    va_start(ap, fmt);
    vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb->len += (size_t)n;
}
