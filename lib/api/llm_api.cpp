// The C API: thin shims from llm.h onto the C++ runtime. Each body validates its pointers and runs
// through guard() so no exception escapes.
#include "llm.h"

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "api/guard.h"

namespace llm {
namespace {
thread_local std::string g_last_error;
}
void set_last_error(const std::string &msg) {
    try {
        g_last_error = msg;
    } catch (...) {
        g_last_error.clear();
    }
}
void clear_last_error() { g_last_error.clear(); }
}  // namespace llm

using namespace llm;

#define LLM_STR2(x) #x
#define LLM_STR(x) LLM_STR2(x)

extern "C" {

LLM_API const char *llm_version_string(void) {
    return LLM_STR(LLM_VERSION_MAJOR) "." LLM_STR(LLM_VERSION_MINOR) "." LLM_STR(LLM_VERSION_PATCH);
}

LLM_API const char *llm_status_string(int32_t status) {
    switch (status) {
    case LLM_OK: return "ok";
    case LLM_DONE: return "done (end of generation)";
    case LLM_ERR_INVALID_ARGUMENT: return "invalid argument";
    case LLM_ERR_IO: return "I/O error";
    case LLM_ERR_FORMAT: return "malformed model file";
    case LLM_ERR_UNSUPPORTED: return "unsupported";
    case LLM_ERR_OUT_OF_MEMORY: return "out of memory";
    case LLM_ERR_CONTEXT_FULL: return "context full";
    case LLM_ERR_BUFFER_TOO_SMALL: return "buffer too small";
    case LLM_ERR_CANCELLED: return "cancelled";
    case LLM_ERR_INTERNAL: return "internal error";
    default: return "unknown status";
    }
}

LLM_API const char *llm_last_error(void) { return g_last_error.c_str(); }

LLM_API void llm_set_log_callback(llm_log_cb cb, void *user) {
    guard([&] {
        set_log_callback(cb, user);
        return LLM_OK;
    });
}

LLM_API void llm_set_log_level(int32_t level) {
    guard([&] {
        set_log_level(level);
        return LLM_OK;
    });
}

}  // extern "C"

// ---- model and session --------------------------------------------------------------------------

#include "model/model.h"
#include "runtime/session.h"

// The host's model handle. Sessions share ownership of the Model, so llm_model_free only drops the
// host's reference: the Model goes when its last session does.
struct llm_model {
    std::shared_ptr<llm::Model> impl;
    // Serializes the info JSON against the RAM dial, which changes what it reports.
    std::mutex meta_mu;
    // The latest llm_model_info_json text, replaced only when the text changes. Held by a
    // shared_ptr so a string another thread was given survives its replacement (see info_json).
    std::shared_ptr<const std::string> info;
};

struct llm_session {
    std::shared_ptr<const llm::Model> model;  // keeps the model alive; destroyed after impl
    std::unique_ptr<llm::Session> impl;
    std::string stats;  // backing store for llm_session_stats_json
};

namespace {

#define LLM_REQUIRE(cond, ...)                                                                      \
    do {                                                                                            \
        if (!(cond)) llm::fail(LLM_ERR_INVALID_ARGUMENT, __VA_ARGS__);                              \
    } while (0)

// Brackets a public call so the session can report per-call counters.
struct CallScope {
    Session &s;
    explicit CallScope(Session &s_, bool continues = false) : s(s_) { s.begin_call(continues); }
    ~CallScope() { s.end_call(); }
};

LoadOptions load_options(const llm_model_params *p) {
    llm_model_params d;
    llm_model_params_init(&d);
    if (!p) p = &d;
    LLM_REQUIRE(p->version >= 1 && p->version <= LLM_MODEL_PARAMS_VERSION,
                "llm_model_params.version {} is not supported (this library: 1..{})", p->version,
                LLM_MODEL_PARAMS_VERSION);
    LoadOptions o;
    o.vocab_only = p->vocab_only;
    o.n_threads = p->n_threads;
    if (p->version >= 2) {
        LLM_REQUIRE(p->residency >= LLM_RESIDENCY_RESIDENT && p->residency <= LLM_RESIDENCY_BUDGET,
                    "llm_model_params.residency {} is not an LLM_RESIDENCY_* value", p->residency);
        LLM_REQUIRE(p->prefetch_depth >= 0 && p->prefetch_depth <= 16, "prefetch_depth {} is out of range 0..16",
                    p->prefetch_depth);
        LLM_REQUIRE(p->residency != LLM_RESIDENCY_BUDGET || p->ram_budget_bytes > 0,
                    "LLM_RESIDENCY_BUDGET needs ram_budget_bytes > 0");
        o.loader.residency = static_cast<Residency>(p->residency);
        o.loader.budget_bytes = p->ram_budget_bytes;
        o.loader.prefetch_depth = p->prefetch_depth;
    }
    if (p->version >= 3) {
        LLM_REQUIRE(p->page_cache >= LLM_PAGE_CACHE_KEEP && p->page_cache <= LLM_PAGE_CACHE_DIRECT,
                    "llm_model_params.page_cache {} is not an LLM_PAGE_CACHE_* value", p->page_cache);
        o.loader.cache = static_cast<CachePolicy>(p->page_cache);
    }
    if (p->progress) {
        llm_progress_cb cb = p->progress;
        void *user = p->progress_user;
        o.progress = [cb, user](float f) { return cb(f, user); };
    }
    return o;
}

int32_t finish_load(std::unique_ptr<WeightSource> src, const LoadOptions &o, llm_model **out) {
    auto model = Model::load(std::move(src), o);
    *out = new llm_model;
    (*out)->impl = std::shared_ptr<Model>(std::move(model));
    return LLM_OK;
}

}  // namespace

extern "C" {

LLM_API void llm_model_params_init(llm_model_params *p) {
    if (!p) return;
    *p = llm_model_params{};
    p->version = LLM_MODEL_PARAMS_VERSION;
    p->n_threads = 0;
    p->progress = nullptr;
    p->progress_user = nullptr;
    p->vocab_only = false;
    p->residency = LLM_RESIDENCY_RESIDENT;
    p->ram_budget_bytes = 0;
    p->prefetch_depth = 1;
    p->page_cache = LLM_PAGE_CACHE_KEEP;
}

LLM_API int32_t llm_model_load(const char *path, const llm_model_params *p, llm_model **out) {
    return guard([&] {
        LLM_REQUIRE(path && out, "llm_model_load: path and out must not be NULL");
        *out = nullptr;
        LoadOptions o = load_options(p);
        return finish_load(WeightSource::open_file(path), o, out);  // a split model's first shard brings the rest
    });
}

LLM_API int32_t llm_model_load_io(const llm_io *io, const llm_model_params *p, llm_model **out) {
    // io->close must run exactly once on every failure after io is known to be usable; the
    // ByteSource owns it from its construction on.
    bool closed_by_source = false;
    int32_t st = guard([&] {
        LLM_REQUIRE(io && out, "llm_model_load_io: io and out must not be NULL");
        *out = nullptr;
        LLM_REQUIRE(io->version == LLM_IO_VERSION, "llm_io.version {} is not supported (expected {})", io->version,
                    LLM_IO_VERSION);
        LLM_REQUIRE(io->size && io->read_at, "llm_io.size and llm_io.read_at must not be NULL");
        LoadOptions o = load_options(p);
        std::unique_ptr<ByteSource> bytes = make_io_source(*io);
        closed_by_source = true;
        return finish_load(WeightSource::open(std::move(bytes)), o, out);
    });
    if (st != LLM_OK && !closed_by_source && io && io->version == LLM_IO_VERSION && io->close) io->close(io->user);
    return st;
}

// Split models through the host's callbacks: one llm_io per shard.
LLM_API int32_t llm_model_load_io_split(const llm_io *ios, size_t n_io, const llm_model_params *p, llm_model **out) {
    // Each usable ios[k] is closed exactly once: by its ByteSource from the moment that is made (the
    // first `taken` of them), else below when the load fails.
    size_t taken = 0;
    int32_t st = guard([&] {
        LLM_REQUIRE(ios && n_io > 0 && out, "llm_model_load_io_split: ios and out must not be NULL, n_io must be > 0");
        *out = nullptr;
        for (size_t k = 0; k < n_io; ++k) {
            LLM_REQUIRE(ios[k].version == LLM_IO_VERSION, "ios[{}].version {} is not supported (expected {})", k,
                        ios[k].version, LLM_IO_VERSION);
            LLM_REQUIRE(ios[k].size && ios[k].read_at, "ios[{}].size and ios[{}].read_at must not be NULL", k, k);
        }
        LoadOptions o = load_options(p);
        return finish_load(WeightSource::open(make_io_sources(ios, n_io, &taken)), o, out);
    });
    if (st != LLM_OK && ios) {
        for (size_t k = taken; k < n_io; ++k)
            if (ios[k].version == LLM_IO_VERSION && ios[k].close) ios[k].close(ios[k].user);
    }
    return st;
}

LLM_API void llm_model_free(llm_model *m) { delete m; }

LLM_API const char *llm_model_info_json(const llm_model *m) {
    if (!m) return nullptr;
    // Each thread keeps the string it was last given per model, so the pointer stays valid until
    // that thread asks again about the same model even if another thread's call replaced m->info.
    // Entries of freed models are dropped by the next call on this thread.
    struct Held {
        std::weak_ptr<const Model> model;
        const llm_model *handle;
        std::shared_ptr<const std::string> text;
    };
    thread_local std::vector<Held> held;
    auto *mm = const_cast<llm_model *>(m);  // the cached text is not part of the model's state
    std::shared_ptr<const std::string> text;
    int32_t st = guard([&] {
        std::string now;
        {
            std::lock_guard<std::mutex> lock(mm->meta_mu);
            now = m->impl->info_json();
            if (!mm->info || *mm->info != now) mm->info = std::make_shared<const std::string>(std::move(now));
            text = mm->info;
        }
        std::erase_if(held, [&](const Held &h) { return h.handle == m || h.model.expired(); });
        held.push_back(Held{m->impl, m, text});
        return LLM_OK;
    });
    return st == LLM_OK ? text->c_str() : "{}";
}

LLM_API int32_t llm_model_set_ram_budget(llm_model *m, uint64_t bytes) {
    return guard([&] {
        LLM_REQUIRE(m, "llm_model_set_ram_budget: model is NULL");
        LLM_REQUIRE(!m->impl->vocab_only(), "llm_model_set_ram_budget: the model was loaded vocab-only");
        std::lock_guard<std::mutex> lock(m->meta_mu);
        m->impl->set_ram_budget(bytes);
        return LLM_OK;
    });
}

LLM_API int32_t llm_model_memory_plan(const llm_model *m, int32_t n_ctx, llm_memory_plan *out) {
    return guard([&] {
        LLM_REQUIRE(m && out, "llm_model_memory_plan: model and out must not be NULL");
        LLM_REQUIRE(out->version == LLM_MEMORY_PLAN_VERSION, "llm_memory_plan.version {} is not supported (expected {})",
                    out->version, LLM_MEMORY_PLAN_VERSION);
        LLM_REQUIRE(!m->impl->vocab_only(), "llm_model_memory_plan: the model was loaded vocab-only");
        MemoryPlan p;
        {
            std::lock_guard<std::mutex> lock(const_cast<llm_model *>(m)->meta_mu);
            p = m->impl->memory_plan(n_ctx);
        }
        out->n_layer = p.n_layer;
        out->n_resident_layers = p.n_resident_layers;
        out->n_stream_slots = p.n_stream_slots;
        out->resident_block_bytes = p.resident_block_bytes;
        out->stream_slot_bytes = p.stream_slot_bytes;
        out->lm_head_bytes = p.lm_head_bytes;
        out->embedding_bytes = p.embedding_bytes;
        out->kv_cache_bytes = p.kv_cache_bytes;
        out->scratch_bytes = p.scratch_bytes;
        out->total_bytes = p.total_bytes;
        out->minimum_weight_bytes = p.minimum_weight_bytes;
        return LLM_OK;
    });
}

LLM_API int32_t llm_model_n_vocab(const llm_model *m) { return m ? m->impl->tokenizer().n_vocab() : 0; }
LLM_API int32_t llm_model_token_bos(const llm_model *m) { return m ? m->impl->tokenizer().bos() : -1; }
LLM_API int32_t llm_model_token_eos(const llm_model *m) { return m ? m->impl->tokenizer().eos() : -1; }
LLM_API bool llm_model_token_is_eog(const llm_model *m, int32_t token) {
    return m && token >= 0 && token < m->impl->tokenizer().n_vocab() && m->impl->tokenizer().is_eog(token);
}

LLM_API int32_t llm_tokenize(const llm_model *m, const char *text, size_t len, bool add_bos, bool parse_special,
                             int32_t *tokens, int32_t cap, int32_t *n_out) {
    return guard([&] {
        LLM_REQUIRE(m && n_out, "llm_tokenize: model and n_out must not be NULL");
        LLM_REQUIRE(text || len == 0, "llm_tokenize: text is NULL");
        LLM_REQUIRE(cap >= 0 && (tokens || cap == 0), "llm_tokenize: tokens is NULL with cap {}", cap);
        std::vector<int32_t> ids = m->impl->tokenizer().encode(std::string_view(text ? text : "", len), add_bos, parse_special);
        LLM_REQUIRE(ids.size() <= static_cast<size_t>(INT32_MAX), "llm_tokenize: text too long");
        *n_out = static_cast<int32_t>(ids.size());
        if (ids.size() > static_cast<size_t>(cap)) {
            fail(LLM_ERR_BUFFER_TOO_SMALL, "llm_tokenize: {} tokens do not fit in {}", ids.size(), cap);
        }
        std::copy(ids.begin(), ids.end(), tokens);
        return LLM_OK;
    });
}

LLM_API int32_t llm_token_to_piece(const llm_model *m, int32_t token, char *buf, size_t cap, size_t *len_out) {
    return guard([&] {
        LLM_REQUIRE(m && len_out, "llm_token_to_piece: model and len_out must not be NULL");
        LLM_REQUIRE(buf || cap == 0, "llm_token_to_piece: buf is NULL with cap {}", cap);
        LLM_REQUIRE(token >= 0 && token < m->impl->tokenizer().n_vocab(), "token id {} is out of range", token);
        std::string piece = m->impl->tokenizer().piece(token);
        *len_out = piece.size();
        if (piece.size() > cap) fail(LLM_ERR_BUFFER_TOO_SMALL, "piece of {} bytes does not fit in {}", piece.size(), cap);
        std::copy(piece.begin(), piece.end(), buf);
        return LLM_OK;
    });
}

LLM_API void llm_session_params_init(llm_session_params *p) {
    if (!p) return;
    *p = llm_session_params{};
    p->version = LLM_SESSION_PARAMS_VERSION;
    p->n_ctx = 0;
    p->n_threads = 0;
    p->temperature = 0.8f;
    p->top_k = 40;
    p->top_p = 0.95f;
    p->min_p = 0.05f;
    p->repeat_penalty = 1.0f;
    p->repeat_last_n = 64;
    p->seed = 0;
    p->logits_all = false;
}

LLM_API int32_t llm_session_create(llm_model *m, const llm_session_params *p, llm_session **out) {
    return guard([&] {
        LLM_REQUIRE(m && out, "llm_session_create: model and out must not be NULL");
        *out = nullptr;
        llm_session_params d;
        llm_session_params_init(&d);
        if (!p) p = &d;
        LLM_REQUIRE(p->version >= 1 && p->version <= LLM_SESSION_PARAMS_VERSION,
                    "llm_session_params.version {} is not supported (this library: 1..{})", p->version,
                    LLM_SESSION_PARAMS_VERSION);
        LLM_REQUIRE(p->n_ctx <= (1 << 24), "n_ctx {} is too large", p->n_ctx);
        LLM_REQUIRE(p->repeat_last_n >= 0, "repeat_last_n must be >= 0");
        LLM_REQUIRE(p->temperature == p->temperature && p->top_p == p->top_p && p->min_p == p->min_p &&
                        p->repeat_penalty > 0.0f,
                    "sampling parameters must be finite numbers and repeat_penalty > 0");
        SessionOptions o;
        o.n_ctx = p->n_ctx;
        o.n_threads = p->n_threads;
        o.logits_all = p->logits_all;
        o.sampling.temperature = p->temperature;
        o.sampling.top_k = p->top_k;
        o.sampling.top_p = p->top_p;
        o.sampling.min_p = p->min_p;
        o.sampling.repeat_penalty = p->repeat_penalty;
        o.sampling.repeat_last_n = p->repeat_last_n;
        o.sampling.seed = p->seed;
        auto session = std::make_unique<Session>(*m->impl, o);
        *out = new llm_session{m->impl, std::move(session), {}};
        return LLM_OK;
    });
}

LLM_API void llm_session_free(llm_session *s) { delete s; }

LLM_API int32_t llm_session_reset(llm_session *s) {
    return guard([&] {
        LLM_REQUIRE(s, "llm_session_reset: session is NULL");
        s->impl->reset();
        return LLM_OK;
    });
}

LLM_API int32_t llm_session_n_past(const llm_session *s) { return s ? s->impl->n_past() : 0; }

LLM_API int32_t llm_session_prefill(llm_session *s, const int32_t *tokens, size_t n) {
    return guard([&] {
        LLM_REQUIRE(s && tokens && n > 0, "llm_session_prefill: session and tokens must not be NULL, n > 0");
        CallScope scope(*s->impl);
        s->impl->prefill(tokens, n);
        return LLM_OK;
    });
}

LLM_API int32_t llm_session_logits(llm_session *s, const float **logits, int32_t *n_vocab) {
    return guard([&] {
        LLM_REQUIRE(s && logits && n_vocab, "llm_session_logits: arguments must not be NULL");
        *logits = s->impl->logits();
        *n_vocab = static_cast<int32_t>(s->impl->model().config().n_vocab);
        return LLM_OK;
    });
}

LLM_API int32_t llm_session_logits_ith(llm_session *s, int32_t i, const float **logits, int32_t *n_vocab) {
    return guard([&] {
        LLM_REQUIRE(s && logits && n_vocab, "llm_session_logits_ith: arguments must not be NULL");
        LLM_REQUIRE(i >= 0, "llm_session_logits_ith: row {} is negative", i);
        *logits = s->impl->logits(i);
        *n_vocab = static_cast<int32_t>(s->impl->model().config().n_vocab);
        return LLM_OK;
    });
}

LLM_API int32_t llm_session_sample(llm_session *s, int32_t *token) {
    return guard([&] {
        LLM_REQUIRE(s && token, "llm_session_sample: arguments must not be NULL");
        *token = s->impl->sample();
        return LLM_OK;
    });
}

LLM_API int32_t llm_session_accept(llm_session *s, int32_t token) {
    return guard([&] {
        LLM_REQUIRE(s, "llm_session_accept: session is NULL");
        CallScope scope(*s->impl);
        s->impl->accept(token);
        return LLM_OK;
    });
}

LLM_API int32_t llm_session_generate(llm_session *s, const char *prompt, int32_t max_tokens, llm_token_cb on_token,
                                     void *user) {
    return guard([&] {
        LLM_REQUIRE(s, "llm_session_generate: session is NULL");
        LLM_REQUIRE(max_tokens >= 0, "llm_session_generate: max_tokens {} is negative", max_tokens);
        std::function<bool(int32_t, const std::string &)> cb;
        if (on_token) cb = [&](int32_t t, const std::string &piece) { return on_token(t, piece.data(), piece.size(), user); };
        CallScope scope(*s->impl);
        return s->impl->generate(prompt ? std::string_view(prompt) : std::string_view(), max_tokens, cb);
    });
}

LLM_API int32_t llm_session_next(llm_session *s, int32_t *token, char *piece, size_t cap, size_t *len) {
    return guard([&] {
        LLM_REQUIRE(s && token, "llm_session_next: session and token must not be NULL");
        LLM_REQUIRE(piece || cap == 0, "llm_session_next: piece is NULL with cap {}", cap);
        CallScope scope(*s->impl, true);
        const int32_t t = s->impl->sample();
        *token = t;
        const Tokenizer &tok = s->impl->model().tokenizer();
        if (tok.is_eog(t)) {
            if (len) *len = 0;
            return LLM_DONE;
        }
        s->impl->accept(t);
        std::string text = tok.piece(t);
        if (len) *len = text.size();
        if (text.size() > cap) {
            if (piece) fail(LLM_ERR_BUFFER_TOO_SMALL, "piece of {} bytes does not fit in {}", text.size(), cap);
            return LLM_OK;
        }
        std::copy(text.begin(), text.end(), piece);
        return LLM_OK;
    });
}

LLM_API void llm_session_cancel(llm_session *s) {
    if (s) s->impl->cancel();
}

LLM_API int32_t llm_session_stats(const llm_session *s, llm_stats *total, llm_stats *last_call) {
    return guard([&] {
        LLM_REQUIRE(s, "llm_session_stats: session is NULL");
        auto fill = [](llm_stats *o, const SessionStats &st) {
            if (!o) return;
            LLM_REQUIRE(o->version == LLM_STATS_VERSION, "llm_stats.version {} is not supported (expected {})",
                        o->version, LLM_STATS_VERSION);
            o->prompt_tokens = st.prompt_tokens;
            o->generated_tokens = st.generated_tokens;
            o->prefill_seconds = st.prefill_seconds;
            o->decode_seconds = st.decode_seconds;
            o->bytes_read = st.bytes_read;
            o->read_calls = st.read_calls;
            o->io_wait_seconds = st.io_wait_seconds;
        };
        fill(total, s->impl->stats());
        fill(last_call, s->impl->last_call_stats());
        return LLM_OK;
    });
}

LLM_API const char *llm_session_stats_json(llm_session *s) {
    if (!s) return nullptr;
    int32_t st = guard([&] {
        s->stats = s->impl->stats_json();
        return LLM_OK;
    });
    return st == LLM_OK ? s->stats.c_str() : "{}";
}

}  // extern "C"
