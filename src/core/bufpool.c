/* bufpool.c — data blocks for arrays and run scratch, with big ones recycled.
 *
 * A block below OLY_BUFPOOL_MIN bytes is an ordinary 64-byte-aligned heap
 * allocation. A bigger one is its own mapping (mmap, 2 MiB aligned from 2 MiB
 * up, with MADV_HUGEPAGE), and freeing it puts it in a process-wide cache
 * instead of unmapping it, so the next run that needs a block of that size
 * class gets memory whose pages are already mapped: no mmap/munmap and no page
 * faults per run in steady state (glibc maps every block above 32 MiB afresh
 * and unmaps it on free, so each run paid a fault per 4 KiB page).
 *
 * Only blocks their owner freed are cached: an array's block comes back when
 * its buffer's last reference goes, a run's scratch when the run state is
 * freed. The cache is bounded (OLYMPUS_BUFFER_POOL_BYTES, default an eighth
 * of physical memory and at most 2 GiB; 0 caches nothing): a block that would
 * overflow it evicts the least recently cached ones, or is unmapped itself
 * when it is larger than the bound; a block left in the cache for 10 s is
 * unmapped by the next allocation or release of a big block (so memory a
 * finished phase of work used goes back once work goes on). CPU devices share the host's memory, so
 * one cache serves them all. Sizes are rounded up to classes (multiples of an
 * eighth of the size's power of two: at most 12.5% slack) and a request takes
 * a cached block of exactly its class. Each handout starts the data at another
 * multiple of 64 bytes inside the mapping's first page (see COLOURS). One mutex guards the cache; it is held
 * for the list work only, never across mmap/munmap. Under ASan, cached
 * blocks are poisoned, so a use after free still reports. */
#include "internal.h"

#include <pthread.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define ALIGN 64
#define HUGE_PAGE ((size_t)2 << 20)
#define MAX_CACHED 64                  /* blocks the cache holds at most */
#define DEFAULT_CAP ((size_t)2 << 30)  /* the default bound's ceiling */
#define IDLE_NS 10000000000LL          /* 10 s: a cached block unused that long goes */

typedef struct cached {
    void *p;                    /* owned mapping of `size` bytes */
    size_t size;                /* the size class */
    uint64_t tick;              /* when it was cached: least recent is evicted first */
    uint64_t at_ns;             /* the same, in CLOCK_MONOTONIC_COARSE ns (idle trim) */
} cached;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static cached cache[MAX_CACHED]; /* under mu */
static int n_cached;             /* under mu */
static size_t cached_bytes;      /* under mu */
static uint64_t tick;            /* under mu */
static long long n_maps, n_hits; /* under mu: mappings made, requests served from the cache */
static _Atomic long long limit = -1; /* the bound; -1: not read yet */
static _Atomic long long idle_ns = IDLE_NS; /* a block cached longer is unmapped */

size_t oly__bufpool_class(size_t n)
{
    if (n < OLY_BUFPOOL_MIN) return (n + ALIGN - 1) / ALIGN * ALIGN;
    int lg = 63 - __builtin_clzll((unsigned long long)n);
    size_t step = (size_t)1 << (lg - 3);
    size_t c = (n + step - 1) / step * step;
    return c < n ? 0 : c; /* 0: overflow */
}

/* OLYMPUS_BUFFER_POOL_BYTES (a byte count, K/M/G suffixes allowed), else an
 * eighth of physical memory up to DEFAULT_CAP. */
static size_t read_limit(void)
{
    const char *e = getenv("OLYMPUS_BUFFER_POOL_BYTES");
    if (e && *e) {
        char *end;
        unsigned long long v = strtoull(e, &end, 10);
        switch (*end) {
        case 'k': case 'K': v <<= 10; end++; break;
        case 'm': case 'M': v <<= 20; end++; break;
        case 'g': case 'G': v <<= 30; end++; break;
        default: break;
        }
        if (end != e && (*end == '\0' || ((*end == 'B' || *end == 'b') && end[1] == '\0')))
            return (size_t)v;
    }
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    size_t phys = pages > 0 && psz > 0 ? (size_t)pages * (size_t)psz : 0;
    return phys / 8 < DEFAULT_CAP ? phys / 8 : DEFAULT_CAP;
}

static size_t get_limit(void)
{
    long long v = atomic_load_explicit(&limit, memory_order_relaxed);
    if (v < 0) {
        v = (long long)read_limit();
        long long expected = -1;
        if (!atomic_compare_exchange_strong(&limit, &expected, v)) v = expected;
    }
    return (size_t)v;
}

void oly__bufpool_set_limit(long long bytes)
{
    atomic_store(&limit, bytes < 0 ? -1 : bytes);
    if (bytes >= 0) oly__bufpool_trim((size_t)bytes);
}

/* A block's data starts at a varying multiple of 64 bytes inside its first
 * page (its colour): blocks that all started at the same offset modulo 4 KiB
 * (every mapping does) would make an elementwise kernel's loads and stores
 * alias in the store buffer and the same cache sets (the chain row ran ~25%
 * slower so). The mapping has a page more than its class for it. */
#define COLOURS 64
static atomic_uint colour;

static size_t page_size(void)
{
    static size_t psz;
    if (!psz) psz = (size_t)sysconf(_SC_PAGESIZE);
    return psz;
}

/* A fresh mapping of size bytes, 2 MiB aligned when that big; NULL on failure. */
static void *map_block(size_t size)
{
    size_t align = size >= HUGE_PAGE ? HUGE_PAGE : page_size();
    size += page_size(); /* room for the colour */
    size_t len = size + align;
    if (len < size) return NULL;
    char *raw = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    char *p = (char *)(((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1));
    size_t head = (size_t)(p - raw), psz = page_size();
    size_t used = (size + psz - 1) / psz * psz;
    if (head) munmap(raw, head);
    if (len - head > used) munmap(p + used, len - head - used);
#ifdef MADV_HUGEPAGE
    if (size >= HUGE_PAGE) madvise(p, used, MADV_HUGEPAGE);
#endif
    return p;
}

/* p: the mapping's start; size: its class (the colour page comes on top). */
static void unmap_block(void *p, size_t size)
{
    size_t psz = page_size();
    size += psz;
    UNPOISON(p, size); /* the range may be mapped again by anyone */
    munmap(p, (size + psz - 1) / psz * psz);
}

/* The data of mapping base for its next owner. */
static void *coloured(char *base)
{
    unsigned c = atomic_fetch_add_explicit(&colour, 1, memory_order_relaxed);
    return base + (size_t)(c * 17 % COLOURS) * ALIGN;
}

static uint64_t coarse_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Under mu: moves the blocks cached for longer than idle_ns to out (which has
 * room for every cached block) and returns how many there now are. */
static int take_idle(cached *out, int n_out, uint64_t now)
{
    uint64_t idle = (uint64_t)atomic_load_explicit(&idle_ns, memory_order_relaxed);
    for (int i = 0; i < n_cached;) {
        if (now > cache[i].at_ns && now - cache[i].at_ns > idle) { /* now was read unlocked */
            out[n_out++] = cache[i];
            cached_bytes -= cache[i].size;
            cache[i] = cache[--n_cached];
        } else {
            i++;
        }
    }
    return n_out;
}

/* Under mu, n_cached > 0: removes the least recently cached block and returns it. */
static cached take_oldest(void)
{
    int old = 0;
    for (int i = 1; i < n_cached; i++)
        if (cache[i].tick < cache[old].tick) old = i;
    cached c = cache[old];
    cached_bytes -= c.size;
    cache[old] = cache[--n_cached];
    return c;
}

void oly__bufpool_set_idle(long long ns)
{
    atomic_store(&idle_ns, ns < 0 ? IDLE_NS : ns);
}

void *oly__bufpool_alloc(size_t n)
{
    size_t size = oly__bufpool_class(n);
    if (size == 0) {
        oly__error(OLY_ERR_NOMEM, "out of memory allocating %zu bytes", n);
        return NULL;
    }
    if (size < OLY_BUFPOOL_MIN) return oly__aligned_alloc(ALIGN, size);
    if (oly__fault_injected()) {
        oly__error(OLY_ERR_NOMEM, "out of memory allocating %zu bytes", n);
        return NULL;
    }
    void *p = NULL;
    cached evicted[MAX_CACHED];
    uint64_t now = coarse_ns();
    pthread_mutex_lock(&mu);
    int n_evicted = take_idle(evicted, 0, now);
    int best = -1;
    for (int i = 0; i < n_cached; i++) /* the most recently cached block: warmest */
        if (cache[i].size == size && (best < 0 || cache[i].tick > cache[best].tick)) best = i;
    if (best >= 0) {
        p = cache[best].p;
        cached_bytes -= size;
        cache[best] = cache[--n_cached];
        n_hits++;
    } else {
        n_maps++;
    }
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < n_evicted; i++) unmap_block(evicted[i].p, evicted[i].size);
    if (p) {
        UNPOISON(p, size + page_size());
        return coloured(p);
    }
    if (!(p = map_block(size))) {
        oly__error(OLY_ERR_NOMEM, "out of memory allocating %zu bytes", n);
        return NULL;
    }
    return coloured(p);
}

void oly__bufpool_free(void *p, size_t n)
{
    if (!p) return;
    size_t size = oly__bufpool_class(n);
    if (size < OLY_BUFPOOL_MIN) {
        free(p);
        return;
    }
    p = (void *)((uintptr_t)p & ~(uintptr_t)(page_size() - 1)); /* the mapping, uncoloured */
    size_t cap = get_limit();
    if (size > cap) {
        unmap_block(p, size);
        return;
    }
    cached evicted[MAX_CACHED];
    POISON(p, size + page_size());
    uint64_t now = coarse_ns();
    pthread_mutex_lock(&mu);
    int n_evicted = take_idle(evicted, 0, now);
    while (n_cached > 0 && (n_cached == MAX_CACHED || cached_bytes + size > cap))
        evicted[n_evicted++] = take_oldest();
    cache[n_cached++] = (cached){p, size, ++tick, now};
    cached_bytes += size;
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < n_evicted; i++) unmap_block(evicted[i].p, evicted[i].size);
}

void oly__bufpool_trim(size_t keep)
{
    cached evicted[MAX_CACHED];
    int n_evicted = 0;
    pthread_mutex_lock(&mu);
    while (n_cached > 0 && cached_bytes > keep) evicted[n_evicted++] = take_oldest();
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < n_evicted; i++) unmap_block(evicted[i].p, evicted[i].size);
}

void oly__bufpool_stats(size_t *bytes, int *blocks, long long *maps, long long *hits)
{
    pthread_mutex_lock(&mu);
    if (bytes) *bytes = cached_bytes;
    if (blocks) *blocks = n_cached;
    if (maps) *maps = n_maps;
    if (hits) *hits = n_hits;
    pthread_mutex_unlock(&mu);
}
