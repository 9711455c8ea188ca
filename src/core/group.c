/* group.c — the collective context of a group run (pmap's members): the mesh
 * (axis names, sizes, each member's device), where a member sits on it, and
 * the rendezvous its collectives meet at.
 *
 * Every member runs the same executable, so the k-th collective one member
 * executes is the k-th of every other: a rendezvous needs no key beyond the
 * group. oly__group_sync is a barrier (a mutex, a condition variable and a
 * generation count); a member may publish one pointer at it (its kernel
 * context: CPU devices share memory, so peers read each other's buffers in
 * place). A member whose run fails poisons the group: the first failure is
 * kept (message and payload, reported to the launcher), and every member
 * waiting at a barrier, or arriving later, stops with "over 'i' aborted:
 * device 2 failed: ...". A member that finishes its program while others
 * wait at a barrier (members that took different branches) stops them the
 * same way. Waits go through the blocking hooks (the GIL is released), so a
 * peer can run a Python host function meanwhile.
 *
 * Across processes. With a transport installed (the processes joined), a
 * mesh names global devices and may reach other processes' (process p's
 * device j is p * L + j). Each process holds the whole mesh but runs only its
 * own members: its barrier counts those, and every process must hold the same
 * number of members (so a leader per process exchanges equal blocks). A
 * member that fails a group spanning processes tells the other processes
 * through the transport, whose collectives then fail there. */
#include "internal.h"

#include <pthread.h>

struct oly_group {
    int n;                      /* members: prod(sizes) */
    int n_axes;
    char **names;               /* owned, n_axes */
    int *sizes;                 /* owned, n_axes */
    int *devices;               /* owned, n */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int arrived;                /* at the current barrier; under mu */
    uint64_t gen;               /* barriers completed; under mu */
    int left;                   /* members whose run finished without failing; under mu */
    int left_device;            /* the device of one of them */
    bool failed;                /* under mu */
    int failed_device;
    char failed_msg[2048];
    oly_failure root;           /* the first failure; under mu */
    const void **slot;          /* owned, n: what each member published at the barrier */
    int n_local;                /* this process's members */
    int *local;                 /* owned, n_local: their member numbers, ascending */
    int n_procs, me, per;       /* processes spanned (1: local), this one, devices per process */
    int base;                   /* global id of this process's device 0 (0: one process) */
    int *proc, *place;          /* owned, n: each member's process and place among its members */
};

/* The transport (none until one is installed) and the process layout it
 * gives: this process's index and the process count (0, 1 without one). */
static _Atomic(const oly_group_transport *) transport;

static void layout(int *me, int *procs)
{
    const oly_group_transport *t = atomic_load(&transport);
    *me = t ? t->process() : 0;
    *procs = t ? t->processes() : 1;
    if (*procs < 1) *procs = 1;
}

int oly__mesh_local_count(const int *devices, int n)
{
    int me, procs, per = oly_device_count(), c = 0;
    layout(&me, &procs);
    if (procs == 1) return n;
    for (int k = 0; k < n; k++) c += devices[k] / per == me;
    return c;
}

oly_status oly__group_new(const oly_mesh *mesh, oly_group **out)
{
    if (!mesh) return oly__error(OLY_ERR_INVALID, "group run: mesh is NULL");
    if (mesh->n_axes < 1 || mesh->n_axes > OLY_MAX_RANK)
        return oly__error(OLY_ERR_INVALID, "group run: a mesh has 1 to %d axes, got %d",
                          OLY_MAX_RANK, mesh->n_axes);
    if (!mesh->names || !mesh->sizes || !mesh->devices)
        return oly__error(OLY_ERR_INVALID, "group run: the mesh's names, sizes and devices "
                                           "must not be NULL");
    int64_t n = 1;
    for (int a = 0; a < mesh->n_axes; a++) {
        const char *nm = mesh->names[a];
        if (!nm || !*nm)
            return oly__error(OLY_ERR_INVALID, "group run: mesh axis %d has no name", a);
        for (int b = 0; b < a; b++)
            if (!strcmp(mesh->names[b], nm))
                return oly__error(OLY_ERR_INVALID, "group run: mesh axis name '%s' appears twice",
                                  nm);
        if (mesh->sizes[a] < 1)
            return oly__error(OLY_ERR_INVALID, "group run: mesh axis '%s' has size %d, expected >= 1",
                              nm, mesh->sizes[a]);
        n *= mesh->sizes[a];
        if (n > OLY_GROUP_MAX)
            return oly__error(OLY_ERR_INVALID, "group run: a mesh has at most %d members",
                              OLY_GROUP_MAX);
    }
    int me, procs, per = oly_device_count();
    layout(&me, &procs);
    for (int k = 0; k < n; k++)
        if (mesh->devices[k] < 0 || mesh->devices[k] >= per * procs)
            return oly__error(OLY_ERR_INVALID,
                              "group run: member %d's device %d is out of range [0, %d)", k,
                              mesh->devices[k], per * procs);
    /* members per process: every process the same number, or none crossed */
    int counts[64], *cnt = procs <= 64 ? counts : oly__calloc((size_t)procs, sizeof *cnt);
    if (!cnt) return OLY_ERR_NOMEM;
    memset(cnt, 0, (size_t)procs * sizeof *cnt);
    for (int k = 0; k < n; k++) cnt[mesh->devices[k] / per]++;
    bool spans = cnt[me] != n;
    for (int p = 0; spans && p < procs; p++)
        if (cnt[p] != cnt[me]) {
            oly__error(OLY_ERR_INVALID,
                       "group run: a mesh across processes must give every process the same "
                       "number of members; process %d has %d, process %d has %d (process p's "
                       "devices are %d*p .. %d*p+%d)",
                       me, cnt[me], p, cnt[p], per, per, per - 1);
            if (cnt != counts) free(cnt);
            return OLY_ERR_INVALID;
        }
    if (cnt != counts) free(cnt);
    oly_group *g = oly__calloc(1, sizeof *g);
    if (!g) return OLY_ERR_NOMEM;
    g->n = (int)n;
    g->n_axes = mesh->n_axes;
    g->names = oly__calloc((size_t)mesh->n_axes, sizeof *g->names);
    g->sizes = oly__calloc((size_t)mesh->n_axes, sizeof *g->sizes);
    g->devices = oly__calloc((size_t)n, sizeof *g->devices);
    g->slot = oly__calloc((size_t)n, sizeof *g->slot);
    g->local = oly__calloc((size_t)n, sizeof *g->local);
    g->proc = oly__calloc((size_t)n, sizeof *g->proc);
    g->place = oly__calloc((size_t)n, sizeof *g->place);
    bool ok = g->names && g->sizes && g->devices && g->slot && g->local && g->proc && g->place;
    for (int a = 0; ok && a < mesh->n_axes; a++) {
        ok = (g->names[a] = oly__strdup(mesh->names[a])) != NULL;
        g->sizes[a] = mesh->sizes[a];
    }
    if (!ok) {
        g->n_axes = g->names ? g->n_axes : 0;
        oly__group_free(g);
        return OLY_ERR_NOMEM;
    }
    memcpy(g->devices, mesh->devices, (size_t)n * sizeof *g->devices);
    g->n_procs = spans ? procs : 1;
    g->me = spans ? me : 0;
    g->per = per;
    g->base = procs > 1 ? me * per : 0; /* global ids once joined, spanning or not */
    for (int k = 0; k < n; k++) {
        int p = spans ? g->devices[k] / per : 0, c = 0;
        for (int j = 0; j < k; j++) c += g->proc[j] == p;
        g->proc[k] = p;
        g->place[k] = c;
        if (p == g->me) g->local[g->n_local++] = k;
    }
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    *out = g;
    return OLY_OK;
}

void oly__group_free(oly_group *g)
{
    if (!g) return;
    if (g->names) {
        for (int a = 0; a < g->n_axes; a++) free(g->names[a]);
        pthread_mutex_destroy(&g->mu);
        pthread_cond_destroy(&g->cv);
    }
    oly__failure_clear(&g->root);
    free(g->names);
    free(g->sizes);
    free(g->devices);
    free(g->slot);
    free(g->local);
    free(g->proc);
    free(g->place);
    free(g);
}

int oly__group_size(const oly_group *g) { return g->n; }
int oly__group_device(const oly_group *g, int member)
{
    return g->devices[member] - g->base;
}
int oly__group_local_size(const oly_group *g) { return g->n_local; }
int oly__group_local_member(const oly_group *g, int i) { return g->local[i]; }
int oly__group_processes(const oly_group *g) { return g->n_procs; }
int oly__group_process_of(const oly_group *g, int member) { return g->proc[member]; }
int oly__group_process_place(const oly_group *g, int member) { return g->place[member]; }

int oly__group_coords(const oly_group *g, int member, const char *const **names, int64_t *coords)
{
    for (int a = g->n_axes - 1, rest = member; a >= 0; a--) { /* row-major: the last axis fastest */
        coords[a] = rest % g->sizes[a];
        rest /= g->sizes[a];
    }
    *names = (const char *const *)g->names;
    return g->n_axes;
}

bool oly__group_axes(const oly_group *g, int member, int n_names, const char *const *names,
                     const int *lens, oly_group_axes *out)
{
    if (n_names < 1 || n_names > OLY_MAX_RANK) return false;
    out->n = n_names;
    out->size = 1;
    out->index = 0;
    for (int i = 0; i < n_names; i++) {
        int a = 0;
        while (a < g->n_axes &&
               !((int)strlen(g->names[a]) == lens[i] && !memcmp(g->names[a], names[i], (size_t)lens[i])))
            a++;
        if (a == g->n_axes) return false;
        out->axis[i] = a;
        out->size *= g->sizes[a];
    }
    /* member's coordinate on axis a: (member / stride(a)) % sizes[a] */
    for (int i = 0; i < n_names; i++) {
        int a = out->axis[i], stride = 1;
        for (int b = a + 1; b < g->n_axes; b++) stride *= g->sizes[b];
        out->stride[i] = stride;
        out->index = out->index * g->sizes[a] + (member / stride) % g->sizes[a];
    }
    return true;
}

int oly__group_peer(const oly_group *g, int member, const oly_group_axes *ax, int j)
{
    int m = member;
    for (int i = ax->n - 1; i >= 0; i--) { /* the last name fastest */
        int a = ax->axis[i], size = g->sizes[a], s = ax->stride[i];
        m += ((j % size) - (member / s) % size) * s;
        j /= size;
    }
    return m;
}

int oly__group_index(const oly_group *g, const oly_group_axes *ax, int member)
{
    int index = 0;
    for (int i = 0; i < ax->n; i++) {
        int size = g->sizes[ax->axis[i]];
        index = index * size + (member / ax->stride[i]) % size;
    }
    return index;
}

int oly__group_reach(const oly_group *g, const oly_group_axes *ax)
{
    if (g->n_procs == 1) return 0;
    if (ax->size == g->n) return 1;
    /* a subgroup is connected by steps along its axes: it stays in one
     * process when every step does */
    for (int k = 0; k < g->n; k++)
        for (int i = 0; i < ax->n; i++) {
            int size = g->sizes[ax->axis[i]], s = ax->stride[i], c = (k / s) % size;
            int next = k + (((c + 1) % size) - c) * s;
            if (g->proc[next] != g->proc[k]) return 2;
        }
    return 0;
}

const void *oly__group_slot(const oly_group *g, int member) { return g->slot[member]; }

/* The error of a member that cannot complete the barrier (mu held). */
static oly_status broken(oly_group *g, const char *what)
{
    if (g->failed)
        return oly__error(OLY_ERR_INVALID, "%s aborted: device %d failed: %s", what,
                          g->failed_device, g->failed_msg);
    return oly__error(OLY_ERR_INVALID,
                      "%s aborted: device %d finished its program without reaching this "
                      "collective (members took different branches?)",
                      what, g->left_device);
}

oly_status oly__group_sync(oly_group *g, int member, const void *publish, const char *what)
{
    pthread_mutex_lock(&g->mu);
    if (g->failed || g->left) {
        oly_status st = broken(g, what);
        pthread_mutex_unlock(&g->mu);
        return st;
    }
    if (publish) g->slot[member] = publish;
    uint64_t gen = g->gen;
    if (++g->arrived == g->n_local) {
        g->arrived = 0;
        g->gen++;
        pthread_cond_broadcast(&g->cv);
        pthread_mutex_unlock(&g->mu);
        return OLY_OK;
    }
    bool entered = false;
    void *token = NULL;
    oly_status st = OLY_OK;
    for (;;) {
        if (g->gen != gen) break;
        if (g->failed || g->left) {
            st = broken(g, what);
            break;
        }
        if (!entered) { /* release the GIL (say) once, with mu dropped */
            pthread_mutex_unlock(&g->mu);
            token = oly__blocking_enter(&entered);
            entered = true;
            pthread_mutex_lock(&g->mu);
            continue;
        }
        pthread_cond_wait(&g->cv, &g->mu);
    }
    pthread_mutex_unlock(&g->mu);
    oly__blocking_leave(entered, token);
    return st;
}

void oly__group_fail(oly_group *g, int member, oly_status st)
{
    oly_failure mine = {0};
    oly__failure_keep(&mine, st);
    pthread_mutex_lock(&g->mu);
    if (!g->failed) {
        g->failed = true;
        g->failed_device = g->devices[member];
        snprintf(g->failed_msg, sizeof g->failed_msg, "%s", mine.msg);
        g->root = mine;
        mine = (oly_failure){0};
    }
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    const oly_group_transport *t = atomic_load(&transport);
    if (g->n_procs > 1 && t) /* the other processes' members stop too */
        t->fail(g->failed_msg); /* frozen once failed is set */
    oly__failure_clear(&mine); /* a peer's abort: the root failure is reported */
}

void oly__group_leave(oly_group *g, int member)
{
    pthread_mutex_lock(&g->mu);
    if (!g->left++) g->left_device = g->devices[member];
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

oly_status oly__group_report(oly_group *g)
{
    pthread_mutex_lock(&g->mu);
    bool failed = g->failed;
    pthread_mutex_unlock(&g->mu);
    return failed ? oly__failure_report(&g->root) : OLY_OK;
}

void oly__group_set_transport(const oly_group_transport *t) { atomic_store(&transport, t); }
const oly_group_transport *oly__group_transport(void) { return atomic_load(&transport); }
