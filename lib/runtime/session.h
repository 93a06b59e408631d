// A session: one conversation's KV cache, sampler and scratch on a shared model. Used by one thread
// at a time; cancel() may come from any thread and targets only the call in flight (see cancel()).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/thread_pool.h"
#include "loader/io_stats.h"
#include "loader/streamer.h"
#include "model/forward.h"
#include "model/kv_type.h"
#include "model/model.h"
#include "runtime/stop_strings.h"
#include "sampling/sampler.h"

namespace llm {

class ByteSource;
class StateSink;
class Speculator;
namespace grammar {
class Constraint;
}

struct SessionOptions {
    int32_t n_ctx = 0;           // <= 0: default_n_ctx(n_ctx_train) (model/limits.h)
    int32_t n_threads = 0;       // <= 0: the model's default
    bool logits_all = false;     // keep logits of every position of the last prefill
    bool parse_special = false;  // generate(): control-token text in the prompt becomes those tokens
    KvType kv_type_k = kDefaultKvType;
    KvType kv_type_v = kDefaultKvType;
    bool kv_ring = true;         // windowed layers keep only their window (false: n_ctx; tests compare the two)
    bool context_shift = false;  // drop the oldest positions after n_keep instead of CONTEXT_FULL
    int32_t n_keep = 0;
    SamplerParams sampling;
};

// Every session counter, once, as X(type, name, where). The list makes SessionStats, the per-call
// difference (last_call_stats), stats_json's keys and the fill of the public llm_stats; `where`:
//   kStatsPublic   a field of llm_stats (include/llm.h) of the same name and type
//   kStatsPerCall  also a key of stats_json's "last_call" object
#define LLM_SESSION_STATS(X)                                                                           \
    /* tokens evaluated by prefill; generated tokens committed to the context (accept, next, batch) */ \
    X(uint64_t, prompt_tokens, kStatsPublic | kStatsPerCall)                                           \
    X(uint64_t, generated_tokens, kStatsPublic | kStatsPerCall)                                        \
    X(double, prefill_seconds, kStatsPublic)                                                           \
    X(double, decode_seconds, kStatsPublic)                                                            \
    /* from the session's IoStats (Session::stats()) */                                                \
    X(uint64_t, bytes_read, kStatsPublic | kStatsPerCall)                                              \
    X(uint64_t, read_calls, kStatsPublic | kStatsPerCall)                                              \
    X(double, io_wait_seconds, kStatsPublic | kStatsPerCall)                                           \
    /* times the context was shifted to make room (context_shift) */                                   \
    X(uint64_t, context_shifts, 0)                                                                     \
    /* forward passes of the session's model (prefill chunk, accept, verify, batch) */                 \
    X(uint64_t, passes, kStatsPublic | kStatsPerCall)                                                  \
    /* tokens proposed by speculation; of those, the ones kept */                                      \
    X(uint64_t, drafted_tokens, kStatsPublic | kStatsPerCall)                                          \
    X(uint64_t, accepted_tokens, kStatsPublic | kStatsPerCall)                                         \
    /* grammar-constrained sampling: seconds in the grammar (checks, masks, state updates), tokens   */ \
    /* sampled under it, and of those the ones whose first draw it refused (whole vocabulary masked) */ \
    X(double, grammar_seconds, kStatsPerCall)                                                          \
    X(uint64_t, grammar_tokens, kStatsPerCall)                                                         \
    X(uint64_t, grammar_masks, kStatsPerCall)

enum StatsWhere : unsigned { kStatsPublic = 1, kStatsPerCall = 2 };
constexpr bool stats_in(unsigned where, StatsWhere w) { return (where & w) != 0; }

struct SessionStats {
#define LLM_STATS_FIELD(type, name, where) type name = 0;
    LLM_SESSION_STATS(LLM_STATS_FIELD)
#undef LLM_STATS_FIELD
};

// Speculative decoding (llm_session_set_speculation): off unless draft or lookup_ngram > 0.
struct SpeculationOptions {
    std::shared_ptr<const Model> draft;  // proposes tokens; vocabulary checked against the session's model
    int32_t n_draft = 8;                 // most tokens proposed per pass (1..64)
    int32_t lookup_ngram = 0;            // prompt lookup n-gram size; 0: off
    float draft_p_min = 0.0f;            // the draft stops when its top probability falls below this
};

// Log-probabilities of one sampled token (set_logprobs): from the log-softmax over the whole
// vocabulary of the logits with the bias and penalties applied (Sampler::adjusted), before the
// grammar mask, truncation (top-k/p, min-p) and temperature.
struct TokenLogprob {
    int32_t token;
    float logprob;
};
struct StepLogprobs {
    int32_t token = -1;
    float logprob = 0.0f;
    std::vector<TokenLogprob> top;  // the n_top most likely, most likely first (ties: lower id first)
};

class Session {
public:
    Session(const Model &m, const SessionOptions &opt);
    ~Session();

    void reset();
    int32_t n_past() const { return n_past_; }
    int32_t n_ctx() const { return kv_.n_ctx(); }
    // The tokens in the context, tokens()[i] at position i.
    const std::vector<int32_t> &tokens() const { return tokens_; }
    // Drops positions n..n_past-1 (0 <= n <= n_past); the sampler's history forgets them too. If a
    // windowed layer's ring no longer holds the positions before n that the next token attends to,
    // or a recurrent layer's state is past n (it cannot be cut back), the next evaluation first
    // recomputes the cache from tokens() (see restore_window()).
    void truncate(int32_t n);
    const KvCache &kv_cache() const { return kv_; }
    const SessionOptions &options() const { return opt_; }

    // Appends tokens and runs them. On any error the context is as before the call.
    void prefill(const int32_t *tokens, size_t n);
    void accept(int32_t token);
    // Last position's logits (or row i of the last prefill with logits_all).
    const float *logits(int64_t row = -1) const;
    int64_t logits_rows() const { return logits_rows_; }
    // Samples from the last logits; under a grammar, a token it allows (see set_grammar).
    int32_t sample();

    // Grammar-constrained sampling from the next token on: the generated tokens' text must stay a
    // prefix of the GBNF grammar's language, and end-of-generation comes only where it may end.
    // Throws INVALID_ARGUMENT (with line and column) for a grammar that does not parse; then the
    // grammar in use stays. reset() and load() start it over, truncate() rewinds it.
    void set_grammar(std::string_view gbnf, std::string_view root);
    // The grammar of a JSON schema (grammar/json_schema.h); throws as json_schema_to_gbnf does.
    void set_json_schema(std::string_view schema);
    void clear_grammar();

    // From the next sampled token on, each sampled token's log-probability and the n_top most likely
    // alternatives (0..kMaxTopLogprobs; < 0: off) are computed, kept for last_logprobs() and handed
    // to on_step (may be empty) on the sampling thread.
    static constexpr int32_t kMaxTopLogprobs = 256;
    using LogprobsFn = std::function<void(const StepLogprobs &)>;
    void set_logprobs(int32_t n_top, LogprobsFn on_step);
    // The last sampled token's, or null: logprobs off, or nothing sampled since they were turned on.
    const StepLogprobs *last_logprobs() const {
        return logprobs_n_ >= 0 && logprobs_.token >= 0 ? &logprobs_ : nullptr;
    }
    // Added to the logits before sampling (token ids checked against the vocabulary, bias not NaN or
    // +inf; -inf bans a token). Replaces the previous map; empty removes it.
    void set_logit_bias(std::vector<std::pair<int32_t, float>> bias);

    // Stop strings for next()/generate() from now on (each non-empty, else INVALID_ARGUMENT); an
    // empty list turns them off. Text that may begin one is held back (see StopStrings); a complete
    // one ends generation with LLM_STOPPED and the context is cut back to before the first token
    // holding any of its bytes. prefill, truncate, reset and load forget held text.
    void set_stop(std::vector<std::string> stops);
    bool has_stop() const { return !stops_.empty(); }
    // The text held back, forgotten: what a host pulling tokens gets when it ends generation itself.
    std::string flush_held();
    // Puts text back in front of the held text (a pull whose buffer was too small for it).
    void keep_held(const std::string &text);

    // Receives each generated token and its piece before the token is accepted; false stops.
    using TokenFn = std::function<bool(int32_t token, const std::string &piece)>;
    struct Step {
        // LLM_DONE: an end-of-generation token, sampled but not accepted; LLM_STOPPED: the token
        // completed a stop string and is not accepted (the context was cut back before it).
        int32_t status = LLM_OK;
        int32_t token = -1;
        // The text handed out: the token's piece, or with stop strings what can no longer begin one
        // (maybe empty); at LLM_DONE the held text, at LLM_STOPPED the text before the stop string.
        std::string piece;
        bool stop = false;  // on_token returned false (the token is accepted all the same)
    };
    // One generation step, the only one (generate() loops over it, llm_session_next is one call):
    // samples from the last logits, hands the token to on_token (may be empty), then accepts it.
    // Continues the work of the previous call, so a cancel pending from between calls applies.
    Step next(const TokenFn &on_token = {});

    // Returns LLM_DONE / LLM_OK; throws on errors. on_token returning false stops (LLM_OK).
    int32_t generate(std::string_view prompt, int32_t max_tokens, const TokenFn &on_token);

    // Any thread. Cancels the call in flight (prefill, accept, generate, next); with none in flight
    // it stays pending until the next call: llm_session_next (a pull loop going on) is cancelled
    // by it, a call that starts new work (prefill, accept, generate, reset) drops it.
    void cancel();
    const Model &model() const { return m_; }
    std::string stats_json() const;
    // Since creation/reset, and for the last prefill/accept/generate/next call.
    SessionStats stats() const;
    SessionStats last_call_stats() const { return last_call_; }

    // Saved sessions (runtime/session_state.cpp, where the format is described): save writes the
    // context's tokens, their KV rows, the last logits and the sampler's state; load reads a whole
    // state from `in`, checks all of it against this session and its model, and only then replaces
    // this session's context with it, so a failed load changes nothing.
    void save(StateSink &out) const;
    void load(ByteSource &in);

    // Speculative decoding for generate()/next() from now on (runtime/speculation.cpp); throws
    // INVALID_ARGUMENT for a draft with another vocabulary or out-of-range settings.
    void set_speculation(const SpeculationOptions &o);
    // Advances each session (distinct, same model, checked by the caller) by one sampled token in
    // one forward pass (runtime/batch.cpp); per-session results in tokens[i] / statuses[i].
    static void next_batch(const std::vector<Session *> &sessions, int32_t *tokens, int32_t *statuses);

    // Embeddings (runtime/embed.cpp): each input (non-empty, ids in range, at most n_ctx tokens) is
    // evaluated as its own sequence from position 0 on key/value caches of its own (the session's KV
    // types), as many inputs per pass as a prompt chunk holds, with their caches together at most
    // n_ctx positions (on a hybrid each has a fresh recurrent state too, at most kStateCheckpoints
    // inputs at once); the session's context, logits and sampler stay as they were. out receives,
    // input after input, pooled_rows() rows of pooled_dim() floats each (pooling already resolved).
    // The passes and reads count in the session's stats; llm_session_cancel cancels it.
    void embed(const std::vector<std::vector<int32_t>> &inputs, int32_t pooling, bool normalize, float *out);

    // Features that cannot carry a recurrent layer's state (context shift: a state that absorbed the
    // dropped tokens cannot forget them): LLM_ERR_UNSUPPORTED naming `what` for a model that has one.
    // They ask first, so a refusal changes nothing.
    void refuse_recurrent(const char *what) const;

private:
    // Bracket one public call (they nest; the outermost pair counts): per-call counters restart at
    // begin_call; continues = the call goes on with the work of the previous one (next()), so a
    // pending cancel applies to it instead of being dropped. Used through CallScope (session.cpp).
    friend class CallScope;
    void begin_call(bool continues);
    void end_call();
    void run(const int32_t *tokens, int64_t n, bool decode);
    // The one place tokens enter the context (prefill, accept, speculation, batches): their KV rows
    // are written at positions n_past_.., so they join tokens() and the sampler's repetition history
    // and count as generated or prompt tokens; the last logits become `rows` rows copied from
    // `logits` (n_vocab floats each), or, with logits null, the rows the evaluation wrote in place.
    // Timing and the other counters stay with the caller, which knows what its pass covered.
    void commit(const int32_t *tokens, int64_t n, bool generated, const float *logits, int64_t rows);
    // One generated token and the logits after it.
    void commit(int32_t token, const float *row) { commit(&token, 1, true, row, 1); }
    // Context shift: drops positions after n_keep so that n more tokens fit (see run()).
    void make_room(int64_t n);
    // Evaluates tokens at positions pos0.. in prompt chunks; logits as in run() (nullptr: none).
    // checkpoints: a prefill, which keeps the recurrent state after each chunk (the checkpoint policy).
    void evaluate(const int32_t *tokens, int64_t n, int32_t pos0, float *logits, bool all_logits,
                  bool checkpoints = false);
    // Evaluates tokens at positions n_past_.. (after restore_window()) without committing them; on
    // failure the context is as before, and the cache is marked suspect (see restore_window()).
    // journal: a verify pass, whose recurrent inputs are recorded (RecurrentState::begin_journal).
    void evaluate_next(const int32_t *tokens, int64_t n, float *logits, bool all_logits, bool checkpoints = false,
                       bool journal = false);
    // After a truncation or a failed call: if a ring has lost positions the next token reads,
    // re-evaluates tokens() from position 0 (the windowed layers' inputs reach back layer by layer);
    // else if a recurrent state is not at n_past (a truncation, or a pass that failed half way),
    // restores its newest checkpoint at or below n_past and re-evaluates the tokens after it. Exact:
    // a prefill gives the bits of the decode that made the context.
    void restore_window();
    void check_cancel();
    // Speculation (runtime/speculation.cpp): advance() commits a token sampled by next() (from the
    // pending ones, or with a verify pass over it and new proposals, or by accept());
    // drop_pending() forgets tokens verified beyond n_past_ (any call but next() does).
    void advance(int32_t token);
    void verify(int32_t t0, const std::vector<int32_t> &drafts);
    void drop_pending();
    // Under a grammar: token t if the grammar allows it (the common case, one check), else a fresh
    // draw from row with every token it refuses masked out.
    int32_t constrain(const float *row, int32_t t);
    // The grammar's state rebuilt from the generated tokens still in the context (after a truncation).
    void replay_grammar();
    // The grammar back at its start rule, with no generated text (reset, load).
    void restart_grammar();

    const Model &m_;
    SessionOptions opt_;
    KvCache kv_;
    Scratch scratch_;
    std::unique_ptr<ThreadPool> pool_;
    Sampler sampler_;
    std::vector<float> logits_;
    int64_t logits_rows_ = 0;
    int32_t n_past_ = 0;
    std::vector<int32_t> tokens_;      // the context's tokens: n_past_ of them
    bool kv_suspect_ = false;          // a truncation or failed call may have left a ring without needed positions
    uint64_t kv_recomputed_ = 0;       // tokens re-evaluated by restore_window()
    uint64_t recurrent_replayed_ = 0;  // tokens a recurrent state re-absorbed from a verify pass's journal
    std::atomic<bool> cancel_{false};  // polled by forward(); see cancel()
    std::mutex call_mu_;               // orders cancel() against the start and end of a call
    int call_depth_ = 0;               // guarded by call_mu_
    SessionStats stats_;               // token counts and times; I/O comes from io_
    IoStats io_;
    SessionStats call_start_, last_call_;
    std::unique_ptr<BlockStreamer> streamer_;
    std::shared_ptr<Speculator> spec_;  // null: speculation off
    // Tokens the last verify pass checked beyond n_past_ (their KV rows are written), handed out by
    // next() from pending_at_ on; pending_logits_ row i + 1 holds the logits after pending_[i].
    std::vector<int32_t> pending_;
    size_t pending_at_ = 0;
    std::vector<float> pending_logits_;
    std::unique_ptr<grammar::Constraint> grammar_;  // null: unconstrained
    std::vector<int32_t> grammar_pos_;               // positions of the tokens the grammar consumed
    std::vector<float> masked_;                      // a logits row with the refused tokens at -inf
    StopStrings stops_;                              // empty: no stop strings
    int32_t logprobs_n_ = -1;                        // alternatives per step; < 0: no log-probabilities
    LogprobsFn on_logprobs_;
    StepLogprobs logprobs_;        // of the last sampled token
    std::vector<float> adjusted_;  // scratch: the logits the log-probabilities come from
    // The log-probabilities of token t sampled from row (logprobs on).
    void record_logprobs(const float *row, int32_t t);
};

// Every public Session call that may evaluate tokens or replace the context runs inside one of these.
class CallScope {
public:
    explicit CallScope(Session &s, bool continues = false) : s_(s) { s_.begin_call(continues); }
    ~CallScope() { s_.end_call(); }
    CallScope(const CallScope &) = delete;
    CallScope &operator=(const CallScope &) = delete;

private:
    Session &s_;
};

}  // namespace llm
