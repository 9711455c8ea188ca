/* test_params.c — the generic params code over a test row whose params
 * struct has one field of every kind (plus a hidden one). */
#include "test.h"

typedef struct all_params {
    int64_t i;
    bool flag;
    double x;
    oly_dtype dtype;
    oly_ints axes;
    int mode;
    const char *label;
    const oly_aval *avals;
    int n_avals;
    oly_host_fn *fn;
    int64_t secret; /* hidden */
} all_params;

static const char *const mode_names[] = {"none", "fast", "exact", NULL};

static const oly_param_field all_fields[] = {
    {.name = "i", .kind = OLY_FIELD_INT, .offset = offsetof(all_params, i)},
    {.name = "flag", .kind = OLY_FIELD_BOOL, .offset = offsetof(all_params, flag)},
    {.name = "x", .kind = OLY_FIELD_FLOAT, .offset = offsetof(all_params, x)},
    {.name = "dtype", .kind = OLY_FIELD_DTYPE, .offset = offsetof(all_params, dtype)},
    {.name = "axes", .kind = OLY_FIELD_INTS, .offset = offsetof(all_params, axes)},
    {.name = "mode", .kind = OLY_FIELD_ENUM, .offset = offsetof(all_params, mode),
     .enum_names = mode_names},
    {.name = "label", .kind = OLY_FIELD_STR, .offset = offsetof(all_params, label)},
    {.name = "avals", .kind = OLY_FIELD_AVALS, .offset = offsetof(all_params, avals),
     .count_offset = offsetof(all_params, n_avals)},
    {.name = "fn", .kind = OLY_FIELD_HOST_FN, .offset = offsetof(all_params, fn)},
    {.name = "secret", .kind = OLY_FIELD_INT, .offset = offsetof(all_params, secret),
     .hidden = true},
};

static oly_status no_outputs(const oly_shape_ctx *ctx, oly_aval *out) { return OLY_OK; }

static const oly_prim t_all = {.name = "t_all", .n_in = 0, .n_out = 0,
                               .params_size = sizeof(all_params), .fields = all_fields,
                               .n_fields = OLY_ARRAY_LEN(all_fields), .shape = no_outputs};

static int released;
static void count_release(void *user) { released++; }
static oly_status noop_call(void *user, oly_callback_frame *frame) { return OLY_OK; }

static oly_aval aval2(oly_dtype t, int rank, int64_t d0)
{
    oly_aval a;
    memset(&a, 0, sizeof a);
    a.dtype = t;
    a.rank = rank;
    a.dims[0] = d0;
    return a;
}

static char *print_params(const all_params *p)
{
    oly_strbuf sb = {0};
    oly__params_print(&t_all, p, &sb);
    return sb.data;
}

TEST(params_print_every_kind)
{
    oly_host_fn *fn;
    CHECK_OK(oly_host_fn_new("f_host", noop_call, NULL, NULL, &fn));
    oly_aval av[2] = {aval2(OLY_FLOAT32, 1, 5), aval2(OLY_INT32, 0, 0)};
    all_params p = {.i = 3, .flag = true, .x = 0.5, .dtype = OLY_FLOAT32,
                    .axes = {2, {0, 1}}, .mode = 2, .label = "hello", .avals = av,
                    .n_avals = 2, .fn = fn, .secret = 42};
    char *s = print_params(&p);
    CHECK_STREQ(s, "i=3 flag=True x=0.5 dtype=float32 axes=(0, 1) mode=exact label=hello "
                   "avals=(f32[5], i32[]) fn=f_host");
    free(s);

    all_params q = {.i = -1, .flag = false, .x = 1.0, .dtype = OLY_BOOL, .axes = {1, {0}},
                    .mode = 0, .label = "", .avals = av, .n_avals = 1, .fn = fn};
    s = print_params(&q);
    CHECK_STREQ(s, "i=-1 flag=False x=1.0 dtype=bool axes=(0,) mode=none label= "
                   "avals=(f32[5],) fn=f_host");
    free(s);

    all_params r = {.x = 1e-7, .dtype = OLY_BFLOAT16, .axes = {0, {0}}, .avals = NULL,
                    .n_avals = 0, .fn = fn};
    s = print_params(&r);
    CHECK_STREQ(s, "i=0 flag=False x=1e-07 dtype=bfloat16 axes=() mode=none label=None "
                   "avals=() fn=f_host");
    free(s);
    oly_host_fn_release(fn);
}

TEST(params_format_float)
{
    static const struct { double x; bool single; const char *want; } cases[] = {
        {1.0, false, "1.0"},       {0.5, false, "0.5"},          {-2.0, false, "-2.0"},
        {0.1, false, "0.1"},       {0.1f, true, "0.1"},
        {0.1f, false, "0.10000000149011612"},
        {1e16, false, "1e+16"},    {1e15, false, "1000000000000000.0"},
        {123.25, false, "123.25"}, {1e-4, false, "0.0001"},      {1.5e-5, false, "1.5e-05"},
        {-0.0, false, "-0.0"},     {0.0, false, "0.0"},
        {1.0 / 3, false, "0.3333333333333333"},
        {NAN, false, "nan"},       {INFINITY, true, "inf"},      {-INFINITY, false, "-inf"},
        {3.4028234663852886e38, true, "3.4028235e+38"},          {2.5e300, false, "2.5e+300"},
    };
    for (int i = 0; i < OLY_ARRAY_LEN(cases); i++) {
        char buf[64];
        oly__format_float(buf, sizeof buf, cases[i].x, cases[i].single);
        CHECK_STREQ(buf, cases[i].want);
    }
}

/* Each field changes equality and (for these values) the hash; hidden fields
 * still count for equality. */
TEST(params_hash_equal_every_kind)
{
    oly_host_fn *fn, *fn2;
    CHECK_OK(oly_host_fn_new("a", noop_call, NULL, NULL, &fn));
    CHECK_OK(oly_host_fn_new("a", noop_call, NULL, NULL, &fn2));
    oly_aval av[2] = {aval2(OLY_FLOAT32, 1, 5), aval2(OLY_INT32, 0, 0)};
    oly_aval av_copy[2] = {av[0], av[1]};
    char label_copy[] = "lbl";
    all_params base = {.i = 3, .flag = true, .x = 0.5, .dtype = OLY_FLOAT32,
                       .axes = {2, {0, 1}}, .mode = 1, .label = "lbl", .avals = av,
                       .n_avals = 2, .fn = fn, .secret = 7};
    /* equal content at different addresses (strings, avals) is equal */
    all_params same = base;
    same.label = label_copy;
    same.avals = av_copy;
    same.axes.v[5] = 99; /* beyond n: ignored */
    CHECK(oly__params_equal(&t_all, &base, &same));
    CHECK_EQ(oly__params_hash(&t_all, &base), oly__params_hash(&t_all, &same));

    all_params v[12];
    for (int k = 0; k < 12; k++) v[k] = base;
    v[0].i = 4;
    v[1].flag = false;
    v[2].x = 0.25;
    v[3].dtype = OLY_FLOAT64;
    v[4].axes.v[1] = 2;
    v[5].axes.n = 1;
    v[6].mode = 2;
    v[7].label = "lbm";
    oly_aval av3[2] = {aval2(OLY_FLOAT32, 1, 6), av[1]};
    v[8].avals = av3;
    v[9].n_avals = 1;
    v[10].fn = fn2; /* same name, another function */
    v[11].secret = 8;
    for (int k = 0; k < 12; k++) {
        if (oly__params_equal(&t_all, &base, &v[k])) CHECK_FAIL_("variant %d compares equal", k);
        if (k != 11 && oly__params_hash(&t_all, &base) == oly__params_hash(&t_all, &v[k]))
            CHECK_FAIL_("variant %d hashes equal", k);
    }
    /* floats compare bitwise: nan equals itself */
    all_params n1 = base, n2 = base;
    n1.x = n2.x = NAN;
    CHECK(oly__params_equal(&t_all, &n1, &n2));
    /* weak avals differ from strong ones */
    oly_aval avw[2] = {av[0], av[1]};
    avw[1].weak = true;
    all_params w = base;
    w.avals = avw;
    CHECK(!oly__params_equal(&t_all, &base, &w));
    oly_host_fn_release(fn);
    oly_host_fn_release(fn2);
}

TEST(params_copy_is_deep_and_retains)
{
    released = 0;
    oly_host_fn *fn;
    CHECK_OK(oly_host_fn_new("keep", noop_call, NULL, count_release, &fn));
    char label[] = "name";
    oly_aval av[1] = {aval2(OLY_FLOAT32, 1, 5)};
    all_params src = {.i = 1, .label = label, .avals = av, .n_avals = 1, .fn = fn};
    oly_arena *arena = oly__arena_new();
    void *copy = NULL;
    CHECK_OK(oly__params_copy(&t_all, arena, &src, &copy));
    all_params *c = copy;
    CHECK(c && c->label != label && c->avals != av);
    label[0] = 'X'; /* the source changes; the copy does not */
    av[0].dims[0] = 9;
    CHECK_STREQ(c->label, "name");
    CHECK_EQ(c->avals[0].dims[0], 5);
    CHECK_EQ(atomic_load(&fn->c.refcount), 2);
    oly_host_fn_release(fn); /* the copy keeps it alive */
    CHECK_EQ(released, 0);
    CHECK_STREQ(oly_host_fn_name(c->fn), "keep");
    oly__params_release(&t_all, copy);
    CHECK_EQ(released, 1);
    oly__arena_free(arena);

    /* a primitive without params copies to NULL; one with params needs them */
    static const oly_prim none = {.name = "t_none", .n_in = 0};
    arena = oly__arena_new();
    copy = &src;
    CHECK_OK(oly__params_copy(&none, arena, NULL, &copy));
    CHECK(copy == NULL);
    CHECK_ERR(oly__params_copy(&t_all, arena, NULL, &copy), OLY_ERR_INVALID,
              "t_all: params are required");
    oly__arena_free(arena);
}

/* Equations hold their own copy of params: a host function in params lives
 * as long as the program. */
TEST(params_live_with_program)
{
    released = 0;
    oly_host_fn *fn;
    CHECK_OK(oly_host_fn_new("cb", noop_call, NULL, count_release, &fn));
    char label[] = "lbl";
    all_params src = {.label = label, .fn = fn, .mode = 1};
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    CHECK_OK(oly_builder_append(b, &t_all, NULL, 0, &src, NULL, 0, NULL, 0, NULL));
    oly_program *p = NULL;
    CHECK_OK(oly_builder_finish(b, NULL, 0, &p));
    oly_builder_free(b);
    oly_host_fn_release(fn);
    label[0] = 'X';
    CHECK_EQ(released, 0);
    char *text = NULL;
    CHECK_OK(oly_program_print(p, &text));
    CHECK_STREQ(text, "{ lambda ; . let\n"
                      "    t_all[i=0 flag=False x=0.0 dtype=bool axes=() mode=fast label=lbl "
                      "avals=() fn=cb]\n"
                      "  in () }");
    free(text);
    oly_program_release(p);
    CHECK_EQ(released, 1);
}
