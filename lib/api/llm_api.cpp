// The C API: thin shims from llm.h onto the C++ runtime. Each extern "C" body checks its pointers and
// runs one call through guard() so no exception escapes; the conversions between the C structs and
// the C++ options live in the helpers above them, the work in the runtime and model.
#include "llm.h"

#include <cmath>
#include <cstddef>
#include <cstring>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "api/guard.h"
#include "model/model.h"
#include "chat/tool_parse.h"
#include "runtime/chat.h"
#include "runtime/embed.h"
#include "runtime/session.h"
#include "runtime/session_state.h"

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
const std::string &last_error_text() { return g_last_error; }
}  // namespace llm

using namespace llm;

// The host's model handle. Sessions share ownership of the Model, so llm_model_free only drops the
// host's reference: the Model goes when its last session does.
struct llm_model {
    std::shared_ptr<llm::Model> impl;
    // Serializes the info JSON against the RAM dial, which changes what it reports.
    std::mutex meta_mu;
    // The latest llm_model_info_json text, replaced only when the text changes. Held by a
    // shared_ptr so a string another thread was given survives its replacement (see info_text).
    std::shared_ptr<const std::string> info;
};

struct llm_session {
    std::shared_ptr<const llm::Model> model;  // keeps the model alive; destroyed after impl
    std::unique_ptr<llm::Session> impl;
    std::string stats;  // backing store for llm_session_stats_json
    std::string error;  // llm_session_last_error: the message of the last failed call on this session
};

namespace {

#define LLM_STR2(x) #x
#define LLM_STR(x) LLM_STR2(x)

#define LLM_REQUIRE(cond, ...)                                         \
    do {                                                               \
        if (!(cond)) llm::fail(LLM_ERR_INVALID_ARGUMENT, __VA_ARGS__); \
    } while (0)

// guard() for the calls on a session: a failure's message is also kept by the session, for hosts whose
// calls hop threads (llm_session_last_error).
template <typename F>
int32_t guard_session(const llm_session *s, F &&f) noexcept {
    const int32_t st = guard(std::forward<F>(f));
    if (st < 0 && s) {
        auto *ms = const_cast<llm_session *>(s);  // the message is not part of the session's state
        try {
            ms->error = last_error_text();
        } catch (...) {
            ms->error.clear();
        }
    }
    return st;
}

// ---- versioned structs ----------------------------------------------------------------------------

// The bytes of each version of the public structs, indexed by version (0: none): where the next
// version's first field starts, sizeof for the current one. A host built against an older llm.h
// allocated only its version's bytes, so every read and write of a caller's struct goes through
// these tables (versioned_size), never through sizeof.
constexpr size_t kModelParamsSize[] = {0, offsetof(llm_model_params, residency), offsetof(llm_model_params, page_cache),
                                       sizeof(llm_model_params)};
constexpr size_t kSessionParamsSize[] = {0, offsetof(llm_session_params, parse_special),
                                         offsetof(llm_session_params, presence_penalty), sizeof(llm_session_params)};
constexpr size_t kMemoryPlanSize[] = {0, sizeof(llm_memory_plan)};
constexpr size_t kStatsSize[] = {0, offsetof(llm_stats, passes), sizeof(llm_stats)};
constexpr size_t kSpeculationParamsSize[] = {0, sizeof(llm_speculation_params)};
constexpr size_t kEmbedParamsSize[] = {0, sizeof(llm_embed_params)};
constexpr size_t kLogprobsParamsSize[] = {0, sizeof(llm_logprobs_params)};
static_assert(std::size(kModelParamsSize) == LLM_MODEL_PARAMS_VERSION + 1, "a model params version has no size");
static_assert(std::size(kSessionParamsSize) == LLM_SESSION_PARAMS_VERSION + 1, "a session params version has no size");
static_assert(std::size(kMemoryPlanSize) == LLM_MEMORY_PLAN_VERSION + 1, "a memory plan version has no size");
static_assert(std::size(kStatsSize) == LLM_STATS_VERSION + 1, "a stats version has no size");
static_assert(std::size(kSpeculationParamsSize) == LLM_SPECULATION_PARAMS_VERSION + 1,
              "a speculation params version has no size");
static_assert(std::size(kEmbedParamsSize) == LLM_EMBED_PARAMS_VERSION + 1, "an embed params version has no size");
static_assert(std::size(kLogprobsParamsSize) == LLM_LOGPROBS_PARAMS_VERSION + 1,
              "a logprobs params version has no size");
// llm_token_logprob is handed out as an array of the core's own records.
static_assert(sizeof(llm_token_logprob) == sizeof(TokenLogprob) &&
                  offsetof(llm_token_logprob, logprob) == offsetof(TokenLogprob, logprob),
              "llm_token_logprob and TokenLogprob differ");

template <class T>
struct Versioned;
template <>
struct Versioned<llm_model_params> {
    static constexpr const size_t *sizes = kModelParamsSize;
    static constexpr uint32_t current = LLM_MODEL_PARAMS_VERSION;
    static constexpr const char *name = "llm_model_params";
};
template <>
struct Versioned<llm_session_params> {
    static constexpr const size_t *sizes = kSessionParamsSize;
    static constexpr uint32_t current = LLM_SESSION_PARAMS_VERSION;
    static constexpr const char *name = "llm_session_params";
};
template <>
struct Versioned<llm_memory_plan> {
    static constexpr const size_t *sizes = kMemoryPlanSize;
    static constexpr uint32_t current = LLM_MEMORY_PLAN_VERSION;
    static constexpr const char *name = "llm_memory_plan";
};
template <>
struct Versioned<llm_stats> {
    static constexpr const size_t *sizes = kStatsSize;
    static constexpr uint32_t current = LLM_STATS_VERSION;
    static constexpr const char *name = "llm_stats";
};
template <>
struct Versioned<llm_speculation_params> {
    static constexpr const size_t *sizes = kSpeculationParamsSize;
    static constexpr uint32_t current = LLM_SPECULATION_PARAMS_VERSION;
    static constexpr const char *name = "llm_speculation_params";
};

template <>
struct Versioned<llm_embed_params> {
    static constexpr const size_t *sizes = kEmbedParamsSize;
    static constexpr uint32_t current = LLM_EMBED_PARAMS_VERSION;
    static constexpr const char *name = "llm_embed_params";
};

template <>
struct Versioned<llm_logprobs_params> {
    static constexpr const size_t *sizes = kLogprobsParamsSize;
    static constexpr uint32_t current = LLM_LOGPROBS_PARAMS_VERSION;
    static constexpr const char *name = "llm_logprobs_params";
};

// The size of version v of T; fails (LLM_ERR_INVALID_ARGUMENT) for 0 and versions newer than ours.
template <class T>
size_t versioned_size(uint32_t v) {
    LLM_REQUIRE(v >= 1 && v <= Versioned<T>::current, "{}.version {} is not supported (this library: 1..{})",
                Versioned<T>::name, v, Versioned<T>::current);
    return Versioned<T>::sizes[v];
}

// *_init: the current struct `full` cut down to `version`'s bytes.
template <class T>
int32_t init_versioned(T *p, uint32_t version, const T &full) {
    LLM_REQUIRE(p, "{}_init: p is NULL", Versioned<T>::name);
    const size_t n = versioned_size<T>(version);
    std::memcpy(static_cast<void *>(p), &full, n);
    p->version = version;
    return LLM_OK;
}

// A caller's struct as the current version: its version's bytes over `defaults`.
template <class T>
T read_versioned(const T *p, T defaults) {
    if (!p) return defaults;
    const size_t n = versioned_size<T>(p->version);
    std::memcpy(static_cast<void *>(&defaults), p, n);
    return defaults;
}

// Fills a caller's output struct from the current one, as far as the caller's version reaches.
template <class T>
void write_versioned(T *out, T full) {
    const size_t n = versioned_size<T>(out->version);
    full.version = out->version;
    std::memcpy(static_cast<void *>(out), &full, n);
}

// The defaults are LoadOptions{}'s, so the C and C++ entry points cannot drift apart.
llm_model_params default_model_params() {
    const LoadOptions d;
    llm_model_params p{};
    p.version = LLM_MODEL_PARAMS_VERSION;
    p.n_threads = d.n_threads;
    p.progress = nullptr;
    p.progress_user = nullptr;
    p.vocab_only = d.vocab_only;
    p.residency = static_cast<int32_t>(d.store.residency);
    p.ram_budget_bytes = d.store.budget_bytes;
    p.prefetch_depth = d.store.prefetch_depth;
    p.page_cache = static_cast<int32_t>(d.store.cache);
    return p;
}

// The defaults are SessionOptions{}'s (sampling: SamplerParams{}), so they are written down once.
llm_session_params default_session_params() {
    const SessionOptions d;
    llm_session_params p{};
    p.version = LLM_SESSION_PARAMS_VERSION;
    p.n_ctx = d.n_ctx;
    p.n_threads = d.n_threads;
    p.temperature = d.sampling.temperature;
    p.top_k = d.sampling.top_k;
    p.top_p = d.sampling.top_p;
    p.min_p = d.sampling.min_p;
    p.repeat_penalty = d.sampling.repeat_penalty;
    p.repeat_last_n = d.sampling.repeat_last_n;
    p.seed = d.sampling.seed;
    p.logits_all = d.logits_all;
    p.parse_special = d.parse_special;
    p.kv_type_k = static_cast<int32_t>(d.kv_type_k);
    p.kv_type_v = static_cast<int32_t>(d.kv_type_v);
    p.context_shift = d.context_shift;
    p.n_keep = d.n_keep;
    p.presence_penalty = d.sampling.presence_penalty;
    p.frequency_penalty = d.sampling.frequency_penalty;
    return p;
}

// ---- model ----------------------------------------------------------------------------------------

// Fields the caller's version lacks keep their defaults, which are valid, so every field is checked.
LoadOptions load_options(const llm_model_params *caller) {
    const llm_model_params params = read_versioned(caller, default_model_params());
    const llm_model_params *p = &params;
    LoadOptions o;
    o.vocab_only = p->vocab_only;
    o.n_threads = p->n_threads;
    LLM_REQUIRE(p->residency >= LLM_RESIDENCY_RESIDENT && p->residency <= LLM_RESIDENCY_BUDGET,
                "llm_model_params.residency {} is not an LLM_RESIDENCY_* value", p->residency);
    LLM_REQUIRE(p->prefetch_depth >= 0 && p->prefetch_depth <= 16, "prefetch_depth {} is out of range 0..16",
                p->prefetch_depth);
    LLM_REQUIRE(p->residency != LLM_RESIDENCY_BUDGET || p->ram_budget_bytes > 0,
                "LLM_RESIDENCY_BUDGET needs ram_budget_bytes > 0");
    o.store.residency = static_cast<Residency>(p->residency);
    o.store.budget_bytes = p->ram_budget_bytes;
    o.store.prefetch_depth = p->prefetch_depth;
    LLM_REQUIRE(p->page_cache >= LLM_PAGE_CACHE_KEEP && p->page_cache <= LLM_PAGE_CACHE_MAP,
                "llm_model_params.page_cache {} is not an LLM_PAGE_CACHE_* value", p->page_cache);
    o.store.cache = static_cast<CachePolicy>(p->page_cache);
    if (p->progress) {
        llm_progress_cb cb = p->progress;
        void *user = p->progress_user;
        o.progress = [cb, user](float f) { return cb(f, user); };
    }
    return o;
}

int32_t load(std::unique_ptr<WeightSource> src, const LoadOptions &o, llm_model **out) {
    auto model = Model::load(std::move(src), o);
    *out = new llm_model;
    (*out)->impl = std::shared_ptr<Model>(std::move(model));
    return LLM_OK;
}

// llm_model_load_io: io->close must run exactly once on every failure (see close_io for when it can be
// found); the ByteSource owns it from its construction on.
int32_t load_io(const llm_io *io, const llm_model_params *p, llm_model **out) {
    bool closed_by_source = false;
    int32_t st = guard([&] {
        if (out) *out = nullptr;
        LLM_REQUIRE(io && out, "llm_model_load_io: io and out must not be NULL");
        check_io(*io, "llm_io");
        const LoadOptions o = load_options(p);
        std::unique_ptr<ByteSource> bytes = make_io_source(*io);
        closed_by_source = true;
        return load(WeightSource::open(std::move(bytes)), o, out);
    });
    if (st != LLM_OK && !closed_by_source) close_io(io);
    return st;
}

// A split model through the host's callbacks, one llm_io per shard. Each ios[k] that can be found
// (io_at) is closed exactly once: by its ByteSource from the moment that is made (the first `taken`
// of them), else here when the load fails.
int32_t load_io_split(const llm_io *ios, size_t n_io, const llm_model_params *p, llm_model **out) {
    size_t taken = 0;
    int32_t st = guard([&] {
        if (out) *out = nullptr;
        LLM_REQUIRE(ios && n_io > 0 && out, "llm_model_load_io_split: ios and out must not be NULL, n_io must be > 0");
        for (size_t k = 0; k < n_io; ++k) {
            const std::string what = fmt::format("ios[{}]", k);
            check_io(*io_at(ios, k), what);
            LLM_REQUIRE(io_at(ios, k)->version == ios[0].version, "{}.version {} differs from ios[0].version {}", what,
                        io_at(ios, k)->version, ios[0].version);
        }
        const LoadOptions o = load_options(p);
        return load(WeightSource::open(make_io_sources(ios, n_io, &taken)), o, out);
    });
    if (st != LLM_OK && ios) {
        for (size_t k = taken; k < n_io; ++k)
            if (const llm_io *io = io_at(ios, k)) close_io(io);
    }
    return st;
}

// Each thread keeps the string it was last given per model, so the pointer stays valid until that
// thread asks again about the same model even if another thread's call replaced m->info. Entries of
// freed models are dropped by the next call on this thread.
const char *info_text(const llm_model *m) {
    struct Held {
        std::weak_ptr<const Model> model;
        const llm_model *handle;
        std::shared_ptr<const std::string> text;
    };
    thread_local std::vector<Held> held;
    auto *mm = const_cast<llm_model *>(m);  // the cached text is not part of the model's state
    std::shared_ptr<const std::string> text;
    {
        std::lock_guard<std::mutex> lock(mm->meta_mu);
        std::string now = m->impl->info_json();
        if (!mm->info || *mm->info != now) mm->info = std::make_shared<const std::string>(std::move(now));
        text = mm->info;
    }
    std::erase_if(held, [&](const Held &h) { return h.handle == m || h.model.expired(); });
    held.push_back(Held{m->impl, m, text});
    return text->c_str();
}

int32_t set_ram_budget(llm_model *m, uint64_t bytes) {
    LLM_REQUIRE(m, "llm_model_set_ram_budget: model is NULL");
    LLM_REQUIRE(!m->impl->vocab_only(), "llm_model_set_ram_budget: the model was loaded vocab-only");
    std::lock_guard<std::mutex> lock(m->meta_mu);
    m->impl->set_ram_budget(bytes);
    return LLM_OK;
}

int32_t memory_plan(const llm_model *m, int32_t n_ctx, llm_memory_plan *out) {
    LLM_REQUIRE(m && out, "llm_model_memory_plan: model and out must not be NULL");
    versioned_size<llm_memory_plan>(out->version);
    LLM_REQUIRE(!m->impl->vocab_only(), "llm_model_memory_plan: the model was loaded vocab-only");
    MemoryPlan p;
    {
        std::lock_guard<std::mutex> lock(const_cast<llm_model *>(m)->meta_mu);
        p = m->impl->memory_plan(n_ctx, kDefaultKvType, kDefaultKvType);  // llm.h: for the default types
    }
    llm_memory_plan r{};
    r.n_layer = p.n_layer;
    r.n_resident_layers = p.n_resident_layers;
    r.n_stream_slots = p.n_stream_slots;
    r.resident_block_bytes = p.resident_block_bytes;
    r.stream_slot_bytes = p.stream_slot_bytes;
    r.lm_head_bytes = p.lm_head_bytes;
    r.embedding_bytes = p.embedding_bytes;
    r.kv_cache_bytes = p.kv_cache_bytes;
    r.scratch_bytes = p.scratch_bytes;
    r.total_bytes = p.total_bytes;
    r.minimum_weight_bytes = p.minimum_weight_bytes;
    write_versioned(out, r);
    return LLM_OK;
}

// ---- metadata and chat templates ------------------------------------------------------------------

// Strings out (llm.h): the bytes and a NUL when cap > size, *len (may be NULL) the size either way.
int32_t copy_string(const std::string &s, char *buf, size_t cap, size_t *len, const char *what) {
    if (len) *len = s.size();
    if (s.size() >= cap) fail(LLM_ERR_BUFFER_TOO_SMALL, "{}: {} bytes and a NUL do not fit in {}", what, s.size(), cap);
    std::memcpy(buf, s.data(), s.size());
    buf[s.size()] = '\0';
    return LLM_OK;
}

int32_t apply_template(const llm_model *m, const char *tmpl, const llm_chat_message *msgs, size_t n_msgs,
                       bool add_assistant, char *buf, size_t cap, size_t *len) {
    LLM_REQUIRE(m || tmpl, "llm_chat_apply_template: a template is needed when the model is NULL");
    LLM_REQUIRE(msgs || n_msgs == 0, "llm_chat_apply_template: msgs is NULL with n_msgs {}", n_msgs);
    std::vector<jinja::ChatMessage> conv;
    conv.reserve(n_msgs);
    for (size_t i = 0; i < n_msgs; ++i) {
        LLM_REQUIRE(msgs[i].role && msgs[i].content, "llm_chat_apply_template: msgs[{}] has a NULL {}", i,
                    msgs[i].role ? "content" : "role");
        conv.push_back(jinja::ChatMessage{msgs[i].role, msgs[i].content});
    }
    const std::string source = tmpl ? std::string(tmpl) : chat_template(m->impl->source().meta(), "");
    const ChatSpecials specials = m ? chat_specials(*m->impl) : ChatSpecials{};
    return copy_string(render_chat(source, conv, add_assistant, specials), buf, cap, len, "llm_chat_apply_template");
}

int32_t apply_template_json(const llm_model *m, const char *tmpl, const char *request_json, char *buf, size_t cap,
                            size_t *len) {
    LLM_REQUIRE(m || tmpl, "llm_chat_apply_template_json: a template is needed when the model is NULL");
    LLM_REQUIRE(request_json, "llm_chat_apply_template_json: request_json is NULL");
    const std::string source = tmpl ? std::string(tmpl) : chat_template(m->impl->source().meta(), "");
    const ChatSpecials specials = m ? chat_specials(*m->impl) : ChatSpecials{};
    return copy_string(render_chat_request(source, std::string_view(request_json), specials), buf, cap, len,
                       "llm_chat_apply_template_json");
}

int32_t chat_parse(const llm_model *m, const char *tmpl, const char *raw, const char *params_json, char *buf,
                   size_t cap, size_t *len) {
    LLM_REQUIRE(m || tmpl, "llm_chat_parse: a template is needed when the model is NULL");
    LLM_REQUIRE(raw, "llm_chat_parse: raw is NULL");
    const std::string source = tmpl ? std::string(tmpl) : chat_template(m->impl->source().meta(), "");
    const ChatSpecials specials = m ? chat_specials(*m->impl) : ChatSpecials{};
    const std::string out =
        chat::parse_output_json(source, raw, params_json ? std::string_view(params_json) : std::string_view("{}"),
                                specials);
    return copy_string(out, buf, cap, len, "llm_chat_parse");
}

// ---- tokenizer ------------------------------------------------------------------------------------

// The "needed size" protocol: *n_out is always the full size; too small a buffer is an error.
int32_t tokenize(const llm_model *m, std::string_view text, bool add_bos, bool parse_special, int32_t *tokens,
                 int32_t cap, int32_t *n_out) {
    std::vector<int32_t> ids = m->impl->tokenizer().encode(text, add_bos, parse_special);
    LLM_REQUIRE(ids.size() <= static_cast<size_t>(INT32_MAX), "llm_tokenize: text too long");
    *n_out = static_cast<int32_t>(ids.size());
    if (ids.size() > static_cast<size_t>(cap)) {
        fail(LLM_ERR_BUFFER_TOO_SMALL, "llm_tokenize: {} tokens do not fit in {}", ids.size(), cap);
    }
    std::copy(ids.begin(), ids.end(), tokens);
    return LLM_OK;
}

int32_t token_to_piece(const llm_model *m, int32_t token, char *buf, size_t cap, size_t *len_out) {
    LLM_REQUIRE(token >= 0 && token < m->impl->tokenizer().n_vocab(), "token id {} is out of range", token);
    std::string piece = m->impl->tokenizer().piece(token);
    *len_out = piece.size();
    if (piece.size() > cap) fail(LLM_ERR_BUFFER_TOO_SMALL, "piece of {} bytes does not fit in {}", piece.size(), cap);
    std::copy(piece.begin(), piece.end(), buf);
    return LLM_OK;
}

// ---- session --------------------------------------------------------------------------------------

SessionOptions session_options(const llm_session_params *caller) {
    const llm_session_params params = read_versioned(caller, default_session_params());
    const llm_session_params *p = &params;
    LLM_REQUIRE(p->n_ctx <= (1 << 24), "n_ctx {} is too large", p->n_ctx);
    LLM_REQUIRE(p->repeat_last_n >= 0, "repeat_last_n must be >= 0");
    LLM_REQUIRE(p->temperature == p->temperature && p->top_p == p->top_p && p->min_p == p->min_p &&
                    p->repeat_penalty > 0.0f && std::isfinite(p->presence_penalty) &&
                    std::isfinite(p->frequency_penalty),
                "sampling parameters must be finite numbers and repeat_penalty > 0");
    auto kv_type = [](int32_t t, const char *field) {
        LLM_REQUIRE(t >= LLM_KV_F32 && t <= LLM_KV_Q8_0, "{} {} is not an LLM_KV_* type", field, t);
        return static_cast<KvType>(t);
    };
    LLM_REQUIRE(p->n_keep >= 0, "n_keep must be >= 0");
    SessionOptions o;
    o.parse_special = p->parse_special;
    o.kv_type_k = kv_type(p->kv_type_k, "kv_type_k");
    o.kv_type_v = kv_type(p->kv_type_v, "kv_type_v");
    o.context_shift = p->context_shift;
    o.n_keep = p->n_keep;
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
    o.sampling.presence_penalty = p->presence_penalty;
    o.sampling.frequency_penalty = p->frequency_penalty;
    return o;
}

int32_t create_session(llm_model *m, const llm_session_params *p, llm_session **out) {
    auto session = std::make_unique<Session>(*m->impl, session_options(p));
    *out = new llm_session{m->impl, std::move(session), {}, {}};
    return LLM_OK;
}

int32_t session_logits(llm_session *s, int64_t row, const float **out, int32_t *n_vocab) {
    *out = s->impl->logits(row);
    *n_vocab = static_cast<int32_t>(s->impl->model().config().n_vocab);
    return LLM_OK;
}

int32_t generate(llm_session *s, const char *prompt, int32_t max_tokens, llm_token_cb on_token, void *user) {
    Session::TokenFn cb;
    if (on_token)
        cb = [&](int32_t t, const std::string &piece) { return on_token(t, piece.data(), piece.size(), user); };
    return s->impl->generate(prompt ? std::string_view(prompt) : std::string_view(), max_tokens, cb);
}

// llm_session_next: one Session::next() step, its piece copied out under the "needed size" protocol
// (the token is accepted even when the piece does not fit).
int32_t next(llm_session *s, int32_t *token, char *piece, size_t cap, size_t *len) {
    const Session::Step step = s->impl->next();
    *token = step.token;
    if (len) *len = step.piece.size();
    if (step.piece.size() > cap) {
        // Text of a stop-string session, or the last text of a generation, cannot be asked for again
        // (llm_token_to_piece gives only whole tokens' pieces): it stays held for llm_session_flush_held.
        if (piece && (step.status != LLM_OK || s->impl->has_stop())) s->impl->keep_held(step.piece);
        if (piece) fail(LLM_ERR_BUFFER_TOO_SMALL, "piece of {} bytes does not fit in {}", step.piece.size(), cap);
        return step.status;
    }
    std::copy(step.piece.begin(), step.piece.end(), piece);
    return step.status;
}

int32_t set_stop(llm_session *s, const char *const *stops, size_t n) {
    LLM_REQUIRE(stops || n == 0, "llm_session_set_stop: stops is NULL with n {}", n);
    std::vector<std::string> list;
    for (size_t i = 0; i < n; ++i) {
        LLM_REQUIRE(stops[i], "llm_session_set_stop: stops[{}] is NULL", i);
        list.emplace_back(stops[i]);
    }
    s->impl->set_stop(std::move(list));
    return LLM_OK;
}

llm_logprobs_params default_logprobs_params() {
    llm_logprobs_params p{};
    p.version = LLM_LOGPROBS_PARAMS_VERSION;
    return p;
}

int32_t set_logprobs(llm_session *s, const llm_logprobs_params *p) {
    if (!p) {
        s->impl->set_logprobs(-1, {});
        return LLM_OK;
    }
    const llm_logprobs_params v = read_versioned(p, default_logprobs_params());
    LLM_REQUIRE(v.n_top >= 0 && v.n_top <= Session::kMaxTopLogprobs, "llm_logprobs_params.n_top {} is not in 0..{}",
                v.n_top, Session::kMaxTopLogprobs);
    Session::LogprobsFn fn;
    if (v.on_token) {
        fn = [cb = v.on_token, user = v.user](const StepLogprobs &st) {
            cb(st.token, st.logprob, reinterpret_cast<const llm_token_logprob *>(st.top.data()),
               static_cast<int32_t>(st.top.size()), user);
        };
    }
    s->impl->set_logprobs(v.n_top, std::move(fn));
    return LLM_OK;
}

int32_t logprobs(const llm_session *s, int32_t *token, float *logprob, const llm_token_logprob **top, int32_t *n_top) {
    const StepLogprobs *st = s->impl->last_logprobs();
    LLM_REQUIRE(st,
                "llm_session_logprobs: log-probabilities are off (llm_session_set_logprobs) or nothing was "
                "sampled since they were turned on");
    if (token) *token = st->token;
    if (logprob) *logprob = st->logprob;
    if (top) *top = reinterpret_cast<const llm_token_logprob *>(st->top.data());
    if (n_top) *n_top = static_cast<int32_t>(st->top.size());
    return LLM_OK;
}

int32_t set_logit_bias(llm_session *s, const int32_t *tokens, const float *bias, size_t n) {
    LLM_REQUIRE((tokens && bias) || n == 0, "llm_session_set_logit_bias: tokens or bias is NULL with n {}", n);
    std::vector<std::pair<int32_t, float>> map;
    for (size_t i = 0; i < n; ++i) map.emplace_back(tokens[i], bias[i]);
    s->impl->set_logit_bias(std::move(map));
    return LLM_OK;
}

int32_t flush_held(llm_session *s, char *buf, size_t cap, size_t *len) {
    std::string text = s->impl->flush_held();
    *len = text.size();
    if (text.size() > cap) {
        s->impl->keep_held(text);
        fail(LLM_ERR_BUFFER_TOO_SMALL, "held text of {} bytes does not fit in {}", text.size(), cap);
    }
    std::copy(text.begin(), text.end(), buf);
    return LLM_OK;
}

// llm_session_load_io: size and read_at on this thread (the flags, which only say where the
// callbacks may run, are ignored), and close exactly once before returning, whatever happens. The
// ByteSource owns close from its construction on.
int32_t load_state_io(llm_session *s, const llm_io *io) {
    bool closed_by_source = false;
    const int32_t st = guard_session(s, [&] {
        LLM_REQUIRE(s && io, "llm_session_load_io: session and io must not be NULL");
        LLM_REQUIRE(io->version >= 1 && io->version <= LLM_IO_VERSION,
                    "llm_io.version {} is not supported (this library: 1..{})", io->version, LLM_IO_VERSION);
        LLM_REQUIRE(io->size && io->read_at, "llm_io.size and llm_io.read_at must not be NULL");
        closed_by_source = true;
        std::unique_ptr<ByteSource> in = make_io_source(*io);
        s->impl->load(*in);
        return LLM_OK;
    });
    if (!closed_by_source) close_io(io);
    return st;
}

// llm_stats holds the counters of LLM_SESSION_STATS marked kStatsPublic, all 8 bytes wide: a
// field added to one side only fails here.
#define LLM_STATS_PUBLIC_SIZE(type, name, where) +(stats_in(where, kStatsPublic) ? sizeof(type) : 0)
static_assert(offsetof(llm_stats, prompt_tokens) LLM_SESSION_STATS(LLM_STATS_PUBLIC_SIZE) == sizeof(llm_stats),
              "llm_stats and LLM_SESSION_STATS list different counters");
#undef LLM_STATS_PUBLIC_SIZE

void fill_stats(llm_stats *out, const SessionStats &st) {
    if (!out) return;
    llm_stats o{};
    // A generic lambda, so that `to.name` is only compiled for the counters llm_stats has.
    const auto copy = [&st](auto &to) {
#define LLM_STATS_COPY(type, name, where) \
    if constexpr (stats_in(where, kStatsPublic)) to.name = st.name;
        LLM_SESSION_STATS(LLM_STATS_COPY)
#undef LLM_STATS_COPY
    };
    copy(o);
    write_versioned(out, o);
}

int32_t stats(const llm_session *s, llm_stats *total, llm_stats *last_call) {
    // Both versions are checked first, so a bad last_call leaves total untouched too.
    if (total) versioned_size<llm_stats>(total->version);
    if (last_call) versioned_size<llm_stats>(last_call->version);
    fill_stats(total, s->impl->stats());
    fill_stats(last_call, s->impl->last_call_stats());
    return LLM_OK;
}

llm_speculation_params default_speculation_params() {
    llm_speculation_params p{};
    p.version = LLM_SPECULATION_PARAMS_VERSION;
    p.draft = nullptr;
    p.n_draft = 8;
    p.lookup_ngram = 0;
    p.draft_p_min = 0.0f;
    return p;
}

int32_t set_speculation(llm_session *s, const llm_speculation_params *p) {
    SpeculationOptions o;
    if (p) {
        const llm_speculation_params v = read_versioned(p, default_speculation_params());
        if (v.draft) o.draft = v.draft->impl;
        o.n_draft = v.n_draft;
        o.lookup_ngram = v.lookup_ngram;
        o.draft_p_min = v.draft_p_min;
    }
    s->impl->set_speculation(o);
    return LLM_OK;
}

// llm_session_next_batch: the arguments are checked here, before any session changes.
int32_t next_batch(llm_session *const *sessions, int32_t n, int32_t *tokens, int32_t *statuses) {
    LLM_REQUIRE(sessions && tokens && statuses,
                "llm_session_next_batch: sessions, tokens and statuses must not be NULL");
    LLM_REQUIRE(n >= 1, "llm_session_next_batch: n is {} (need >= 1)", n);
    std::vector<Session *> batch;
    batch.reserve(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) {
        LLM_REQUIRE(sessions[i], "llm_session_next_batch: sessions[{}] is NULL", i);
        LLM_REQUIRE(sessions[i]->model == sessions[0]->model,
                    "llm_session_next_batch: sessions[{}] runs another model than sessions[0]", i);
        for (int32_t j = 0; j < i; ++j)
            LLM_REQUIRE(sessions[j] != sessions[i], "llm_session_next_batch: sessions[{}] repeats sessions[{}]", i, j);
        batch.push_back(sessions[i]->impl.get());
    }
    Session::next_batch(batch, tokens, statuses);
    return LLM_OK;
}

// ---- embeddings ----------------------------------------------------------------------------------

llm_embed_params default_embed_params() {
    llm_embed_params p{};
    p.version = LLM_EMBED_PARAMS_VERSION;
    p.pooling = LLM_POOLING_UNSPECIFIED;
    p.normalize = false;
    p.add_bos = true;
    p.parse_special = true;
    return p;
}

// Both entry points: sizes first (the "needed size" protocol before anything is evaluated).
int32_t embed(llm_session *s, std::vector<std::vector<int32_t>> inputs, const llm_embed_params &p, float *out,
              size_t cap, size_t *n_out, int32_t *n_dim, int32_t *n_rows) {
    const Model &m = s->impl->model();
    const Pooling pool = resolve_pooling(m, p.pooling);
    const int64_t dim = pooled_dim(m, pool);
    size_t total = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
        LLM_REQUIRE(!inputs[i].empty(), "llm_session_embed: input {} is empty", i);
        total += static_cast<size_t>(pooled_rows(pool, static_cast<int64_t>(inputs[i].size())) * dim);
    }
    *n_out = total;
    if (n_dim) *n_dim = static_cast<int32_t>(dim);
    if (n_rows)
        for (size_t i = 0; i < inputs.size(); ++i)
            n_rows[i] = static_cast<int32_t>(pooled_rows(pool, static_cast<int64_t>(inputs[i].size())));
    if (cap < total || !out)
        fail(LLM_ERR_BUFFER_TOO_SMALL, "llm_session_embed: {} floats do not fit in {}", total, out ? cap : 0);
    s->impl->embed(inputs, static_cast<int32_t>(pool), p.normalize, out);
    return LLM_OK;
}

int32_t embed_texts(llm_session *s, const char *const *texts, size_t n, const llm_embed_params *caller, float *out,
                    size_t cap, size_t *n_out, int32_t *n_dim, int32_t *n_rows) {
    LLM_REQUIRE(s && texts && n_out, "llm_session_embed: session, texts and n_out must not be NULL");
    LLM_REQUIRE(n >= 1, "llm_session_embed: n_texts is 0");
    const llm_embed_params p = read_versioned(caller, default_embed_params());
    const Tokenizer &tok = s->impl->model().tokenizer();
    std::vector<std::vector<int32_t>> inputs(n);
    for (size_t i = 0; i < n; ++i) {
        LLM_REQUIRE(texts[i], "llm_session_embed: texts[{}] is NULL", i);
        LLM_REQUIRE(texts[i][0] != '\0', "llm_session_embed: texts[{}] is empty", i);
        inputs[i] = tok.encode(texts[i], p.add_bos, p.parse_special);
        LLM_REQUIRE(!inputs[i].empty(), "llm_session_embed: texts[{}] gives no tokens", i);
    }
    return embed(s, std::move(inputs), p, out, cap, n_out, n_dim, n_rows);
}

int32_t embed_tokens(llm_session *s, const int32_t *const *tokens, const size_t *n_tokens, size_t n,
                     const llm_embed_params *caller, float *out, size_t cap, size_t *n_out, int32_t *n_dim,
                     int32_t *n_rows) {
    LLM_REQUIRE(s && tokens && n_tokens && n_out,
                "llm_session_embed_tokens: session, tokens, n_tokens and n_out must not be NULL");
    LLM_REQUIRE(n >= 1, "llm_session_embed_tokens: n_inputs is 0");
    const llm_embed_params p = read_versioned(caller, default_embed_params());
    std::vector<std::vector<int32_t>> inputs(n);
    for (size_t i = 0; i < n; ++i) {
        LLM_REQUIRE(tokens[i] && n_tokens[i] >= 1, "llm_session_embed_tokens: input {} is NULL or empty", i);
        LLM_REQUIRE(n_tokens[i] <= static_cast<size_t>(INT32_MAX), "llm_session_embed_tokens: input {} is too long", i);
        inputs[i].assign(tokens[i], tokens[i] + n_tokens[i]);
    }
    return embed(s, std::move(inputs), p, out, cap, n_out, n_dim, n_rows);
}

// For the calls that return a string rather than a status: `fallback` when f fails (the reason is in
// llm_last_error()).
template <typename F>
const char *guard_text(const char *fallback, F &&f) noexcept {
    const char *text = fallback;
    guard([&] {
        text = f();
        return LLM_OK;
    });
    return text;
}

// For the calls with no status to return: a failure only sets llm_last_error().
template <typename F>
void guard_void(F &&f) noexcept {
    guard([&] {
        f();
        return LLM_OK;
    });
}

}  // namespace

extern "C" {

LLM_API const char *llm_version_string(void) {
    return LLM_STR(LLM_VERSION_MAJOR) "." LLM_STR(LLM_VERSION_MINOR) "." LLM_STR(LLM_VERSION_PATCH);
}

LLM_API const char *llm_status_string(int32_t status) { return status_string(status); }

LLM_API const char *llm_last_error(void) { return g_last_error.c_str(); }

LLM_API const char *llm_session_last_error(const llm_session *s) { return s ? s->error.c_str() : ""; }

LLM_API void llm_set_log_callback(llm_log_cb cb, void *user) {
    guard_void([&] { set_log_callback(cb, user); });
}

LLM_API void llm_set_log_level(int32_t level) {
    guard_void([&] { set_log_level(level); });
}

// ---- model ----------------------------------------------------------------------------------------

LLM_API int32_t llm_model_params_init(llm_model_params *p, uint32_t version) {
    return guard([&] { return init_versioned(p, version, default_model_params()); });
}

LLM_API int32_t llm_model_load(const char *path, const llm_model_params *p, llm_model **out) {
    return guard([&] {
        if (out) *out = nullptr;
        LLM_REQUIRE(path && out, "llm_model_load: path and out must not be NULL");
        const LoadOptions o = load_options(p);
        return load(WeightSource::open_file(path), o, out);  // a split model's first shard brings the rest
    });
}

LLM_API int32_t llm_model_load_io(const llm_io *io, const llm_model_params *p, llm_model **out) {
    return load_io(io, p, out);
}

LLM_API int32_t llm_model_load_io_split(const llm_io *ios, size_t n_io, const llm_model_params *p, llm_model **out) {
    return load_io_split(ios, n_io, p, out);
}

LLM_API void llm_model_free(llm_model *m) { delete m; }

LLM_API const char *llm_model_info_json(const llm_model *m) {
    return m ? guard_text("{}", [&] { return info_text(m); }) : nullptr;
}

LLM_API int32_t llm_model_set_ram_budget(llm_model *m, uint64_t bytes) {
    return guard([&] { return set_ram_budget(m, bytes); });
}

LLM_API int32_t llm_memory_plan_init(llm_memory_plan *p, uint32_t version) {
    return guard([&] { return init_versioned(p, version, llm_memory_plan{}); });
}

LLM_API int32_t llm_model_memory_plan(const llm_model *m, int32_t n_ctx, llm_memory_plan *out) {
    return guard([&] { return memory_plan(m, n_ctx, out); });
}

LLM_API int32_t llm_model_n_vocab(const llm_model *m) { return m ? m->impl->tokenizer().n_vocab() : 0; }
LLM_API int32_t llm_model_token_bos(const llm_model *m) { return m ? m->impl->tokenizer().bos() : -1; }
LLM_API int32_t llm_model_token_eos(const llm_model *m) { return m ? m->impl->tokenizer().eos() : -1; }
LLM_API bool llm_model_token_is_eog(const llm_model *m, int32_t token) {
    return m && token >= 0 && token < m->impl->tokenizer().n_vocab() && m->impl->tokenizer().is_eog(token);
}

// ---- metadata and chat templates ------------------------------------------------------------------

LLM_API int32_t llm_model_meta_string(const llm_model *m, const char *key, char *buf, size_t cap, size_t *len) {
    return guard([&] {
        LLM_REQUIRE(m && key, "llm_model_meta_string: model and key must not be NULL");
        LLM_REQUIRE(buf || cap == 0, "llm_model_meta_string: buf is NULL with cap {}", cap);
        return copy_string(meta_text(m->impl->source().meta(), key), buf, cap, len, "llm_model_meta_string");
    });
}

LLM_API int32_t llm_model_chat_template(const llm_model *m, const char *name, char *buf, size_t cap, size_t *len) {
    return guard([&] {
        LLM_REQUIRE(m, "llm_model_chat_template: model is NULL");
        LLM_REQUIRE(buf || cap == 0, "llm_model_chat_template: buf is NULL with cap {}", cap);
        return copy_string(chat_template(m->impl->source().meta(), name ? name : ""), buf, cap, len,
                           "llm_model_chat_template");
    });
}

LLM_API int32_t llm_chat_apply_template(const llm_model *m, const char *tmpl, const llm_chat_message *msgs,
                                        size_t n_msgs, bool add_assistant, char *buf, size_t cap, size_t *len) {
    return guard([&] {
        LLM_REQUIRE(buf || cap == 0, "llm_chat_apply_template: buf is NULL with cap {}", cap);
        return apply_template(m, tmpl, msgs, n_msgs, add_assistant, buf, cap, len);
    });
}

LLM_API int32_t llm_chat_apply_template_json(const llm_model *m, const char *tmpl, const char *request_json,
                                             char *buf, size_t cap, size_t *len) {
    return guard([&] {
        LLM_REQUIRE(buf || cap == 0, "llm_chat_apply_template_json: buf is NULL with cap {}", cap);
        return apply_template_json(m, tmpl, request_json, buf, cap, len);
    });
}

LLM_API int32_t llm_chat_parse(const llm_model *m, const char *tmpl, const char *raw, const char *params_json,
                               char *buf, size_t cap, size_t *len) {
    return guard([&] {
        LLM_REQUIRE(buf || cap == 0, "llm_chat_parse: buf is NULL with cap {}", cap);
        return chat_parse(m, tmpl, raw, params_json, buf, cap, len);
    });
}

// ---- tokenizer ------------------------------------------------------------------------------------

LLM_API int32_t llm_tokenize(const llm_model *m, const char *text, size_t len, bool add_bos, bool parse_special,
                             int32_t *tokens, int32_t cap, int32_t *n_out) {
    return guard([&] {
        LLM_REQUIRE(m && n_out, "llm_tokenize: model and n_out must not be NULL");
        LLM_REQUIRE(text || len == 0, "llm_tokenize: text is NULL");
        LLM_REQUIRE(cap >= 0 && (tokens || cap == 0), "llm_tokenize: tokens is NULL with cap {}", cap);
        return tokenize(m, std::string_view(text ? text : "", len), add_bos, parse_special, tokens, cap, n_out);
    });
}

LLM_API int32_t llm_token_to_piece(const llm_model *m, int32_t token, char *buf, size_t cap, size_t *len_out) {
    return guard([&] {
        LLM_REQUIRE(m && len_out, "llm_token_to_piece: model and len_out must not be NULL");
        LLM_REQUIRE(buf || cap == 0, "llm_token_to_piece: buf is NULL with cap {}", cap);
        return token_to_piece(m, token, buf, cap, len_out);
    });
}

// ---- session --------------------------------------------------------------------------------------

LLM_API int32_t llm_session_params_init(llm_session_params *p, uint32_t version) {
    return guard([&] { return init_versioned(p, version, default_session_params()); });
}

LLM_API int32_t llm_session_create(llm_model *m, const llm_session_params *p, llm_session **out) {
    return guard([&] {
        if (out) *out = nullptr;
        LLM_REQUIRE(m && out, "llm_session_create: model and out must not be NULL");
        return create_session(m, p, out);
    });
}

LLM_API void llm_session_free(llm_session *s) { delete s; }

LLM_API int32_t llm_session_reset(llm_session *s) {
    return guard_session(s, [&] {
        LLM_REQUIRE(s, "llm_session_reset: session is NULL");
        s->impl->reset();
        return LLM_OK;
    });
}

LLM_API int32_t llm_session_n_past(const llm_session *s) { return s ? s->impl->n_past() : 0; }

LLM_API int32_t llm_session_truncate(llm_session *s, int32_t n_past) {
    return guard_session(s, [&] {
        LLM_REQUIRE(s, "llm_session_truncate: session must not be NULL");
        s->impl->truncate(n_past);
        return LLM_OK;
    });
}

LLM_API int32_t llm_session_tokens(const llm_session *s, int32_t *tokens, int32_t cap, int32_t *n_out) {
    return guard_session(s, [&] {
        LLM_REQUIRE(s && n_out && cap >= 0 && (tokens || cap == 0),
                    "llm_session_tokens: session and n_out must not be NULL, tokens NULL only with cap 0");
        const std::vector<int32_t> &t = s->impl->tokens();
        *n_out = static_cast<int32_t>(t.size());
        if (t.size() > static_cast<size_t>(cap)) {
            fail(LLM_ERR_BUFFER_TOO_SMALL, "llm_session_tokens: {} tokens do not fit in {}", t.size(), cap);
        }
        std::copy(t.begin(), t.end(), tokens);
        return LLM_OK;
    });
}

LLM_API int32_t llm_session_prefill(llm_session *s, const int32_t *tokens, size_t n) {
    return guard_session(s, [&] {
        LLM_REQUIRE(s && tokens && n > 0, "llm_session_prefill: session and tokens must not be NULL, n > 0");
        s->impl->prefill(tokens, n);
        return LLM_OK;
    });
}

LLM_API int32_t llm_session_logits(llm_session *s, const float **out, int32_t *n_vocab) {
    return guard_session(s, [&] {
        LLM_REQUIRE(s && out && n_vocab, "llm_session_logits: arguments must not be NULL");
        return session_logits(s, -1, out, n_vocab);
    });
}

LLM_API int32_t llm_session_logits_ith(llm_session *s, int32_t i, const float **out, int32_t *n_vocab) {
    return guard_session(s, [&] {
        LLM_REQUIRE(s && out && n_vocab, "llm_session_logits_ith: arguments must not be NULL");
        LLM_REQUIRE(i >= 0, "llm_session_logits_ith: row {} is negative", i);
        return session_logits(s, i, out, n_vocab);
    });
}

LLM_API int32_t llm_session_sample(llm_session *s, int32_t *token) {
    return guard_session(s, [&] {
        LLM_REQUIRE(s && token, "llm_session_sample: arguments must not be NULL");
        *token = s->impl->sample();
        return LLM_OK;
    });
}

LLM_API int32_t llm_session_accept(llm_session *s, int32_t token) {
    return guard_session(s, [&] {
        LLM_REQUIRE(s, "llm_session_accept: session is NULL");
        s->impl->accept(token);
        return LLM_OK;
    });
}

LLM_API int32_t llm_session_generate(llm_session *s, const char *prompt, int32_t max_tokens, llm_token_cb on_token,
                                     void *user) {
    return guard_session(s, [&] {
        LLM_REQUIRE(s, "llm_session_generate: session is NULL");
        LLM_REQUIRE(max_tokens >= 0, "llm_session_generate: max_tokens {} is negative", max_tokens);
        return generate(s, prompt, max_tokens, on_token, user);
    });
}

LLM_API int32_t llm_session_next(llm_session *s, int32_t *token, char *piece, size_t cap, size_t *len) {
    return guard_session(s, [&] {
        LLM_REQUIRE(s && token, "llm_session_next: session and token must not be NULL");
        LLM_REQUIRE(piece || cap == 0, "llm_session_next: piece is NULL with cap {}", cap);
        return next(s, token, piece, cap, len);
    });
}

LLM_API void llm_session_cancel(llm_session *s) {
    if (s) s->impl->cancel();
}

LLM_API int32_t llm_session_save(llm_session *s, const char *path) {
    return guard_session(s, [&] {
        LLM_REQUIRE(s && path, "llm_session_save: session and path must not be NULL");
        save_state_file(*s->impl, path);
        return LLM_OK;
    });
}

LLM_API int32_t llm_session_save_io(llm_session *s, const llm_writer *w) {
    return guard_session(s, [&] {
        LLM_REQUIRE(s && w, "llm_session_save_io: session and writer must not be NULL");
        std::unique_ptr<StateSink> sink = writer_sink(*w);
        s->impl->save(*sink);
        return LLM_OK;
    });
}

LLM_API int32_t llm_session_load(llm_session *s, const char *path) {
    return guard_session(s, [&] {
        LLM_REQUIRE(s && path, "llm_session_load: session and path must not be NULL");
        load_state_file(*s->impl, path);
        return LLM_OK;
    });
}

LLM_API int32_t llm_session_load_io(llm_session *s, const llm_io *io) { return load_state_io(s, io); }

LLM_API int32_t llm_stats_init(llm_stats *p, uint32_t version) {
    return guard([&] { return init_versioned(p, version, llm_stats{}); });
}

LLM_API int32_t llm_session_stats(const llm_session *s, llm_stats *total, llm_stats *last_call) {
    return guard_session(s, [&] {
        LLM_REQUIRE(s, "llm_session_stats: session is NULL");
        return stats(s, total, last_call);
    });
}

LLM_API int32_t llm_speculation_params_init(llm_speculation_params *p, uint32_t version) {
    return guard([&] { return init_versioned(p, version, default_speculation_params()); });
}

LLM_API int32_t llm_session_set_speculation(llm_session *s, const llm_speculation_params *p) {
    return guard_session(s, [&] {
        LLM_REQUIRE(s, "llm_session_set_speculation: session is NULL");
        return set_speculation(s, p);
    });
}

LLM_API int32_t llm_session_set_grammar(llm_session *s, const char *gbnf, const char *root) {
    return guard_session(s, [&] {
        LLM_REQUIRE(s, "llm_session_set_grammar: session is NULL");
        if (gbnf) {
            s->impl->set_grammar(gbnf, root ? root : "");
        } else {
            s->impl->clear_grammar();
        }
        return LLM_OK;
    });
}

LLM_API int32_t llm_session_set_json_schema(llm_session *s, const char *schema) {
    return guard_session(s, [&] {
        LLM_REQUIRE(s, "llm_session_set_json_schema: session is NULL");
        if (schema) {
            s->impl->set_json_schema(schema);
        } else {
            s->impl->clear_grammar();
        }
        return LLM_OK;
    });
}

LLM_API int32_t llm_session_set_stop(llm_session *s, const char *const *stops, size_t n) {
    return guard_session(s, [&] {
        LLM_REQUIRE(s, "llm_session_set_stop: session is NULL");
        return set_stop(s, stops, n);
    });
}

LLM_API int32_t llm_session_flush_held(llm_session *s, char *buf, size_t cap, size_t *len) {
    return guard_session(s, [&] {
        LLM_REQUIRE(s && len, "llm_session_flush_held: session and len must not be NULL");
        LLM_REQUIRE(buf || cap == 0, "llm_session_flush_held: buf is NULL with cap {}", cap);
        return flush_held(s, buf, cap, len);
    });
}

LLM_API int32_t llm_session_set_logit_bias(llm_session *s, const int32_t *tokens, const float *bias, size_t n) {
    return guard_session(s, [&] {
        LLM_REQUIRE(s, "llm_session_set_logit_bias: session is NULL");
        return set_logit_bias(s, tokens, bias, n);
    });
}

LLM_API int32_t llm_logprobs_params_init(llm_logprobs_params *p, uint32_t version) {
    return guard([&] { return init_versioned(p, version, default_logprobs_params()); });
}

LLM_API int32_t llm_session_set_logprobs(llm_session *s, const llm_logprobs_params *p) {
    return guard_session(s, [&] {
        LLM_REQUIRE(s, "llm_session_set_logprobs: session is NULL");
        return set_logprobs(s, p);
    });
}

LLM_API int32_t llm_session_logprobs(const llm_session *s, int32_t *token, float *logprob,
                                     const llm_token_logprob **top, int32_t *n_top) {
    return guard_session(s, [&] {
        LLM_REQUIRE(s, "llm_session_logprobs: session is NULL");
        return logprobs(s, token, logprob, top, n_top);
    });
}

LLM_API int32_t llm_session_next_batch(llm_session *const *sessions, int32_t n, int32_t *tokens, int32_t *statuses) {
    return guard([&] { return next_batch(sessions, n, tokens, statuses); });
}

LLM_API int32_t llm_model_pooling_type(const llm_model *m) {
    if (!m || m->impl->vocab_only()) return -1;
    int32_t p = -1;
    guard([&] {
        p = static_cast<int32_t>(resolve_pooling(*m->impl, LLM_POOLING_UNSPECIFIED));
        return LLM_OK;
    });
    return p;
}

LLM_API int32_t llm_embed_params_init(llm_embed_params *p, uint32_t version) {
    return guard([&] { return init_versioned(p, version, default_embed_params()); });
}

LLM_API int32_t llm_session_embed(llm_session *s, const char *const *texts, size_t n_texts, const llm_embed_params *p,
                                  float *out, size_t cap, size_t *n_out, int32_t *n_dim, int32_t *n_rows) {
    return guard_session(s, [&] { return embed_texts(s, texts, n_texts, p, out, cap, n_out, n_dim, n_rows); });
}

LLM_API int32_t llm_session_embed_tokens(llm_session *s, const int32_t *const *tokens, const size_t *n_tokens,
                                         size_t n_inputs, const llm_embed_params *p, float *out, size_t cap,
                                         size_t *n_out, int32_t *n_dim, int32_t *n_rows) {
    return guard_session(
        s, [&] { return embed_tokens(s, tokens, n_tokens, n_inputs, p, out, cap, n_out, n_dim, n_rows); });
}

LLM_API const char *llm_session_stats_json(llm_session *s) {
    return s ? guard_text("{}", [&] { return (s->stats = s->impl->stats_json()).c_str(); }) : nullptr;
}

}  // extern "C"
