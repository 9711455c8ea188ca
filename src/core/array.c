/* array.c — immutable, C-contiguous, refcounted arrays over refcounted
 * buffers. A buffer is shared by views; its memory is either ours (64-byte
 * aligned, freed with it) or the caller's (handed back through release). */
#include "internal.h"

#define DATA_ALIGN 64

/* Checks a caller's aval (dtype, rank, dims); the error names who. */
static oly_status check_aval(const oly_aval *aval, const char *who)
{
    if (!aval) return oly__error(OLY_ERR_INVALID, "%s: aval is NULL", who);
    oly_aval tmp;
    oly_status s = oly_aval_make(aval->dtype, aval->rank, aval->dims, &tmp);
    if (s != OLY_OK) return oly__error_prefix(s, "%s", who);
    return OLY_OK;
}

/* Small arrays live in one allocation: the buffer, the array and then the
 * data (at the next 64-byte boundary). Such a buffer is marked by owner ==
 * itself with no release; it frees the block when its last reference goes, so
 * views of the embedded array keep the block alive after the array is released. */
typedef struct {
    oly_buffer b;
    oly_array a;
} block;

#define BLOCK_MAX 1024 /* largest data capacity kept inline */

static bool buffer_inline(const oly_buffer *b)
{
    return b->release == NULL && b->owner == (const void *)b;
}

static bool array_embedded(const oly_array *a)
{
    return buffer_inline(a->buf) && (uintptr_t)a == (uintptr_t)&((block *)(void *)a->buf)->a;
}

/* Data capacity for nbytes (a whole number of DATA_ALIGN blocks, at least one);
 * 0 on overflow. */
static size_t data_cap(size_t nbytes)
{
    size_t cap = (nbytes + DATA_ALIGN - 1) / DATA_ALIGN * DATA_ALIGN;
    if (cap < nbytes) return 0;
    return cap == 0 ? DATA_ALIGN : cap;
}

/* A buffer owning nbytes of aligned memory (zeroed when zero is set) from the
 * buffer pool: a big block may be one another array released. */
static oly_buffer *buffer_alloc(size_t nbytes, bool zero)
{
    size_t cap = data_cap(nbytes);
    if (cap == 0) {
        oly__error(OLY_ERR_NOMEM, "out of memory: array of %zu bytes", nbytes);
        return NULL;
    }
    oly_buffer *b = oly__malloc(sizeof *b);
    if (!b) return NULL;
    b->data = oly__bufpool_alloc(cap); /* big blocks are recycled (bufpool.c) */
    if (!b->data) {
        free(b);
        oly__error(OLY_ERR_NOMEM, "out of memory allocating an array of %zu bytes", nbytes);
        return NULL;
    }
    if (zero) memset(b->data, 0, cap);
    atomic_init(&b->refcount, 1);
    b->nbytes = nbytes;
    b->release = NULL;
    b->owner = NULL;
    b->pending = NULL;
    return b;
}

static void release_nothing(void *owner) { (void)owner; }

static void buffer_release(oly_buffer *b)
{
    if (!b) return;
    if (atomic_fetch_sub_explicit(&b->refcount, 1, memory_order_acq_rel) != 1) return;
    oly__event_release(b->pending);
    if (buffer_inline(b)) {
        free(b);
        return;
    }
    if (b->release) b->release(b->owner);
    else oly__bufpool_free(b->data, data_cap(b->nbytes));
    free(b);
}

static void array_init(oly_array *a, const oly_aval *aval, oly_buffer *buf, int device)
{
    atomic_init(&a->refcount, 1);
    a->aval = *aval;
    for (int i = aval->rank; i < OLY_MAX_RANK; i++) a->aval.dims[i] = 0;
    a->buf = buf;
    a->device = device;
    a->committed = false;
}

/* Takes ownership of buf's reference (released on failure). */
static oly_status array_make(const oly_aval *aval, oly_buffer *buf, int device, oly_array **out)
{
    oly_array *a = oly__malloc(sizeof *a);
    if (!a) {
        buffer_release(buf);
        return OLY_ERR_NOMEM;
    }
    array_init(a, aval, buf, device);
    *out = a;
    return OLY_OK;
}

/* A fresh array for a valid aval: one allocation when small. The data is
 * zeroed when zero is set, else only past nbytes (the alignment tail). */
static oly_status array_alloc(const oly_aval *aval, bool zero, oly_array **out)
{
    size_t nbytes = oly_aval_nbytes(aval);
    if (nbytes <= BLOCK_MAX) {
        size_t cap = data_cap(nbytes);
        /* malloc, not aligned_alloc (glibc's memalign costs ~600 instructions):
         * the data starts at the first DATA_ALIGN boundary after the header. */
        block *k = oly__malloc(sizeof(block) + DATA_ALIGN - 1 + cap);
        if (!k)
            return oly__error(OLY_ERR_NOMEM, "out of memory allocating an array of %zu bytes",
                              nbytes);
        oly_buffer *b = &k->b;
        uintptr_t d = ((uintptr_t)(k + 1) + DATA_ALIGN - 1) & ~(uintptr_t)(DATA_ALIGN - 1);
        b->data = (char *)k + (d - (uintptr_t)k);
        if (zero) memset(b->data, 0, cap);
        else memset((char *)b->data + nbytes, 0, cap - nbytes);
        atomic_init(&b->refcount, 1);
        b->nbytes = nbytes;
        b->release = NULL;
        b->owner = b;
        b->pending = NULL;
        array_init(&k->a, aval, b, 0);
        *out = &k->a;
        return OLY_OK;
    }
    oly_buffer *b = buffer_alloc(nbytes, zero);
    if (!b) return OLY_ERR_NOMEM;
    return array_make(aval, b, 0, out);
}

oly_status oly_array_new(const oly_aval *aval, oly_array **out)
{
    OLY_TRY(check_aval(aval, "oly_array_new"));
    if (!out) return oly__error(OLY_ERR_INVALID, "oly_array_new: out is NULL");
    return array_alloc(aval, true, out);
}

oly_status oly__array_new_uninit(const oly_aval *aval, oly_array **out);

/* Internal (the executor): an array for an aval already checked, whose data
 * (nbytes of it) the caller overwrites in full: not zeroed. */
oly_status oly__array_new_uninit(const oly_aval *aval, oly_array **out)
{
    return array_alloc(aval, false, out);
}

oly_status oly_array_from_data(const oly_aval *aval, const void *data, oly_array **out)
{
    OLY_TRY(check_aval(aval, "oly_array_from_data"));
    if (!out) return oly__error(OLY_ERR_INVALID, "oly_array_from_data: out is NULL");
    size_t nbytes = oly_aval_nbytes(aval);
    if (nbytes && !data)
        return oly__error(OLY_ERR_INVALID, "oly_array_from_data: data is NULL for %zu bytes",
                          nbytes);
    oly_buffer *b = buffer_alloc(nbytes, false);
    if (!b) return OLY_ERR_NOMEM;
    if (nbytes) memcpy(b->data, data, nbytes);
    /* Zero the alignment tail so whole-block reads are deterministic. */
    size_t cap = nbytes ? (nbytes + DATA_ALIGN - 1) / DATA_ALIGN * DATA_ALIGN : DATA_ALIGN;
    memset((char *)b->data + nbytes, 0, cap - nbytes);
    return array_make(aval, b, 0, out);
}

oly_status oly_array_wrap(const oly_aval *aval, void *data, void (*release)(void *owner),
                          void *owner, oly_array **out)
{
    OLY_TRY(check_aval(aval, "oly_array_wrap"));
    if (!out) return oly__error(OLY_ERR_INVALID, "oly_array_wrap: out is NULL");
    size_t nbytes = oly_aval_nbytes(aval);
    if (nbytes && !data)
        return oly__error(OLY_ERR_INVALID, "oly_array_wrap: data is NULL for %zu bytes", nbytes);
    size_t align = oly_dtype_is_complex(aval->dtype) ? oly_dtype_size(aval->dtype) / 2
                                                     : oly_dtype_size(aval->dtype);
    if (data && (uintptr_t)data % align != 0)
        return oly__error(OLY_ERR_INVALID,
                          "oly_array_wrap: data at %p is not aligned to %zu bytes as %s needs "
                          "(copy it with oly_array_from_data)",
                          data, align, oly_dtype_name(aval->dtype));
    /* On failure the caller still owns data: release is not called. */
    oly_buffer *b = oly__malloc(sizeof *b);
    if (!b) return OLY_ERR_NOMEM;
    oly_array *a = oly__malloc(sizeof *a);
    if (!a) {
        free(b);
        return OLY_ERR_NOMEM;
    }
    atomic_init(&b->refcount, 1);
    static char empty[DATA_ALIGN];
    b->data = data ? data : empty; /* never NULL, even for zero-size wraps */
    b->nbytes = nbytes;
    /* Caller memory is never freed here: with no release it stays the caller's. */
    b->release = release ? release : release_nothing;
    b->owner = owner;
    b->pending = NULL;
    array_init(a, aval, b, 0);
    *out = a;
    return OLY_OK;
}

oly_status oly_array_view(oly_array *a, const oly_aval *aval, oly_array **out)
{
    if (!a) return oly__error(OLY_ERR_INVALID, "oly_array_view: array is NULL");
    OLY_TRY(check_aval(aval, "oly_array_view"));
    if (!out) return oly__error(OLY_ERR_INVALID, "oly_array_view: out is NULL");
    size_t have = oly_aval_nbytes(&a->aval), want = oly_aval_nbytes(aval);
    if (have != want) {
        char sa[512], sb[512];
        oly_aval_format(sa, sizeof sa, &a->aval);
        oly_aval_format(sb, sizeof sb, aval);
        return oly__error(OLY_ERR_SHAPE,
                          "oly_array_view: cannot view %s (%zu bytes) as %s (%zu bytes): byte "
                          "sizes differ",
                          sa, have, sb, want);
    }
    atomic_fetch_add_explicit(&a->buf->refcount, 1, memory_order_relaxed);
    OLY_TRY(array_make(aval, a->buf, a->device, out));
    (*out)->committed = a->committed;
    return OLY_OK;
}

/* CPU devices share the host's memory: the array on another device is the
 * same buffer under a new header. */
oly_status oly_array_put(oly_array *a, int device, oly_array **out)
{
    if (!a || !out) return oly__error(OLY_ERR_INVALID, "oly_array_put: NULL argument");
    if (device < 0 || device >= oly_device_count())
        return oly__error(OLY_ERR_INVALID, "oly_array_put: device %d out of range [0, %d)", device,
                          oly_device_count());
    atomic_fetch_add_explicit(&a->buf->refcount, 1, memory_order_relaxed);
    OLY_TRY(array_make(&a->aval, a->buf, device, out));
    (*out)->committed = true;
    return OLY_OK;
}

bool oly_array_committed(const oly_array *a) { return a->committed; }

oly_status oly_placement(oly_array *const *arrays, int n, int *device, bool *committed)
{
    int dev = -1, first = -1;
    for (int i = 0; i < n; i++) {
        if (!arrays[i] || !arrays[i]->committed) continue;
        if (dev < 0) {
            dev = arrays[i]->device;
            first = i;
        } else if (arrays[i]->device != dev) {
            return oly__error(OLY_ERR_INVALID,
                              "incompatible devices: argument %d is committed to device %d and "
                              "argument %d to device %d",
                              first, dev, i, arrays[i]->device);
        }
    }
    *committed = dev >= 0;
    *device = dev >= 0 ? dev : 0;
    return OLY_OK;
}

oly_array *oly_array_retain(oly_array *a)
{
    if (a) atomic_fetch_add_explicit(&a->refcount, 1, memory_order_relaxed);
    return a;
}

void oly_array_release(oly_array *a)
{
    if (!a) return;
    if (atomic_fetch_sub_explicit(&a->refcount, 1, memory_order_acq_rel) != 1) return;
    if (array_embedded(a)) { /* the block goes with the buffer's last reference */
        buffer_release(a->buf);
        return;
    }
    buffer_release(a->buf);
    free(a);
}

const oly_aval *oly_array_aval(const oly_array *a) { return &a->aval; }
/* Reading an array whose producer is still queued waits for it; a failure is
 * reported by oly_array_wait, which the host language calls before reading. */
const void *oly_array_data(const oly_array *a)
{
    if (a->buf->pending) oly__event_sleep(a->buf->pending);
    return a->buf->data;
}
void *oly_array_mutable_data(oly_array *a) { return a->buf->data; }
int oly_array_device(const oly_array *a) { return a->device; }

oly_status oly_array_wait(oly_array *a)
{
    if (!a) return oly__error(OLY_ERR_INVALID, "oly_array_wait: array is NULL");
    return a->buf->pending ? oly__event_wait(a->buf->pending) : OLY_OK;
}

bool oly_array_ready(const oly_array *a)
{
    return !a->buf->pending || oly__event_done(a->buf->pending);
}

void oly__array_set_pending(oly_array *a, oly_event *e)
{
    OLY_ASSERT(!a->buf->pending);
    a->buf->pending = oly__event_retain(e);
}
