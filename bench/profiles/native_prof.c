/* native_prof.c — a callgrind driver for the native host-function row: builds
 * bench/native_host.c's chain (K pure_callback equations calling a C host
 * function on f32[]) and runs it RUNS times. Profile with
 *   valgrind --tool=callgrind --toggle-collect=oly_program_run native_prof 256 100
 * and divide the instruction counts by K*RUNS for a per-host-call figure.
 * Build: gcc -O2 -Iinclude bench/profiles/native_prof.c BUILD/libolympus.a -lopenblas -lm -lpthread */
#include <olympus.h>
#include <stdio.h>
#include <stdlib.h>

static oly_status affine_host(void *user, oly_callback_frame *frame)
{
    (void)user;
    const float *in = frame->args[0];
    float *out = frame->results[0];
    int64_t n = oly_aval_size(&frame->result_avals[0]);
    for (int64_t i = 0; i < n; i++) out[i] = in[i] * 0.5f + 1.0f;
    return OLY_OK;
}

int main(int argc, char **argv)
{
    int k = argc > 1 ? atoi(argv[1]) : 256, runs = argc > 2 ? atoi(argv[2]) : 100;
    const oly_prim *cb = oly_prim_lookup("pure_callback");
    oly_aval aval;
    oly_host_fn *fn;
    oly_builder *b;
    oly_var *v;
    oly_program *prog;
    oly_array *x, *out;
    float x0 = 0.25f;
    if (!cb || oly_aval_make(OLY_FLOAT32, 0, NULL, &aval) != OLY_OK ||
        oly_host_fn_new("affine", affine_host, NULL, NULL, &fn) != OLY_OK ||
        oly_builder_new(&b) != OLY_OK || oly_builder_add_input(b, &aval, &v) != OLY_OK)
        return 1;
    oly_params_callback params = {.callback = fn, .result_avals = &aval, .n_results = 1,
                                  .vmap_method = OLY_VMAP_NONE};
    for (int i = 0; i < k; i++) {
        oly_atom a = oly_atom_var(v);
        if (oly_builder_append(b, cb, &a, 1, &params, NULL, 0, &v, 1, NULL) != OLY_OK) return 1;
    }
    oly_atom o = oly_atom_var(v);
    if (oly_builder_finish(b, &o, 1, &prog) != OLY_OK) return 1;
    oly_builder_free(b);
    if (oly_array_from_data(&aval, &x0, &x) != OLY_OK) return 1;
    for (int r = 0; r < runs; r++) {
        if (oly_program_run(prog, 0, &x, 1, &out, 1) != OLY_OK) {
            fprintf(stderr, "run: %s\n", oly_last_error());
            return 1;
        }
        if (r + 1 == runs) printf("%g\n", *(const float *)oly_array_data(out));
        oly_array_release(out);
    }
    oly_array_release(x);
    oly_program_release(prog);
    oly_host_fn_release(fn);
    return 0;
}
