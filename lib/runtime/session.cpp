#include "runtime/session.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "grammar/constraint.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "model/context_shift.h"
#include "model/limits.h"
#include "model/mixer.h"
#include "runtime/speculation.h"

namespace llm {
namespace {

int32_t pick_ctx(const Model &m, int32_t want) {
    const uint32_t train = m.config().n_ctx_train;
    if (want > 0) {
        // Learned position embeddings have no row past the training context.
        if (m.has_position_embd() && static_cast<uint32_t>(want) > train) {
            fail(LLM_ERR_INVALID_ARGUMENT, "n_ctx {} exceeds this model's {} learned positions", want, train);
        }
        return want;
    }
    return default_n_ctx(train);
}

}  // namespace

Session::Session(const Model &m, const SessionOptions &opt)
    : m_(m), opt_(opt), kv_(m.config(), pick_ctx(m, opt.n_ctx), opt.kv_type_k, opt.kv_type_v, opt.kv_ring),
      pool_(std::make_unique<ThreadPool>(opt.n_threads > 0 ? opt.n_threads : m.default_threads())),
      sampler_(opt.sampling) {
    if (m.vocab_only()) fail(LLM_ERR_INVALID_ARGUMENT, "the model was loaded vocab-only; it cannot run");
    if (opt.context_shift) {
        refuse_recurrent("context shift");
        if (!can_shift_context(m)) {
            fail(LLM_ERR_UNSUPPORTED, "context shift needs rotary positions; {} has learned absolute positions",
                 m.config().arch_name);
        }
        if (opt.n_keep >= kv_.n_ctx()) {
            fail(LLM_ERR_INVALID_ARGUMENT, "n_keep {} leaves no room to shift in a context of {}", opt.n_keep,
                 kv_.n_ctx());
        }
    }
    streamer_ = std::make_unique<BlockStreamer>(m.layers(), io_);
}

Session::~Session() = default;

SessionStats Session::stats() const {
    SessionStats s = stats_;
    s.bytes_read = io_.bytes.load();
    s.read_calls = io_.calls.load();
    s.io_wait_seconds = static_cast<double>(io_.wait_ns.load()) * 1e-9;
    return s;
}

void Session::cancel() {
    std::lock_guard<std::mutex> lock(call_mu_);
    cancel_.store(true, std::memory_order_relaxed);
}

void Session::begin_call(bool continues) {
    {
        // A call that starts new work drops a cancel aimed at earlier work; llm_session_next
        // continues a pull loop, so a cancel that landed between two of its calls stops it.
        std::lock_guard<std::mutex> lock(call_mu_);
        if (call_depth_++ > 0) return;
        if (!continues) cancel_.store(false, std::memory_order_relaxed);
    }
    call_start_ = stats();
}

void Session::end_call() {
    {
        std::lock_guard<std::mutex> lock(call_mu_);
        if (--call_depth_ > 0) return;
    }
    // No host callback after the call returns, on success, error or cancel alike (end_call runs from
    // CallScope's destructor): the read-ahead stops here, and so llm_session_free never waits on a
    // read either.
    streamer_->quiesce();
    const SessionStats now = stats();
#define LLM_STATS_DIFF(type, name, where) last_call_.name = now.name - call_start_.name;
    LLM_SESSION_STATS(LLM_STATS_DIFF)
#undef LLM_STATS_DIFF
}

void Session::reset() {
    drop_pending();
    n_past_ = 0;
    tokens_.clear();
    kv_.clear();
    kv_.recurrent().drop_checkpoints();
    kv_.recurrent().drop_journal();
    kv_suspect_ = false;
    kv_recomputed_ = 0;
    recurrent_replayed_ = 0;
    logits_rows_ = 0;
    sampler_.reset();
    restart_grammar();
    stops_.clear();
    cancel_.store(false, std::memory_order_relaxed);
    stats_ = SessionStats{};
    io_.reset();
    call_start_ = last_call_ = SessionStats{};
}

void Session::refuse_recurrent(const char *what) const {
    const ModelConfig &c = m_.config();
    if (!c.has_recurrent()) return;
    fail(LLM_ERR_UNSUPPORTED,
         "{} is not supported for {}: the recurrent state of the model's gated delta-net layers has "
         "absorbed every token and cannot drop some of them",
         what, c.arch_name);
}

void Session::check_cancel() {
    if (cancel_.exchange(false, std::memory_order_relaxed)) fail(LLM_ERR_CANCELLED, "cancelled by llm_session_cancel");
}

void Session::run(const int32_t *tokens, int64_t n, bool decode) {
    drop_pending();
    check_cancel();
    if (n <= 0) fail(LLM_ERR_INVALID_ARGUMENT, "no tokens to evaluate");
    const int32_t n_vocab = static_cast<int32_t>(m_.config().n_vocab);
    for (int64_t i = 0; i < n; ++i) {
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            fail(LLM_ERR_INVALID_ARGUMENT, "token id {} is out of range [0, {})", tokens[i], n_vocab);
    }
    if (static_cast<int64_t>(n_past_) + n > kv_.n_ctx()) {
        if (!opt_.context_shift) {
            fail(LLM_ERR_CONTEXT_FULL, "{} tokens do not fit: {} of the context's {} are in use", n, n_past_,
                 kv_.n_ctx());
        }
        make_room(n);
    }
    const auto t0 = std::chrono::steady_clock::now();
    const bool all = opt_.logits_all;
    logits_rows_ = 0;
    logits_.resize(static_cast<size_t>(all ? n : 1) * n_vocab);
    evaluate_next(tokens, n, logits_.data(), all, !decode);
    commit(tokens, n, decode, nullptr, all ? n : 1);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    (decode ? stats_.decode_seconds : stats_.prefill_seconds) += secs;
}

void Session::commit(const int32_t *tokens, int64_t n, bool generated, const float *logits, int64_t rows) {
    if (generated && grammar_) {
        // Every generated token was sampled under the grammar or checked by accept(): this cannot fail.
        const auto t0 = std::chrono::steady_clock::now();
        for (int64_t i = 0; i < n; ++i) {
            grammar_->accept(tokens[i]);
            grammar_pos_.push_back(n_past_ + static_cast<int32_t>(i));
        }
        stats_.grammar_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    if (logits) logits_.assign(logits, logits + rows * static_cast<int64_t>(m_.config().n_vocab));
    logits_rows_ = rows;
    for (int64_t i = 0; i < n; ++i) sampler_.accept(tokens[i]);
    tokens_.insert(tokens_.end(), tokens, tokens + n);
    n_past_ += static_cast<int32_t>(n);
    (generated ? stats_.generated_tokens : stats_.prompt_tokens) += static_cast<uint64_t>(n);
}

// The shifted context is a valid one (tokens_ and the cache agree), so a failure later in the same
// call leaves it shifted rather than undoing the shift.
void Session::make_room(int64_t n) {
    const int32_t keep = std::min(opt_.n_keep, n_past_);
    if (keep + n > kv_.n_ctx()) {
        fail(LLM_ERR_CONTEXT_FULL,
             "{} tokens do not fit even after a context shift: the context holds {}, {} of "
             "them kept (n_keep)",
             n, kv_.n_ctx(), keep);
    }
    const int32_t discard = positions_to_discard(n_past_, keep, n, kv_.n_ctx());
    shift_context(m_, kv_, keep, discard, n_past_);
    tokens_.erase(tokens_.begin() + keep, tokens_.begin() + keep + discard);
    n_past_ -= discard;
    // The grammar keeps its state (the text was generated); its record of positions follows the shift.
    std::vector<int32_t> kept_pos;
    for (int32_t p : grammar_pos_) {
        if (p < keep) kept_pos.push_back(p);
        else if (p >= keep + discard) kept_pos.push_back(p - discard);
    }
    grammar_pos_.swap(kept_pos);
    stops_.shift(keep, discard);
    // A ring may not hold every kept position the next query reads; restore_window() then
    // recomputes the cache from the shifted tokens.
    kv_suspect_ = true;
    // The repetition history is the tail of the context, as after truncate().
    sampler_.set_history(tokens_.data(), tokens_.size());
    ++stats_.context_shifts;
}

void Session::evaluate(const int32_t *tokens, int64_t n, int32_t pos0, float *logits, bool all, bool checkpoints) {
    const int64_t n_vocab = m_.config().n_vocab;
    int32_t pos = pos0;
    for (int64_t done = 0; done < n;) {
        const int64_t chunk = std::min(m_.prompt_chunk(), n - done);
        const bool last = done + chunk == n;
        ForwardRequest req;
        req.tokens = tokens + done;
        req.n_tokens = chunk;
        req.pos0 = pos;
        req.all_logits = all;
        // Middle chunks of a long prompt need no logits unless every row was asked for.
        req.logits = !logits ? nullptr : all ? logits + done * n_vocab : (last ? logits : nullptr);
        req.cancel = &cancel_;
        req.blocks = streamer_.get();
        req.stats = &io_;
        forward(m_, kv_, scratch_, pool_.get(), req);
        ++stats_.passes;
        pos += static_cast<int32_t>(chunk);
        done += chunk;
        // The recurrent state at each prompt-chunk boundary and at the end of the prefill.
        if (checkpoints) kv_.recurrent().save_checkpoint(pos);
    }
}

void Session::evaluate_next(const int32_t *tokens, int64_t n, float *logits, bool all, bool checkpoints,
                            bool journal) {
    try {
        restore_window();
        if (journal) kv_.recurrent().begin_journal(n_past_);
        evaluate(tokens, n, n_past_, logits, all, checkpoints);
        kv_.recurrent().stop_recording();
    } catch (const Error &e) {
        kv_.recurrent().stop_recording();
        if (e.status() == LLM_ERR_CANCELLED) cancel_.store(false, std::memory_order_relaxed);
        // n_past_ unchanged: the rows written past it are ignored and later overwritten, but on a
        // ring they may have taken the slots of positions still needed; a recurrent state may be
        // part way (restore_window() goes back to a checkpoint), and checkpoints taken past n_past_
        // hold tokens that are not in the context.
        kv_.recurrent().drop_checkpoints_after(n_past_);
        kv_suspect_ = true;
        throw;
    }
}

void Session::restore_window() {
    if (!kv_suspect_) return;
    RecurrentState &rec = kv_.recurrent();
    if (!kv_.holds_window_before(n_past_)) {
        // A ring's inputs reach back layer by layer: only position 0 is a safe start.
        kv_.clear();
        evaluate(tokens_.data(), n_past_, 0, nullptr, false, true);
        kv_recomputed_ += static_cast<uint64_t>(n_past_);
    } else if (!rec.at(n_past_) && rec.journal_covers(n_past_)) {
        // A rejected draft: the state before the verify pass re-absorbs the accepted tokens from the
        // pass's records, without another pass.
        const int32_t from = rec.journal_pos();
        replay_recurrent(m_.config(), rec, n_past_, pool_.get());
        recurrent_replayed_ += static_cast<uint64_t>(n_past_ - from);
    } else if (!rec.at(n_past_)) {
        // The attention rows of [0, n_past_) are intact; the recurrent state goes back to the newest
        // checkpoint at or below n_past_ and absorbs the tokens after it again (rewriting their rows
        // with the same bits). Its end is a checkpoint too: the next truncation likely lands near it.
        const int32_t from = rec.restore_checkpoint(n_past_);
        if (from < n_past_) {
            evaluate(tokens_.data() + from, n_past_ - from, from, nullptr, false, true);
            kv_recomputed_ += static_cast<uint64_t>(n_past_ - from);
        }
    }
    kv_suspect_ = false;
}

void Session::prefill(const int32_t *tokens, size_t n) {
    CallScope call(*this);
    stops_.clear();
    run(tokens, static_cast<int64_t>(n), false);
}

void Session::accept(int32_t token) {
    CallScope call(*this);
    if (grammar_ && !grammar_->allows(token)) {
        fail(LLM_ERR_INVALID_ARGUMENT, "token {} ('{}') is not allowed by the grammar here", token,
             token >= 0 && token < static_cast<int32_t>(m_.config().n_vocab) ? m_.tokenizer().piece(token) : "");
    }
    run(&token, 1, true);
}

void Session::truncate(int32_t n) {
    CallScope call(*this);
    if (n < 0 || n > n_past_)
        fail(LLM_ERR_INVALID_ARGUMENT, "truncate to {}: the context holds 0..{} tokens", n, n_past_);
    drop_pending();
    stops_.clear();
    n_past_ = n;
    tokens_.resize(static_cast<size_t>(n));
    kv_.recurrent().drop_checkpoints_after(n);
    logits_rows_ = 0;
    kv_suspect_ = true;
    // The history is the tail of the context, so it can be rebuilt from what remains.
    sampler_.set_history(tokens_.data(), tokens_.size());
    replay_grammar();
}

void Session::restart_grammar() {
    if (grammar_) grammar_->reset();
    grammar_pos_.clear();
}

void Session::replay_grammar() {
    if (!grammar_) return;
    while (!grammar_pos_.empty() && grammar_pos_.back() >= n_past_) grammar_pos_.pop_back();
    grammar_->reset();
    for (int32_t p : grammar_pos_) grammar_->accept(tokens_[static_cast<size_t>(p)]);
}

void Session::set_grammar(std::string_view gbnf, std::string_view root) {
    auto g = std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(gbnf, root.empty() ? "root" : root));
    grammar_ = std::make_unique<grammar::Constraint>(std::move(g), m_.grammar_vocab());
    grammar_pos_.clear();
}

void Session::set_json_schema(std::string_view schema) { set_grammar(grammar::json_schema_to_gbnf(schema), "root"); }

void Session::clear_grammar() {
    grammar_.reset();
    grammar_pos_.clear();
}

void Session::set_stop(std::vector<std::string> stops) {
    for (size_t i = 0; i < stops.size(); ++i)
        if (stops[i].empty()) fail(LLM_ERR_INVALID_ARGUMENT, "stop string {} is empty", i);
    stops_.set(std::move(stops));
}

std::string Session::flush_held() { return stops_.flush(); }

void Session::keep_held(const std::string &text) {
    // Its tokens are whole in the context (or were cut with a stop string), so a stop string found
    // in it later cuts nothing before n_past_.
    stops_.prepend(text, n_past_);
}

const float *Session::logits(int64_t row) const {
    if (logits_rows_ == 0) fail(LLM_ERR_INVALID_ARGUMENT, "no logits yet: prefill or accept a token first");
    if (row < 0) row = logits_rows_ - 1;
    if (row >= logits_rows_)
        fail(LLM_ERR_INVALID_ARGUMENT, "logits row {} out of range (0..{})", row, logits_rows_ - 1);
    return logits_.data() + row * static_cast<int64_t>(m_.config().n_vocab);
}

int32_t Session::sample() {
    const float *row = logits();
    int32_t t = sampler_.sample(row, static_cast<int32_t>(m_.config().n_vocab));
    if (grammar_) t = constrain(row, t);
    if (logprobs_n_ >= 0) record_logprobs(row, t);
    return t;
}

void Session::set_logprobs(int32_t n_top, LogprobsFn on_step) {
    if (n_top > kMaxTopLogprobs)
        fail(LLM_ERR_INVALID_ARGUMENT, "n_top {} is more than the {} alternatives reported", n_top, kMaxTopLogprobs);
    logprobs_n_ = n_top < 0 ? -1 : n_top;
    on_logprobs_ = logprobs_n_ >= 0 ? std::move(on_step) : LogprobsFn{};
    logprobs_ = StepLogprobs{};
}

void Session::set_logit_bias(std::vector<std::pair<int32_t, float>> bias) {
    const int32_t n_vocab = static_cast<int32_t>(m_.config().n_vocab);
    for (const auto &[id, b] : bias) {
        if (id < 0 || id >= n_vocab)
            fail(LLM_ERR_INVALID_ARGUMENT, "logit bias for token {}: out of range [0, {})", id, n_vocab);
        if (std::isnan(b) || b == std::numeric_limits<float>::infinity())
            fail(LLM_ERR_INVALID_ARGUMENT, "logit bias for token {} is {} (NaN and +inf are not biases)", id, b);
    }
    sampler_.set_bias(std::move(bias));
}

void Session::record_logprobs(const float *row, int32_t t) {
    const int32_t n_vocab = static_cast<int32_t>(m_.config().n_vocab);
    sampler_.adjusted(row, n_vocab, adjusted_);
    // log p(i) = x_i - log(sum_j exp(x_j)), summed from the maximum so nothing overflows.
    float mx = -std::numeric_limits<float>::infinity();
    for (float x : adjusted_) mx = std::max(mx, x);
    double sum = 0.0;
    for (float x : adjusted_) sum += std::exp(static_cast<double>(x) - mx);
    const double lse = static_cast<double>(mx) + std::log(sum);
    const auto lp = [&](int32_t i) { return static_cast<float>(static_cast<double>(adjusted_[i]) - lse); };
    logprobs_.token = t;
    logprobs_.logprob = lp(t);
    logprobs_.top.clear();
    if (logprobs_n_ > 0) {
        const int32_t n = std::min(logprobs_n_, n_vocab);
        std::vector<int32_t> ids(static_cast<size_t>(n_vocab));
        for (int32_t i = 0; i < n_vocab; ++i) ids[i] = i;
        std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), [&](int32_t a, int32_t b) {
            return adjusted_[a] > adjusted_[b] || (adjusted_[a] == adjusted_[b] && a < b);
        });
        for (int32_t k = 0; k < n; ++k) logprobs_.top.push_back({ids[k], lp(ids[k])});
    }
    if (on_logprobs_) on_logprobs_(logprobs_);
}

// Sample first, check only the chosen token: with a good model the grammar rarely refuses it, and one
// check is far cheaper than checking the whole vocabulary (llama.cpp's common sampler does the same).
// When it is refused, the draw is made again over the allowed tokens only (a second RNG draw).
int32_t Session::constrain(const float *row, int32_t t) {
    const auto t0 = std::chrono::steady_clock::now();
    struct AddTime {
        std::chrono::steady_clock::time_point t0;
        double &to;
        ~AddTime() { to += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); }
    } add_time{t0, stats_.grammar_seconds};
    ++stats_.grammar_tokens;
    if (grammar_->allows(t)) return t;
    ++stats_.grammar_masks;
    const int32_t n_vocab = static_cast<int32_t>(m_.config().n_vocab);
    masked_.assign(row, row + n_vocab);
    if (grammar_->mask(masked_.data()) == 0) {
        fail(LLM_ERR_INVALID_ARGUMENT,
             "the grammar allows no token of the vocabulary after the text generated so far (a dead end)");
    }
    int32_t u = sampler_.sample(masked_.data(), n_vocab);
    // Penalties and truncation keep -inf at -inf, so a refused token has no probability; only a draw
    // landing exactly on a zero-mass boundary could return one, and then the best allowed token stands in.
    if (!grammar_->allows(u)) u = argmax(masked_.data(), n_vocab);
    return u;
}

Session::Step Session::next(const TokenFn &on_token) {
    CallScope call(*this, true);
    Step step;
    step.token = sample();
    const Tokenizer &tok = m_.tokenizer();
    if (tok.is_eog(step.token)) {
        drop_pending();
        step.status = LLM_DONE;
        step.piece = stops_.flush();
        return step;
    }
    step.piece = tok.piece(step.token);
    const StopStrings before = stops_;
    if (!stops_.empty()) {
        StopStrings::Result r = stops_.add(step.piece, n_past_);
        step.piece = std::move(r.text);
        if (r.stopped) {
            // The stop string's tokens leave the context (this one was never accepted).
            if (r.cut < n_past_) truncate(r.cut);
            drop_pending();
            step.status = LLM_STOPPED;
            return step;
        }
    }
    // on_token runs before the evaluation, so a cancel it triggers stops this token's accept.
    step.stop = on_token && !on_token(step.token, step.piece);
    try {
        if (spec_) {
            advance(step.token);
        } else {
            accept(step.token);
        }
    } catch (...) {
        stops_ = before;  // the token is not in the context, so its text is not held either
        throw;
    }
    return step;
}

int32_t Session::generate(std::string_view prompt, int32_t max_tokens, const TokenFn &on_token) {
    CallScope call(*this);
    const Tokenizer &tok = m_.tokenizer();
    if (!prompt.empty() || n_past_ == 0) {
        const std::vector<int32_t> ids = tok.encode(prompt, n_past_ == 0, opt_.parse_special);
        if (ids.empty()) fail(LLM_ERR_INVALID_ARGUMENT, "the prompt produced no tokens and the context is empty");
        prefill(ids.data(), ids.size());
    }
    // Text held back for stop strings, and the text before a stop string, come in one last call with
    // token -1 (its answer changes nothing: generation is over).
    const auto hand_out_rest = [&](const std::string &text) {
        if (on_token && !text.empty()) on_token(-1, text);
    };
    for (int32_t i = 0; i < max_tokens; ++i) {
        const Step step = next(on_token);
        if (step.status != LLM_OK) {
            hand_out_rest(step.piece);
            return step.status;
        }
        if (step.stop) break;
    }
    hand_out_rest(stops_.flush());
    return LLM_OK;
}

std::string Session::stats_json() const {
    nlohmann::json j;
    const SessionStats st = stats();
    j["n_past"] = n_past_;
    j["n_ctx"] = kv_.n_ctx();
    nlohmann::json last_call;
#define LLM_STATS_JSON(type, name, where) \
    j[#name] = st.name;                   \
    if constexpr (stats_in(where, kStatsPerCall)) last_call[#name] = last_call_.name;
    LLM_SESSION_STATS(LLM_STATS_JSON)
#undef LLM_STATS_JSON
    j["prefill_tok_s"] = st.prefill_seconds > 0 ? st.prompt_tokens / st.prefill_seconds : 0.0;
    j["decode_tok_s"] = st.decode_seconds > 0 ? st.generated_tokens / st.decode_seconds : 0.0;
    // Generated tokens per decode pass: each generated token took a pass unless it was an accepted draft.
    const auto per_pass = [](const SessionStats &s) {
        const uint64_t passes = s.generated_tokens - s.accepted_tokens;
        return passes ? static_cast<double>(s.generated_tokens) / static_cast<double>(passes) : 0.0;
    };
    const auto acceptance = [](const SessionStats &s) {
        return s.drafted_tokens ? static_cast<double>(s.accepted_tokens) / static_cast<double>(s.drafted_tokens) : 0.0;
    };
    j["grammar_us_per_token"] = st.grammar_tokens ? st.grammar_seconds * 1e6 / st.grammar_tokens : 0.0;
    j["grammar"] = grammar_ ? nlohmann::json{{"rules", grammar_->grammar().rule_start.size()}}
                            : nlohmann::json(nullptr);
    j["tokens_per_pass"] = per_pass(st);
    j["acceptance"] = acceptance(st);
    if (spec_) {
        const SpeculationOptions &o = spec_->options();
        j["speculation"] = {{"mode", spec_->mode()},
                            {"n_draft", o.n_draft},
                            {"lookup_ngram", o.lookup_ngram},
                            {"draft_p_min", o.draft_p_min},
                            {"draft_passes", spec_->draft_passes()}};
    } else {
        j["speculation"] = {{"mode", "off"}};
    }
    last_call["tokens_per_pass"] = per_pass(last_call_);
    last_call["acceptance"] = acceptance(last_call_);
    j["last_call"] = std::move(last_call);
    j["kv_cache_bytes"] = kv_.bytes();
    j["kv_type_k"] = name(kv_.type_k());
    j["kv_type_v"] = name(kv_.type_v());
    j["kv_recomputed_tokens"] = kv_recomputed_;
    j["recurrent_replayed_tokens"] = recurrent_replayed_;
    j["threads"] = pool_->size();
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace llm
