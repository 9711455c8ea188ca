/* host_function.c — a compiled program that calls back into C.
 *
 * Builds   y = sin(x); z = callback(y); out = z + x
 * where the callback is a native C function computing 2*y + 1 into its result
 * buffer, runs it on a f32[5] input, prints input and output, and exits 0 only
 * when the output matches the same computation done directly in C.
 * Uses only the public header. */
#include <olympus.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define N 5

/* The host function: results[0] = 2 * args[0] + 1 (f32). */
static oly_status two_y_plus_one(void *user, oly_callback_frame *frame)
{
    int *calls = user;
    (*calls)++;
    if (frame->n_args != 1 || frame->n_results != 1 ||
        frame->result_avals[0].dtype != OLY_FLOAT32)
        return oly_host_fail(OLY_ERR_CALLBACK, "two_y_plus_one: expected one f32 argument");
    const float *y = frame->args[0];
    float *z = frame->results[0];
    int64_t n = oly_aval_size(&frame->result_avals[0]);
    for (int64_t i = 0; i < n; i++) z[i] = 2.0f * y[i] + 1.0f;
    return OLY_OK;
}

static int fail(const char *what)
{
    fprintf(stderr, "host_function: %s failed: %s\n", what, oly_last_error());
    return 1;
}

int main(void)
{
    const oly_prim *sin_p = oly_prim_lookup("sin");
    const oly_prim *add_p = oly_prim_lookup("add");
    const oly_prim *cb_p = oly_prim_lookup("pure_callback");
    if (!sin_p || !add_p || !cb_p) {
        fprintf(stderr, "host_function: missing primitive rows (sin %p, add %p, pure_callback %p)\n",
                (const void *)sin_p, (const void *)add_p, (const void *)cb_p);
        return 1;
    }

    int rc = 1, calls = 0;
    oly_builder *b = NULL;
    oly_program *prog = NULL;
    oly_host_fn *fn = NULL;
    oly_array *x = NULL, *out = NULL;

    int64_t dims[1] = {N};
    oly_aval f32_5;
    if (oly_aval_make(OLY_FLOAT32, 1, dims, &f32_5) != OLY_OK) return fail("oly_aval_make");

    /* The program. */
    oly_var *vx, *vy, *vz, *vout;
    if (oly_builder_new(&b) != OLY_OK) return fail("oly_builder_new");
    if (oly_builder_add_input(b, &f32_5, &vx) != OLY_OK) {
        fail("add_input");
        goto done;
    }
    oly_atom ax = oly_atom_var(vx);
    if (oly_builder_append(b, sin_p, &ax, 1, NULL, NULL, 0, &vy, 1, NULL) != OLY_OK) {
        fail("append sin");
        goto done;
    }
    if (oly_host_fn_new("two_y_plus_one", two_y_plus_one, &calls, NULL, &fn) != OLY_OK) {
        fail("oly_host_fn_new");
        goto done;
    }
    oly_params_callback cb = {.callback = fn, .result_avals = &f32_5, .n_results = 1,
                              .vmap_method = OLY_VMAP_NONE};
    oly_atom ay = oly_atom_var(vy);
    if (oly_builder_append(b, cb_p, &ay, 1, &cb, NULL, 0, &vz, 1, NULL) != OLY_OK) {
        fail("append pure_callback");
        goto done;
    }
    oly_atom azx[2] = {oly_atom_var(vz), ax};
    if (oly_builder_append(b, add_p, azx, 2, NULL, NULL, 0, &vout, 1, NULL) != OLY_OK) {
        fail("append add");
        goto done;
    }
    oly_atom aout = oly_atom_var(vout);
    if (oly_builder_finish(b, &aout, 1, &prog) != OLY_OK) {
        fail("oly_builder_finish");
        goto done;
    }

    char *text = NULL;
    if (oly_program_print(prog, &text) == OLY_OK) {
        printf("program: %s\n", text);
        free(text);
    }

    /* The input, and a run. */
    const float xs[N] = {0.0f, 0.5f, -1.25f, 2.0f, 3.14159265f};
    if (oly_array_from_data(&f32_5, xs, &x) != OLY_OK) {
        fail("oly_array_from_data");
        goto done;
    }
    if (oly_program_run(prog, 0, &x, 1, &out, 1) != OLY_OK) {
        fail("oly_program_run");
        goto done;
    }

    const float *got = oly_array_data(out);
    int bad = 0;
    printf("%-12s %-12s %-12s\n", "x", "out", "expected");
    for (int i = 0; i < N; i++) {
        float want = (2.0f * sinf(xs[i]) + 1.0f) + xs[i];
        printf("%-12.6f %-12.6f %-12.6f\n", xs[i], got[i], want);
        if (fabsf(got[i] - want) > 1e-5f * (1.0f + fabsf(want))) bad++;
    }
    printf("callback calls: %d\n", calls);
    if (bad || calls != 1) {
        fprintf(stderr, "host_function: %d mismatches, %d calls\n", bad, calls);
        goto done;
    }
    printf("ok\n");
    rc = 0;

done:
    oly_array_release(out);
    oly_array_release(x);
    oly_program_release(prog);
    oly_host_fn_release(fn);
    oly_builder_free(b);
    return rc;
}
