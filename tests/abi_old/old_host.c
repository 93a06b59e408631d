/* A libllm 0.1 app: compiled against the frozen 0.1 header, it calls the one-argument *_init functions
   and sets the version of the structs the library fills itself, as 0.1 asked. Each struct sits in
   front of guard bytes standing for the app's neighbouring memory; a library that wrote its own,
   larger idea of a struct (or bound this binary to the two-argument init) would change them.
   Usage: abi_old_host MODEL.gguf EXPECTED_LIBRARY_VERSION */
#include "llm_v0_1.h"

#include <stdio.h>
#include <string.h>

#define GUARD 0xA5
#define GUARD_BYTES 64

static int failures = 0;

#define EXPECT(cond)                                                                                \
    do {                                                                                            \
        if (!(cond)) {                                                                              \
            fprintf(stderr, "%s:%d: EXPECT(%s) failed: %s\n", __FILE__, __LINE__, #cond, llm_last_error()); \
            ++failures;                                                                             \
        }                                                                                           \
    } while (0)

/* The structs of 0.1, each followed by guard bytes. */
typedef struct {
    llm_model_params p;
    unsigned char guard[GUARD_BYTES];
} guarded_model_params;
typedef struct {
    llm_session_params p;
    unsigned char guard[GUARD_BYTES];
} guarded_session_params;
typedef struct {
    llm_memory_plan p;
    unsigned char guard[GUARD_BYTES];
} guarded_memory_plan;
typedef struct {
    llm_stats p;
    unsigned char guard[GUARD_BYTES];
} guarded_stats;

static int intact(const unsigned char *guard) {
    int i;
    for (i = 0; i < GUARD_BYTES; ++i)
        if (guard[i] != GUARD) return 0;
    return 1;
}

typedef struct {
    int n;
    char text[512];
} sink;

static bool on_token(int32_t token, const char *piece, size_t len, void *user) {
    sink *s = (sink *)user;
    size_t used = strlen(s->text);
    (void)token;
    if (used + len < sizeof s->text) memcpy(s->text + used, piece, len);
    ++s->n;
    return true;
}

int main(int argc, char **argv) {
    guarded_model_params mp;
    guarded_session_params sp;
    guarded_memory_plan plan;
    guarded_stats total, last;
    llm_model *m = NULL;
    llm_session *s = NULL;
    sink out;
    int32_t st;

    if (argc != 3) {
        fprintf(stderr, "usage: %s MODEL.gguf EXPECTED_LIBRARY_VERSION\n", argv[0]);
        return 2;
    }
    /* The library actually loaded is the current one, not the 0.1 link stub. */
    EXPECT(strcmp(llm_version_string(), argv[2]) == 0);
    printf("0.1 host on libllm %s\n", llm_version_string());

    memset(&mp, GUARD, sizeof mp);
    llm_model_params_init(&mp.p);
    EXPECT(mp.p.version == LLM_MODEL_PARAMS_VERSION);
    EXPECT(mp.p.residency == LLM_RESIDENCY_RESIDENT && mp.p.prefetch_depth == 1 && mp.p.progress == NULL);
    EXPECT(intact(mp.guard));
    mp.p.n_threads = 1;
    EXPECT(llm_model_load(argv[1], &mp.p, &m) == LLM_OK);
    if (!m) return 1;

    memset(&plan, GUARD, sizeof plan);
    plan.p.version = LLM_MEMORY_PLAN_VERSION;
    EXPECT(llm_model_memory_plan(m, 64, &plan.p) == LLM_OK);
    EXPECT(plan.p.n_layer == 5 && plan.p.total_bytes > 0);
    EXPECT(intact(plan.guard));

    memset(&sp, GUARD, sizeof sp);
    llm_session_params_init(&sp.p);
    EXPECT(sp.p.version == LLM_SESSION_PARAMS_VERSION);
    EXPECT(sp.p.temperature > 0.79f && sp.p.temperature < 0.81f && sp.p.top_k == 40 && !sp.p.logits_all);
    EXPECT(intact(sp.guard));
    sp.p.temperature = 0.0f;
    sp.p.n_ctx = 64;
    sp.p.n_threads = 1;
    EXPECT(llm_session_create(m, &sp.p, &s) == LLM_OK);
    if (!s) return 1;

    memset(&out, 0, sizeof out);
    st = llm_session_generate(s, "Once upon a time", 12, on_token, &out);
    EXPECT(st == LLM_OK || st == LLM_DONE);
    EXPECT(out.n > 0);
    printf("generated %d tokens:%s\n", out.n, out.text);

    memset(&total, GUARD, sizeof total);
    memset(&last, GUARD, sizeof last);
    total.p.version = last.p.version = LLM_STATS_VERSION;
    EXPECT(llm_session_stats(s, &total.p, &last.p) == LLM_OK);
    EXPECT(total.p.prompt_tokens == 5 && total.p.generated_tokens == (uint64_t)out.n);
    EXPECT(intact(total.guard) && intact(last.guard));

    llm_session_free(s);
    llm_model_free(m);
    if (failures) {
        fprintf(stderr, "abi_old_host: %d failures\n", failures);
        return 1;
    }
    printf("abi_old_host: all checks passed\n");
    return 0;
}
