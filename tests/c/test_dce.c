/* test_dce.c — dead-code elimination on the test rows of test_ir.c. */
#include "test.h"
#include "testutil.h"

/* Defined in test_ir.c. */
extern const oly_prim t_ir_sin, t_ir_mul, t_ir_add, t_ir_split, t_ir_effect, t_ir_call;

typedef struct t_effect_params { bool ordered; } t_effect_params;

static oly_var *app(oly_builder *b, const oly_prim *p, oly_var *x, oly_var *y)
{
    oly_atom in[2] = {oly_atom_var(x), oly_atom_var(y ? y : x)};
    oly_var *out = NULL;
    CHECK_OK(oly_builder_append(b, p, in, p->n_in, NULL, NULL, 0, &out, 1, NULL));
    return out;
}

static void effect(oly_builder *b, oly_var *x)
{
    t_effect_params ep = {false};
    oly_atom in = oly_atom_var(x);
    CHECK_OK(oly_builder_append(b, &t_ir_effect, &in, 1, &ep, NULL, 0, NULL, 0, NULL));
}

static oly_program *finish(oly_builder *b, oly_var *v)
{
    oly_atom o = oly_atom_var(v);
    oly_program *p = NULL;
    CHECK_OK(oly_builder_finish(b, &o, 1, &p));
    oly_builder_free(b);
    return p;
}

static oly_builder *start(oly_var **x)
{
    oly_builder *b = NULL;
    CHECK_OK(oly_builder_new(&b));
    oly_aval s = tu_aval(OLY_FLOAT32, 1, (const int64_t[]){4});
    CHECK_OK(oly_builder_add_input(b, &s, x));
    return b;
}

/* DCEs p, checks the result verifies and prints as want; returns it. */
static oly_program *dce_check(oly_program *p, const char *want)
{
    oly_program *q = NULL;
    CHECK_OK(oly_program_dce(p, &q));
    if (!q) return NULL;
    CHECK_OK(oly_program_verify(q));
    char *text = NULL;
    CHECK_OK(oly_program_print(q, &text));
    CHECK_STREQ(text, want);
    free(text);
    return q;
}

TEST(dce_drops_unused_keeps_effects)
{
    oly_var *x;
    oly_builder *b = start(&x);
    oly_var *dead = app(b, &t_ir_sin, x, NULL);  /* unused: dropped */
    oly_var *a = app(b, &t_ir_add, x, x);        /* feeds only the effect: kept */
    effect(b, a);
    oly_var *m = app(b, &t_ir_mul, x, x);
    (void)dead;
    oly_program *p = finish(b, m);
    oly_program *q = dce_check(p, "{ lambda ; a:f32[4]. let\n"
                                  "    b:f32[4] = t_add a a\n"
                                  "    t_effect[ordered=False] b\n"
                                  "    c:f32[4] = t_mul a a\n"
                                  "  in (c,) }");
    CHECK(q != p);
    CHECK_EQ(oly_program_effects(q), OLY_EFFECT_IO);
    CHECK_EQ(oly_program_num_inputs(q), 1);
    oly_program_release(q);
    oly_program_release(p);
}

TEST(dce_removes_chains_transitively)
{
    oly_var *x;
    oly_builder *b = start(&x);
    oly_var *c1 = app(b, &t_ir_sin, x, NULL);
    oly_var *c2 = app(b, &t_ir_sin, c1, NULL);
    oly_var *c3 = app(b, &t_ir_mul, c2, c1);
    (void)c3; /* the whole chain c1..c3 is dead */
    /* a two-output equation with only its second output used stays */
    oly_var *two[2];
    oly_atom in = oly_atom_var(x);
    CHECK_OK(oly_builder_append(b, &t_ir_split, &in, 1, NULL, NULL, 0, two, 2, NULL));
    oly_program *p = finish(b, two[1]);
    oly_program *q = dce_check(p, "{ lambda ; a:f32[4]. let\n"
                                  "    b:f32[4] c:i32[4] = t_split a\n"
                                  "  in (c,) }");
    oly_program_release(q);
    oly_program_release(p);
}

TEST(dce_unchanged_returns_same_program)
{
    oly_var *x;
    oly_builder *b = start(&x);
    oly_var *s = app(b, &t_ir_sin, x, NULL);
    effect(b, x);
    oly_program *p = finish(b, s);
    oly_program *q = NULL;
    CHECK_OK(oly_program_dce(p, &q));
    CHECK(q == p);
    CHECK_EQ(atomic_load(&p->refcount), 2);
    oly_program_release(q);
    oly_program_release(p);
}

TEST(dce_literal_and_input_outputs)
{
    oly_var *x;
    oly_builder *b = start(&x);
    app(b, &t_ir_sin, x, NULL);
    oly_scalar one = {.dtype = OLY_INT32, .v.i = 1};
    oly_atom outs[2] = {oly_atom_lit(one), oly_atom_var(x)};
    oly_program *p = NULL;
    CHECK_OK(oly_builder_finish(b, outs, 2, &p));
    oly_builder_free(b);
    oly_program *q = dce_check(p, "{ lambda ; a:f32[4]. let  in (1:i32[], a) }");
    oly_program_release(q);
    oly_program_release(p);
}

/* Nested programs are cleaned; an effectful nested program keeps its caller. */
TEST(dce_nested)
{
    /* inner: { lambda ; a. let b = sin a; c = mul a a (dead) in (b,) } */
    oly_var *x;
    oly_builder *ib = start(&x);
    oly_var *s = app(ib, &t_ir_sin, x, NULL);
    app(ib, &t_ir_mul, x, x);
    oly_program *inner = finish(ib, s);

    /* effectful inner: { lambda ; a. let effect a in (a,) } */
    oly_var *y;
    oly_builder *eb = start(&y);
    effect(eb, y);
    oly_program *einner = finish(eb, y);

    oly_var *a;
    oly_builder *b = start(&a);
    oly_params_call cp = {.name = "f", .n_out = 1};
    oly_atom in = oly_atom_var(a);
    oly_var *r = NULL, *unused = NULL;
    CHECK_OK(oly_builder_append(b, &t_ir_call, &in, 1, &cp, &inner, 1, &r, 1, NULL));
    oly_params_call ep = {.name = "g", .n_out = 1};
    CHECK_OK(oly_builder_append(b, &t_ir_call, &in, 1, &ep, &einner, 1, &unused, 1, NULL));
    oly_program *p = finish(b, r);
    oly_program_release(inner);
    oly_program_release(einner);
    CHECK_EQ(oly_program_effects(p), OLY_EFFECT_IO);

    oly_program *q = dce_check(p, "{ lambda ; a:f32[4]. let\n"
                                  "    b:f32[4] = t_call[\n"
                                  "      name=f\n"
                                  "      jaxpr={ lambda ; c:f32[4]. let\n"
                                  "          d:f32[4] = t_sin c\n"
                                  "        in (d,) }\n"
                                  "    ] a\n"
                                  "    e:f32[4] = t_call[\n"
                                  "      name=g\n"
                                  "      jaxpr={ lambda ; f:f32[4]. let\n"
                                  "          t_effect[ordered=False] f\n"
                                  "        in (f,) }\n"
                                  "    ] a\n"
                                  "  in (b,) }");
    /* the effectful nested program was unchanged: shared, not copied */
    CHECK(q && q->eqn[1].sub[0] == p->eqn[1].sub[0]);
    CHECK(q && q->eqn[0].sub[0] != p->eqn[0].sub[0]);
    oly_program_release(q);
    oly_program_release(p);
}

/* A dead equation holding a nested program disappears with it. */
TEST(dce_drops_dead_call)
{
    oly_var *x;
    oly_builder *ib = start(&x);
    oly_program *inner = finish(ib, app(ib, &t_ir_sin, x, NULL));
    oly_var *a;
    oly_builder *b = start(&a);
    oly_params_call cp = {.name = "f", .n_out = 1};
    oly_atom in = oly_atom_var(a);
    oly_var *r = NULL;
    CHECK_OK(oly_builder_append(b, &t_ir_call, &in, 1, &cp, &inner, 1, &r, 1, NULL));
    oly_program *p = finish(b, a);
    oly_program *q = dce_check(p, "{ lambda ; a:f32[4]. let  in (a,) }");
    oly_program_release(q);
    oly_program_release(p);
    CHECK_EQ(atomic_load(&inner->refcount), 1);
    oly_program_release(inner);
}

TEST(dce_keeps_constants)
{
    oly_builder *b = NULL;
    CHECK_OK(oly_builder_new(&b));
    oly_array *c = tu_scalar(OLY_FLOAT32, 2.0);
    oly_var *cv, *x;
    CHECK_OK(oly_builder_add_const(b, c, &cv));
    oly_aval s = tu_aval(OLY_FLOAT32, 0, NULL);
    CHECK_OK(oly_builder_add_input(b, &s, &x));
    app(b, &t_ir_sin, cv, NULL);
    oly_var *m = app(b, &t_ir_mul, x, cv);
    oly_program *p = finish(b, m);
    oly_program *q = dce_check(p, "{ lambda a:f32[]; b:f32[]. let\n"
                                  "    c:f32[] = t_mul b a\n"
                                  "  in (c,) }");
    CHECK(q && q->constval[0] == c);
    oly_program_release(q);
    oly_program_release(p);
    oly_array_release(c);
    CHECK_ERR(oly_program_dce(NULL, &q), OLY_ERR_INVALID, "program is NULL");
}

/* The seeds' rule: an unused pure_callback is elided; io_callback and
 * debug_callback are kept even when nothing uses them. */
static oly_status host_noop(void *user, oly_callback_frame *frame) { return OLY_OK; }

TEST(dce_callbacks)
{
    oly_host_fn *fn;
    CHECK_OK(oly_host_fn_new("f_host", host_noop, NULL, NULL, &fn));
    oly_var *x;
    oly_builder *b = start(&x);
    oly_aval ra = tu_aval(OLY_FLOAT32, 1, (const int64_t[]){4});
    oly_params_callback pc = {.callback = fn, .result_avals = &ra, .n_results = 1,
                              .vmap_method = OLY_VMAP_SEQUENTIAL};
    oly_atom in = oly_atom_var(x);
    oly_var *r = NULL;
    CHECK_OK(oly_builder_append(b, &oly__prim_pure_callback, &in, 1, &pc, NULL, 0, &r, 1, NULL));
    oly_params_callback io = {.callback = fn, .result_avals = &ra, .n_results = 1,
                              .ordered = true};
    CHECK_OK(oly_builder_append(b, &oly__prim_io_callback, &in, 1, &io, NULL, 0, &r, 1, NULL));
    oly_params_callback dbg = {.callback = fn};
    CHECK_OK(oly_builder_append(b, &oly__prim_debug_callback, &in, 1, &dbg, NULL, 0, NULL, 0,
                                NULL));
    oly_program *p = finish(b, x);
    oly_host_fn_release(fn); /* the equations hold it */
    oly_program *q = dce_check(p, "{ lambda ; a:f32[4]. let\n"
                                  "    b:f32[4] = io_callback[callback=f_host "
                                  "result_avals=(f32[4],) ordered=True] a\n"
                                  "    debug_callback[callback=f_host ordered=False] a\n"
                                  "  in (a,) }");
    CHECK_EQ(oly_program_effects(q), OLY_EFFECT_ORDERED_IO | OLY_EFFECT_DEBUG);
    oly_program_release(q);
    oly_program_release(p);
}
