/* native_host.c — the native host-function row: a compiled olympus program that
 * calls a C host function K times in a chain (pure_callback primitive, built
 * with the public builder API) against K raw calls of the same C work through a
 * function pointer. Built by bench/run.py against libolympus.a; uses only
 * include/olympus.h.
 *
 * Usage: native_host K REPEATS TARGET_MS
 * Prints one JSON object per case (f32[] and f32[1000]) on its own line:
 *   {"case": "f32[1000]", "k": K, "oly_ns": [...], "peer_ns": [...], "error": null}
 * with per-call nanoseconds for each repeat (after a warm-up), the two sides
 * interleaved. When the olympus side cannot run, "oly_ns" is empty and "error"
 * says why; the peer is measured anyway. */
#include <olympus.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* The work, done by both sides: out = in * 0.5 + 1 (a chain converges to 2). */
__attribute__((noinline)) static void affine_raw(const float *in, float *out, int64_t n)
{
    for (int64_t i = 0; i < n; i++) out[i] = in[i] * 0.5f + 1.0f;
}

static void (*volatile raw_fp)(const float *, float *, int64_t) = affine_raw;

static oly_status affine_host(void *user, oly_callback_frame *frame)
{
    (void)user;
    affine_raw(frame->args[0], frame->results[0], oly_aval_size(&frame->result_avals[0]));
    return OLY_OK;
}

/* The program x -> cb(cb(...cb(x))) with k host calls, or NULL with *err set. */
static oly_program *build_chain(const oly_aval *aval, int k, oly_host_fn *fn, char *err,
                                size_t errn)
{
    const oly_prim *cb_p = oly_prim_lookup("pure_callback");
    if (!cb_p) {
        snprintf(err, errn, "no pure_callback primitive row");
        return NULL;
    }
    oly_builder *b = NULL;
    oly_program *prog = NULL;
    oly_var *v;
    if (oly_builder_new(&b) != OLY_OK || oly_builder_add_input(b, aval, &v) != OLY_OK) goto fail;
    oly_params_callback params = {.callback = fn, .result_avals = aval, .n_results = 1,
                                  .vmap_method = OLY_VMAP_NONE};
    for (int i = 0; i < k; i++) {
        oly_atom a = oly_atom_var(v);
        if (oly_builder_append(b, cb_p, &a, 1, &params, NULL, 0, &v, 1, NULL) != OLY_OK) goto fail;
    }
    oly_atom out = oly_atom_var(v);
    if (oly_builder_finish(b, &out, 1, &prog) != OLY_OK) goto fail;
    oly_builder_free(b);
    return prog;
fail:
    snprintf(err, errn, "build: %s", oly_last_error());
    oly_builder_free(b);
    return NULL;
}

static int run_chain(oly_program *prog, oly_array *x, int reps)
{
    for (int r = 0; r < reps; r++) {
        oly_array *out = NULL;
        if (oly_program_run(prog, 0, &x, 1, &out, 1) != OLY_OK) return -1;
        oly_array_release(out);
    }
    return 0;
}

static float sink;

static void raw_chain(float *a, float *b, int64_t n, int k, int reps)
{
    for (int r = 0; r < reps; r++) {
        for (int i = 0; i < k; i++) {
            raw_fp(a, b, n);
            float *t = a;
            a = b;
            b = t;
        }
    }
    sink += a[0];
}

static void json_list(const double *v, int n)
{
    putchar('[');
    for (int i = 0; i < n; i++) printf("%s%.3f", i ? ", " : "", v[i]);
    putchar(']');
}

static void json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') putchar('\\');
        putchar((unsigned char)*s >= 0x20 ? *s : ' ');
    }
    putchar('"');
}

static void bench_case(int rank, int64_t n, int k, int repeats, double target_ns)
{
    char err[512] = "";
    char name[32];
    snprintf(name, sizeof name, rank ? "f32[%lld]" : "f32[]", (long long)n);
    double *oly = calloc((size_t)repeats, sizeof(double));
    double *peer = calloc((size_t)repeats, sizeof(double));
    float *a = calloc((size_t)n, sizeof(float)), *b = calloc((size_t)n, sizeof(float));
    oly_host_fn *fn = NULL;
    oly_program *prog = NULL;
    oly_array *x = NULL;
    int oly_ok = 0;

    oly_aval aval;
    int64_t dims[1] = {n};
    if (oly_aval_make(OLY_FLOAT32, rank, dims, &aval) != OLY_OK)
        snprintf(err, sizeof err, "aval: %s", oly_last_error());
    else if (oly_host_fn_new("affine", affine_host, NULL, NULL, &fn) != OLY_OK)
        snprintf(err, sizeof err, "host fn: %s", oly_last_error());
    else if ((prog = build_chain(&aval, k, fn, err, sizeof err)) != NULL) {
        for (int64_t i = 0; i < n; i++) a[i] = 0.25f;
        if (oly_array_from_data(&aval, a, &x) != OLY_OK)
            snprintf(err, sizeof err, "input: %s", oly_last_error());
        else if (run_chain(prog, x, 1) != 0) /* warm-up: compiles */
            snprintf(err, sizeof err, "run: %s", oly_last_error());
        else {
            oly_array *out = NULL;
            if (oly_program_run(prog, 0, &x, 1, &out, 1) == OLY_OK) {
                /* check: the chain of k affine steps from 0.25 */
                float want = 0.25f;
                for (int i = 0; i < k; i++) want = want * 0.5f + 1.0f;
                const float *got = oly_array_data(out);
                if (got[n - 1] != want)
                    snprintf(err, sizeof err, "wrong result: %g, want %g", got[n - 1], want);
                else
                    oly_ok = 1;
                oly_array_release(out);
            } else {
                snprintf(err, sizeof err, "run: %s", oly_last_error());
            }
        }
    }

    /* Calibrate: runs per repeat so one repeat takes about target_ns. */
    int oly_reps = 1, raw_reps = 1;
    if (oly_ok) {
        double t0 = now_ns();
        run_chain(prog, x, 3);
        double per = (now_ns() - t0) / 3;
        oly_reps = per > 0 ? (int)(target_ns / per) + 1 : 1000;
    }
    {
        raw_chain(a, b, n, k, 3);
        double t0 = now_ns();
        raw_chain(a, b, n, k, 3);
        double per = (now_ns() - t0) / 3;
        raw_reps = per > 0 ? (int)(target_ns / per) + 1 : 1000;
    }
    for (int r = 0; r < repeats; r++) {
        if (oly_ok) {
            double t0 = now_ns();
            run_chain(prog, x, oly_reps);
            oly[r] = (now_ns() - t0) / ((double)oly_reps * k);
        }
        double t0 = now_ns();
        raw_chain(a, b, n, k, raw_reps);
        peer[r] = (now_ns() - t0) / ((double)raw_reps * k);
    }

    printf("{\"case\": \"%s\", \"k\": %d, \"oly_ns\": ", name, k);
    json_list(oly, oly_ok ? repeats : 0);
    printf(", \"peer_ns\": ");
    json_list(peer, repeats);
    printf(", \"error\": ");
    if (oly_ok)
        printf("null");
    else
        json_str(err[0] ? err : "unknown failure");
    printf("}\n");
    fflush(stdout);

    oly_array_release(x);
    oly_program_release(prog);
    oly_host_fn_release(fn);
    free(a);
    free(b);
    free(oly);
    free(peer);
}

int main(int argc, char **argv)
{
    int k = argc > 1 ? atoi(argv[1]) : 256;
    int repeats = argc > 2 ? atoi(argv[2]) : 7;
    double target_ms = argc > 3 ? atof(argv[3]) : 20.0;
    if (k < 1 || repeats < 1 || target_ms <= 0) {
        fprintf(stderr, "usage: native_host K REPEATS TARGET_MS\n");
        return 2;
    }
    bench_case(0, 1, k, repeats, target_ms * 1e6);
    bench_case(1, 1000, k, repeats, target_ms * 1e6);
    return sink == 12345.0f; /* keeps the raw loop's stores alive */
}
