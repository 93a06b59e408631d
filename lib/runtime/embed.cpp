// Embeddings (llm_session_embed): inputs packed into forward_batch passes, each on a key/value cache
// of its own, and the final norm's output of their rows pooled as llama.cpp pools it (mean, first
// token, last token, every token, or a classifier head's scores for RANK).
#include "runtime/embed.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <memory>

#include "core/error.h"
#include "model/forward.h"
#include "model/kv_cache.h"
#include "model/limits.h"
#include "runtime/session.h"

namespace llm {

const char *name(Pooling p) {
    switch (p) {
    case Pooling::UNSPECIFIED: return "unspecified";
    case Pooling::NONE: return "none";
    case Pooling::MEAN: return "mean";
    case Pooling::CLS: return "cls";
    case Pooling::LAST: return "last";
    case Pooling::RANK: return "rank";
    }
    return "?";
}

bool parse_pooling(const char *text, Pooling &out) {
    if (!text) return false;
    for (Pooling p : {Pooling::UNSPECIFIED, Pooling::NONE, Pooling::MEAN, Pooling::CLS, Pooling::LAST, Pooling::RANK}) {
        if (std::strcmp(text, name(p)) == 0) {
            out = p;
            return true;
        }
    }
    return false;
}

Pooling resolve_pooling(const Model &m, int32_t requested) {
    if (requested < -1 || requested > 4)
        fail(LLM_ERR_INVALID_ARGUMENT, "pooling {} is not one of LLM_POOLING_* (-1 .. 4)", requested);
    int32_t p = requested;
    if (p == -1) {
        p = m.pooling_type();
        if (p < -1 || p > 4)
            fail(LLM_ERR_UNSUPPORTED, "the file's {}.pooling_type is {}, which is no pooling type this engine knows",
                 m.config().arch_name, p);
        if (p == -1) p = 0;  // llama.cpp: a file without the key pools nothing
    }
    const Pooling pool = static_cast<Pooling>(p);
    if (pool == Pooling::RANK && m.classifier().n_out == 0) {
        fail(LLM_ERR_UNSUPPORTED,
             "pooling 'rank' needs a classifier head (cls.output.weight or cls.weight), which this file has not; "
             "a chat reranker such as Qwen3-Reranker is scored from two logits of an ordinary session instead");
    }
    return pool;
}

int64_t pooled_dim(const Model &m, Pooling p) {
    return p == Pooling::RANK ? m.classifier().n_out : static_cast<int64_t>(m.config().n_embd);
}

void l2_normalize(float *v, int64_t n) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(v[i]) * v[i];
    const float scale = sum > 0.0 ? static_cast<float>(1.0 / std::sqrt(sum)) : 0.0f;
    for (int64_t i = 0; i < n; ++i) v[i] *= scale;
}

namespace {

// RANK: scores = out_w · (tanh(w·x + b) if w) + out_b, then a softmax where llama.cpp applies one.
void classify(const Model &m, const float *x, float *scores) {
    const Classifier &k = m.classifier();
    const int64_t E = m.config().n_embd;
    std::vector<float> hidden(x, x + E);
    if (!k.w.empty()) {
        for (int64_t j = 0; j < E; ++j) {
            double acc = k.b.empty() ? 0.0 : k.b[j];
            for (int64_t e = 0; e < E; ++e) acc += static_cast<double>(k.w[j * E + e]) * x[e];
            hidden[j] = std::tanh(static_cast<float>(acc));
        }
    }
    if (k.out_w.empty()) {
        std::copy(hidden.begin(), hidden.end(), scores);
    } else {
        for (int64_t j = 0; j < k.n_out; ++j) {
            double acc = k.out_b.empty() ? 0.0 : k.out_b[j];
            for (int64_t e = 0; e < E; ++e) acc += static_cast<double>(k.out_w[j * E + e]) * hidden[e];
            scores[j] = static_cast<float>(acc);
        }
    }
    if (m.config().arch->rank_last_softmax) {
        const float mx = *std::max_element(scores, scores + k.n_out);
        double sum = 0.0;
        for (int64_t j = 0; j < k.n_out; ++j) sum += std::exp(static_cast<double>(scores[j]) - mx);
        for (int64_t j = 0; j < k.n_out; ++j)
            scores[j] = static_cast<float>(std::exp(static_cast<double>(scores[j]) - mx) / sum);
    }
}

// One input between its first and its last pass.
struct LiveInput {
    size_t index = 0;
    int64_t done = 0;  // tokens evaluated so far
    std::unique_ptr<KvCache> kv;
    std::vector<double> sum;  // MEAN: the rows added so far, in row order (so batching cannot change it)
};

}  // namespace

void Session::embed(const std::vector<std::vector<int32_t>> &inputs, int32_t pooling, bool normalize, float *out) {
    CallScope call(*this);
    const Pooling pool = static_cast<Pooling>(pooling);
    const ModelConfig &c = m_.config();
    const int64_t E = c.n_embd, dim = pooled_dim(m_, pool);
    const int32_t n_vocab = static_cast<int32_t>(c.n_vocab);
    const int64_t budget = kv_.n_ctx();
    std::vector<int64_t> offset(inputs.size() + 1, 0);  // where each input's rows start in out
    for (size_t i = 0; i < inputs.size(); ++i) {
        const int64_t n = static_cast<int64_t>(inputs[i].size());
        if (n == 0) fail(LLM_ERR_INVALID_ARGUMENT, "input {} has no tokens", i);
        if (n > budget)
            fail(LLM_ERR_CONTEXT_FULL, "input {} has {} tokens, more than the session's n_ctx of {}", i, n, budget);
        for (int32_t t : inputs[i]) {
            if (t < 0 || t >= n_vocab)
                fail(LLM_ERR_INVALID_ARGUMENT, "input {}: token id {} is out of range [0, {})", i, t, n_vocab);
        }
        offset[i + 1] = offset[i] + pooled_rows(pool, n) * dim;
    }

    const int64_t chunk = std::max<int64_t>(1, m_.prompt_chunk());
    std::deque<LiveInput> live;
    size_t next = 0;
    int64_t in_flight = 0;  // cache positions of the live inputs: at most n_ctx, as the session's own cache
    std::vector<float> hidden, row(static_cast<size_t>(dim));
    std::vector<ForwardSegment> segs;
    std::vector<LiveInput *> seg_input;
    try {
        while (next < inputs.size() || !live.empty()) {
            // Admit inputs while the pass has rows to fill and their caches fit the budget.
            int64_t pending = 0;
            for (const LiveInput &l : live) pending += static_cast<int64_t>(inputs[l.index].size()) - l.done;
            // A hybrid's input carries a recurrent state of its own (fresh, as every input starts at
            // position 0) whatever its length: at most kStateCheckpoints of them at once, the memory
            // the plan counts for the session's checkpoints.
            while (next < inputs.size() && pending < chunk &&
                   in_flight + static_cast<int64_t>(inputs[next].size()) <= budget &&
                   (!c.has_recurrent() || live.size() < static_cast<size_t>(kStateCheckpoints))) {
                const int64_t n = static_cast<int64_t>(inputs[next].size());
                LiveInput l;
                l.index = next++;
                l.kv =
                    std::make_unique<KvCache>(c, static_cast<int32_t>(n), opt_.kv_type_k, opt_.kv_type_v, opt_.kv_ring);
                l.kv->set_rope_ctx(kv_.n_ctx());
                if (pool == Pooling::MEAN) l.sum.assign(static_cast<size_t>(E), 0.0);
                live.push_back(std::move(l));
                in_flight += n;
                pending += n;
            }
            // The pass: the live inputs' next rows, in input order, up to a prompt chunk.
            segs.clear();
            seg_input.clear();
            int64_t rows = 0;
            for (LiveInput &l : live) {
                if (rows == chunk) break;
                const std::vector<int32_t> &toks = inputs[l.index];
                const int64_t take = std::min<int64_t>(chunk - rows, static_cast<int64_t>(toks.size()) - l.done);
                ForwardSegment g;
                g.kv = l.kv.get();
                g.tokens = toks.data() + l.done;
                g.n_tokens = take;
                g.pos0 = static_cast<int32_t>(l.done);
                g.cancel = &cancel_;
                segs.push_back(g);
                seg_input.push_back(&l);
                rows += take;
            }
            hidden.resize(static_cast<size_t>(rows * E));
            int64_t r = 0;
            for (ForwardSegment &g : segs) {
                g.hidden = &hidden[r * E];
                r += g.n_tokens;
            }
            forward_batch(m_, segs.data(), segs.size(), scratch_, pool_.get(), streamer_.get(), &io_);
            ++stats_.passes;

            // Pool each segment's rows into its input's output.
            for (size_t j = 0; j < segs.size(); ++j) {
                LiveInput &l = *seg_input[j];
                const ForwardSegment &g = segs[j];
                const int64_t n = static_cast<int64_t>(inputs[l.index].size());
                float *dst = out + offset[l.index];
                for (int64_t p = 0; p < g.n_tokens; ++p) {
                    const float *h = g.hidden + p * E;
                    const int64_t pos = l.done + p;
                    switch (pool) {
                    case Pooling::NONE: std::copy_n(h, E, dst + pos * E); break;
                    case Pooling::MEAN:
                        for (int64_t e = 0; e < E; ++e) l.sum[e] += h[e];
                        break;
                    case Pooling::CLS:
                        if (pos == 0) std::copy_n(h, E, dst);
                        break;
                    case Pooling::LAST:
                        if (pos == n - 1) std::copy_n(h, E, dst);
                        break;
                    case Pooling::RANK:
                        if (pos == (c.arch->rank_last_softmax ? n - 1 : 0)) classify(m_, h, dst);
                        break;
                    case Pooling::UNSPECIFIED: fail(LLM_ERR_INTERNAL, "embed: pooling not resolved");
                    }
                }
                l.done += g.n_tokens;
            }
            // Finish the inputs whose last row ran, and release their caches.
            while (!live.empty() && live.front().done == static_cast<int64_t>(inputs[live.front().index].size())) {
                LiveInput &l = live.front();
                float *dst = out + offset[l.index];
                const int64_t n = static_cast<int64_t>(inputs[l.index].size());
                if (pool == Pooling::MEAN)
                    for (int64_t e = 0; e < E; ++e) dst[e] = static_cast<float>(l.sum[e] / static_cast<double>(n));
                if (normalize)
                    for (int64_t q = 0; q < pooled_rows(pool, n); ++q) l2_normalize(dst + q * dim, dim);
                in_flight -= n;
                live.pop_front();
            }
        }
    } catch (const Error &e) {
        if (e.status() == LLM_ERR_CANCELLED) cancel_.store(false, std::memory_order_relaxed);
        throw;
    }
}

}  // namespace llm
