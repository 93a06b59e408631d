/* ABI guard: the size and every field offset of the public structs, per struct version, for LP64
   (x86-64 and AArch64 Linux/macOS). Bindings (Rust, Go, Python ctypes, Dart FFI) hard-code these
   layouts, so any change here must be deliberate: a new field goes at the end with a new version, and
   a new row goes into the table below -- never an edit of an existing row.
   Also checks that *_init(p, CURRENT) sets the current version and that the version macros have a row. */
#include "llm.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    const char *strct;
    unsigned version; /* the struct version that introduced the field */
    const char *field;
    size_t offset, size;   /* expected on LP64 */
    size_t got_offset, got_size;
} field_row;

#define F(S, V, name, off, sz) {#S, V, #name, off, sz, offsetof(S, name), sizeof(((S *)0)->name)}

static const field_row fields[] = {
    /* llm_model_params v1 (a v1 struct ends after vocab_only: 32 bytes with padding) */
    F(llm_model_params, 1, version, 0, 4),
    F(llm_model_params, 1, n_threads, 4, 4),
    F(llm_model_params, 1, progress, 8, 8),
    F(llm_model_params, 1, progress_user, 16, 8),
    F(llm_model_params, 1, vocab_only, 24, 1),
    /* llm_model_params v2 */
    F(llm_model_params, 2, residency, 28, 4),
    F(llm_model_params, 2, ram_budget_bytes, 32, 8),
    F(llm_model_params, 2, prefetch_depth, 40, 4),
    /* llm_model_params v3 */
    F(llm_model_params, 3, page_cache, 44, 4),
    /* llm_session_params v1 */
    F(llm_session_params, 1, version, 0, 4),
    F(llm_session_params, 1, n_ctx, 4, 4),
    F(llm_session_params, 1, n_threads, 8, 4),
    F(llm_session_params, 1, temperature, 12, 4),
    F(llm_session_params, 1, top_k, 16, 4),
    F(llm_session_params, 1, top_p, 20, 4),
    F(llm_session_params, 1, min_p, 24, 4),
    F(llm_session_params, 1, repeat_penalty, 28, 4),
    F(llm_session_params, 1, repeat_last_n, 32, 4),
    F(llm_session_params, 1, seed, 40, 8),
    F(llm_session_params, 1, logits_all, 48, 1),
    /* v2 */
    F(llm_session_params, 2, parse_special, 49, 1),
    F(llm_session_params, 2, kv_type_k, 52, 4),
    F(llm_session_params, 2, kv_type_v, 56, 4),
    F(llm_session_params, 2, context_shift, 60, 1),
    F(llm_session_params, 2, n_keep, 64, 4),
    /* llm_session_params v3 (0.4) */
    F(llm_session_params, 3, presence_penalty, 68, 4),
    F(llm_session_params, 3, frequency_penalty, 72, 4),
    /* llm_io v1 */
    F(llm_io, 1, version, 0, 4),
    F(llm_io, 1, user, 8, 8),
    F(llm_io, 1, size, 16, 8),
    F(llm_io, 1, read_at, 24, 8),
    F(llm_io, 1, close, 32, 8),
    /* llm_io v2 (a v1 struct ends after close: 40 bytes) */
    F(llm_io, 2, flags, 40, 4),
    /* llm_writer v1 */
    F(llm_writer, 1, version, 0, 4),
    F(llm_writer, 1, user, 8, 8),
    F(llm_writer, 1, write, 16, 8),
    /* llm_chat_message (not versioned: an array element the caller fills; it never changes) */
    F(llm_chat_message, 1, role, 0, 8),
    F(llm_chat_message, 1, content, 8, 8),
    /* llm_memory_plan v1 */
    F(llm_memory_plan, 1, version, 0, 4),
    F(llm_memory_plan, 1, n_layer, 4, 4),
    F(llm_memory_plan, 1, n_resident_layers, 8, 4),
    F(llm_memory_plan, 1, n_stream_slots, 12, 4),
    F(llm_memory_plan, 1, resident_block_bytes, 16, 8),
    F(llm_memory_plan, 1, stream_slot_bytes, 24, 8),
    F(llm_memory_plan, 1, lm_head_bytes, 32, 8),
    F(llm_memory_plan, 1, embedding_bytes, 40, 8),
    F(llm_memory_plan, 1, kv_cache_bytes, 48, 8),
    F(llm_memory_plan, 1, scratch_bytes, 56, 8),
    F(llm_memory_plan, 1, total_bytes, 64, 8),
    F(llm_memory_plan, 1, minimum_weight_bytes, 72, 8),
    /* llm_stats v1 */
    F(llm_stats, 1, version, 0, 4),
    F(llm_stats, 1, prompt_tokens, 8, 8),
    F(llm_stats, 1, generated_tokens, 16, 8),
    F(llm_stats, 1, prefill_seconds, 24, 8),
    F(llm_stats, 1, decode_seconds, 32, 8),
    F(llm_stats, 1, bytes_read, 40, 8),
    F(llm_stats, 1, read_calls, 48, 8),
    F(llm_stats, 1, io_wait_seconds, 56, 8),
    /* llm_stats v2 (0.4) */
    F(llm_stats, 2, passes, 64, 8),
    F(llm_stats, 2, drafted_tokens, 72, 8),
    F(llm_stats, 2, accepted_tokens, 80, 8),
    /* llm_speculation_params v1 (0.4) */
    F(llm_speculation_params, 1, version, 0, 4),
    F(llm_speculation_params, 1, draft, 8, 8),
    F(llm_speculation_params, 1, n_draft, 16, 4),
    F(llm_speculation_params, 1, lookup_ngram, 20, 4),
    F(llm_speculation_params, 1, draft_p_min, 24, 4),
    /* llm_embed_params v1 (0.4) */
    F(llm_embed_params, 1, version, 0, 4),
    F(llm_embed_params, 1, pooling, 4, 4),
    F(llm_embed_params, 1, normalize, 8, 1),
    F(llm_embed_params, 1, add_bos, 9, 1),
    F(llm_embed_params, 1, parse_special, 10, 1),
    /* llm_logprobs_params v1, llm_token_logprob (0.4) */
    F(llm_logprobs_params, 1, version, 0, 4),
    F(llm_logprobs_params, 1, n_top, 4, 4),
    F(llm_logprobs_params, 1, on_token, 8, 8),
    F(llm_logprobs_params, 1, user, 16, 8),
    F(llm_token_logprob, 1, token, 0, 4),
    F(llm_token_logprob, 1, logprob, 4, 4),
};

/* sizeof per struct version. The current version's row must match sizeof; older rows document what
   an older host passes (the library reads only the fields its version declares). */
typedef struct {
    const char *strct;
    unsigned version;
    size_t size;
} size_row;

static const size_row sizes[] = {
    {"llm_model_params", 1, 32},
    {"llm_model_params", 2, 48},
    {"llm_model_params", 3, 48},
    {"llm_session_params", 1, 56},
    {"llm_session_params", 2, 72},
    {"llm_session_params", 3, 80},
    {"llm_io", 1, 40},
    {"llm_io", 2, 48},
    {"llm_writer", 1, 24},
    {"llm_chat_message", 1, 16},
    {"llm_memory_plan", 1, 80},
    {"llm_stats", 1, 64},
    {"llm_stats", 2, 88},
    {"llm_speculation_params", 1, 32},
    {"llm_embed_params", 1, 12},
    {"llm_logprobs_params", 1, 24},
    {"llm_token_logprob", 1, 8},
};

typedef struct {
    const char *strct;
    unsigned current_version;
    size_t size;
} current_row;

static const current_row current[] = {
    {"llm_model_params", LLM_MODEL_PARAMS_VERSION, sizeof(llm_model_params)},
    {"llm_session_params", LLM_SESSION_PARAMS_VERSION, sizeof(llm_session_params)},
    {"llm_io", LLM_IO_VERSION, sizeof(llm_io)},
    {"llm_writer", LLM_WRITER_VERSION, sizeof(llm_writer)},
    {"llm_chat_message", 1, sizeof(llm_chat_message)},
    {"llm_memory_plan", LLM_MEMORY_PLAN_VERSION, sizeof(llm_memory_plan)},
    {"llm_stats", LLM_STATS_VERSION, sizeof(llm_stats)},
    {"llm_speculation_params", LLM_SPECULATION_PARAMS_VERSION, sizeof(llm_speculation_params)},
    {"llm_embed_params", LLM_EMBED_PARAMS_VERSION, sizeof(llm_embed_params)},
    {"llm_logprobs_params", LLM_LOGPROBS_PARAMS_VERSION, sizeof(llm_logprobs_params)},
    {"llm_token_logprob", 1, sizeof(llm_token_logprob)},
};

static int failures = 0;

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "ABI: %s\n", what);
        ++failures;
    }
}

int main(void) {
    size_t i, j;
    char msg[256];
    llm_model_params mp;
    llm_session_params sp;
    llm_memory_plan plan;
    llm_stats stats;

    if (sizeof(void *) != 8 || sizeof(long) != 8) {
        printf("abi_layout: not an LP64 target; the table describes LP64 only\n");
        return 77;
    }
    for (i = 0; i < sizeof fields / sizeof fields[0]; ++i) {
        const field_row *f = &fields[i];
        snprintf(msg, sizeof msg, "%s.%s (v%u): offset %zu size %zu, table says offset %zu size %zu", f->strct,
                f->field, f->version, f->got_offset, f->got_size, f->offset, f->size);
        check(f->got_offset == f->offset && f->got_size == f->size, msg);
    }
    for (i = 0; i < sizeof current / sizeof current[0]; ++i) {
        const current_row *c = &current[i];
        int found = 0;
        for (j = 0; j < sizeof sizes / sizeof sizes[0]; ++j) {
            if (strcmp(sizes[j].strct, c->strct) == 0 && sizes[j].version == c->current_version) {
                found = 1;
                snprintf(msg, sizeof msg, "sizeof(%s) v%u is %zu, table says %zu", c->strct, c->current_version,
                        c->size, sizes[j].size);
                check(sizes[j].size == c->size, msg);
            }
        }
        snprintf(msg, sizeof msg, "%s version %u has no row in the size table: add one (and its fields)", c->strct,
                c->current_version);
        check(found, msg);
        for (j = 0; j < sizeof fields / sizeof fields[0]; ++j) {
            if (strcmp(fields[j].strct, c->strct) == 0 && fields[j].version > c->current_version) {
                snprintf(msg, sizeof msg, "%s.%s is listed for v%u but the header's version is %u", c->strct,
                        fields[j].field, fields[j].version, c->current_version);
                check(0, msg);
            }
        }
    }
    /* a v1 llm_model_params ends with vocab_only: its padded size is the v1 row */
    check((offsetof(llm_model_params, vocab_only) + sizeof(bool) + 7) / 8 * 8 == 32,
          "llm_model_params v1 prefix no longer ends at 32 bytes");

    check(llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION) == LLM_OK && mp.version == LLM_MODEL_PARAMS_VERSION,
          "llm_model_params_init does not set the current version");
    check(llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION) == LLM_OK &&
              sp.version == LLM_SESSION_PARAMS_VERSION,
          "llm_session_params_init does not set the current version");
    check(llm_memory_plan_init(&plan, LLM_MEMORY_PLAN_VERSION) == LLM_OK && plan.version == LLM_MEMORY_PLAN_VERSION,
          "llm_memory_plan_init does not set the current version");
    check(llm_stats_init(&stats, LLM_STATS_VERSION) == LLM_OK && stats.version == LLM_STATS_VERSION,
          "llm_stats_init does not set the current version");

    if (failures) {
        fprintf(stderr, "%d ABI mismatches\n", failures);
        return 1;
    }
    printf("abi_layout: %zu fields and %zu struct sizes match the LP64 table\n",
           sizeof fields / sizeof fields[0], sizeof current / sizeof current[0]);
    return 0;
}
