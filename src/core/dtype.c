/* dtype.c — dtype sizes, names and predicates, the process-wide x64 switch,
 * and JAX's type-promotion lattice with weak types. */
#include "internal.h"

typedef struct dtype_info {
    const char *name;  /* NumPy name */
    const char *short_name;
    size_t size;
} dtype_info;

static const dtype_info infos[OLY_DTYPE_COUNT] = {
    [OLY_BOOL] = {"bool", "bool", 1},
    [OLY_INT8] = {"int8", "i8", 1},
    [OLY_INT16] = {"int16", "i16", 2},
    [OLY_INT32] = {"int32", "i32", 4},
    [OLY_INT64] = {"int64", "i64", 8},
    [OLY_UINT8] = {"uint8", "u8", 1},
    [OLY_UINT16] = {"uint16", "u16", 2},
    [OLY_UINT32] = {"uint32", "u32", 4},
    [OLY_UINT64] = {"uint64", "u64", 8},
    [OLY_FLOAT16] = {"float16", "f16", 2},
    [OLY_BFLOAT16] = {"bfloat16", "bf16", 2},
    [OLY_FLOAT32] = {"float32", "f32", 4},
    [OLY_FLOAT64] = {"float64", "f64", 8},
    [OLY_COMPLEX64] = {"complex64", "c64", 8},
    [OLY_COMPLEX128] = {"complex128", "c128", 16},
};

static bool valid(oly_dtype t) { return (unsigned)t < OLY_DTYPE_COUNT; }

size_t oly_dtype_size(oly_dtype t) { return valid(t) ? infos[t].size : 0; }

const char *oly_dtype_name(oly_dtype t) { return valid(t) ? infos[t].name : "invalid-dtype"; }

const char *oly_dtype_short_name(oly_dtype t)
{
    return valid(t) ? infos[t].short_name : "invalid-dtype";
}

oly_status oly_dtype_from_name(const char *name, oly_dtype *out)
{
    if (!name) return oly__error(OLY_ERR_INVALID, "dtype name: expected a string, got NULL");
    if (!out) return oly__error(OLY_ERR_INVALID, "dtype name: out is NULL");
    for (int t = 0; t < OLY_DTYPE_COUNT; t++) {
        if (strcmp(name, infos[t].name) == 0 || strcmp(name, infos[t].short_name) == 0) {
            *out = (oly_dtype)t;
            return OLY_OK;
        }
    }
    if (strcmp(name, "bool_") == 0) {
        *out = OLY_BOOL;
        return OLY_OK;
    }
    return oly__error(OLY_ERR_TYPE,
                      "unknown dtype name '%s' (expected e.g. 'float32', 'f32', 'int32', "
                      "'bfloat16', 'bool')",
                      name);
}

bool oly_dtype_is_bool(oly_dtype t) { return t == OLY_BOOL; }
bool oly_dtype_is_signed_int(oly_dtype t) { return t >= OLY_INT8 && t <= OLY_INT64; }
bool oly_dtype_is_unsigned_int(oly_dtype t) { return t >= OLY_UINT8 && t <= OLY_UINT64; }
bool oly_dtype_is_int(oly_dtype t) { return t >= OLY_INT8 && t <= OLY_UINT64; }
bool oly_dtype_is_float(oly_dtype t) { return t >= OLY_FLOAT16 && t <= OLY_FLOAT64; }
bool oly_dtype_is_complex(oly_dtype t) { return t == OLY_COMPLEX64 || t == OLY_COMPLEX128; }
bool oly_dtype_is_inexact(oly_dtype t) { return oly_dtype_is_float(t) || oly_dtype_is_complex(t); }

/* ---------------------------------------------------------------- x64 switch */

/* -1: not yet read from the environment; 0 off; 1 on. */
static atomic_int x64_state = -1;

void oly_set_x64(bool on) { atomic_store(&x64_state, on ? 1 : 0); }

bool oly_x64_enabled(void)
{
    int s = atomic_load(&x64_state);
    if (s < 0) {
        const char *e = getenv("OLYMPUS_ENABLE_X64");
        int v = e && (strcmp(e, "1") == 0 || strcmp(e, "true") == 0 || strcmp(e, "True") == 0 ||
                      strcmp(e, "TRUE") == 0);
        int expected = -1;
        /* Lose gracefully to a concurrent oly_set_x64. */
        atomic_compare_exchange_strong(&x64_state, &expected, v);
        s = atomic_load(&x64_state);
    }
    return s == 1;
}

oly_dtype oly_dtype_canonicalize(oly_dtype t)
{
    if (oly_x64_enabled()) return t;
    switch (t) {
    case OLY_INT64: return OLY_INT32;
    case OLY_UINT64: return OLY_UINT32;
    case OLY_FLOAT64: return OLY_FLOAT32;
    case OLY_COMPLEX128: return OLY_COMPLEX64;
    default: return t;
    }
}

oly_dtype oly_default_float(void) { return oly_x64_enabled() ? OLY_FLOAT64 : OLY_FLOAT32; }
oly_dtype oly_default_int(void) { return oly_x64_enabled() ? OLY_INT64 : OLY_INT32; }
static oly_dtype default_complex(void)
{
    return oly_x64_enabled() ? OLY_COMPLEX128 : OLY_COMPLEX64;
}

/* ---------------------------------------------------------------- promotion */

/* Lattice nodes: every dtype (same number as its enum) plus three weak nodes. */
enum { N_WEAK_INT = OLY_DTYPE_COUNT, N_WEAK_FLOAT, N_WEAK_COMPLEX, N_NODES };

typedef uint32_t nodeset;

/* Direct successors of each node. */
static const nodeset edges[N_NODES] = {
    [OLY_BOOL] = 1u << N_WEAK_INT,
    [N_WEAK_INT] = 1u << OLY_UINT8 | 1u << OLY_INT8,
    [OLY_UINT8] = 1u << OLY_UINT16 | 1u << OLY_INT16,
    [OLY_UINT16] = 1u << OLY_UINT32 | 1u << OLY_INT32,
    [OLY_UINT32] = 1u << OLY_UINT64 | 1u << OLY_INT64,
    [OLY_UINT64] = 1u << N_WEAK_FLOAT,
    [OLY_INT8] = 1u << OLY_INT16,
    [OLY_INT16] = 1u << OLY_INT32,
    [OLY_INT32] = 1u << OLY_INT64,
    [OLY_INT64] = 1u << N_WEAK_FLOAT,
    [N_WEAK_FLOAT] = 1u << OLY_BFLOAT16 | 1u << OLY_FLOAT16 | 1u << N_WEAK_COMPLEX,
    [OLY_BFLOAT16] = 1u << OLY_FLOAT32,
    [OLY_FLOAT16] = 1u << OLY_FLOAT32,
    [OLY_FLOAT32] = 1u << OLY_FLOAT64 | 1u << OLY_COMPLEX64,
    [OLY_FLOAT64] = 1u << OLY_COMPLEX128,
    [N_WEAK_COMPLEX] = 1u << OLY_COMPLEX64,
    [OLY_COMPLEX64] = 1u << OLY_COMPLEX128,
    [OLY_COMPLEX128] = 0,
};

/* The upper set of n (n itself and everything reachable). */
static nodeset upper(int n)
{
    nodeset seen = 1u << n, frontier = 1u << n;
    while (frontier) {
        nodeset next = 0;
        for (int i = 0; i < N_NODES; i++)
            if (frontier & (1u << i)) next |= edges[i];
        frontier = next & ~seen;
        seen |= next;
    }
    return seen;
}

static int node_of(oly_dtype t, bool weak)
{
    if (!weak || t == OLY_BOOL) return (int)t;
    if (oly_dtype_is_int(t)) return N_WEAK_INT;
    if (oly_dtype_is_float(t)) return N_WEAK_FLOAT;
    return N_WEAK_COMPLEX;
}

/* The least upper bound of two nodes: the common bound whose upper set holds
 * all the others. */
static int lub(int x, int y)
{
    nodeset common = upper(x) & upper(y);
    for (int i = 0; i < N_NODES; i++)
        if ((common & (1u << i)) && (upper(i) & common) == common) return i;
    OLY_ASSERT(0 && "the lattice is complete: c128 bounds everything");
    return OLY_COMPLEX128;
}

/* Follows JAX's dtypes._lattice_result_type: equal dtypes with a strong side
 * stay strong; two weak operands join their strong counterparts and stay weak;
 * otherwise the join of the nodes, weak exactly when it is a weak node. */
oly_dtype oly_dtype_promote(oly_dtype a, bool weak_a, oly_dtype b, bool weak_b, bool *weak_out)
{
    bool weak = false;
    oly_dtype r;
    if (!valid(a) || !valid(b)) {
        r = valid(a) ? a : (valid(b) ? b : OLY_FLOAT32);
    } else if (a == b && !(weak_a && weak_b)) {
        r = a;
    } else if (weak_a && weak_b) {
        r = (oly_dtype)lub((int)a, (int)b);
        weak = true;
    } else {
        int n = lub(node_of(a, weak_a), node_of(b, weak_b));
        switch (n) {
        case N_WEAK_INT: r = oly_default_int(); weak = true; break;
        case N_WEAK_FLOAT: r = oly_default_float(); weak = true; break;
        case N_WEAK_COMPLEX: r = default_complex(); weak = true; break;
        default: r = (oly_dtype)n; break;
        }
    }
    if (r == OLY_BOOL) weak = false;
    if (weak_out) *weak_out = weak;
    return oly_dtype_canonicalize(r);
}
