#include "model/model.h"

#include <algorithm>
#include <cstring>
#include <map>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "grammar/vocab_text.h"
#include "kernels/dequant.h"
#include "kernels/repack.h"
#include "model/kv_cache.h"
#include "model/limits.h"

namespace llm {
namespace {

std::vector<float> read_f32(const WeightSource &src, const TensorInfo &t) {
    if (t.type != TensorType::F32)
        fail(LLM_ERR_UNSUPPORTED, "tensor '{}' must be F32, has {}", t.name, type_name(t.type));
    std::vector<float> v(t.n_elements());
    src.read(t, 0, v.data(), t.nbytes);
    return v;
}

// Per type: tensors, bytes, elements and bits per weight; and those of the whole file (llama.cpp's
// "BPW": every tensor's bytes over every tensor's elements, so norms and embeddings count).
nlohmann::json weight_types_json(const std::vector<TensorInfo> &tensors) {
    struct Sum {
        uint64_t tensors = 0, bytes = 0, elements = 0;
    };
    std::map<std::string, Sum> by_type;
    Sum all;
    for (const TensorInfo &t : tensors) {
        for (Sum *x : {&by_type[type_name(t.type)], &all}) {
            ++x->tensors;
            x->bytes += t.nbytes;
            x->elements += t.n_elements();
        }
    }
    auto bpw = [](const Sum &x) { return x.elements ? 8.0 * static_cast<double>(x.bytes) / x.elements : 0.0; };
    nlohmann::json types = nlohmann::json::object();
    for (const auto &[name, x] : by_type)
        types[name] = {
            {"tensors", x.tensors}, {"bytes", x.bytes}, {"elements", x.elements}, {"bits_per_weight", bpw(x)}};
    return {{"bytes", all.bytes}, {"elements", all.elements}, {"bits_per_weight", bpw(all)}, {"types", types}};
}

// Any supported type, decoded row by row (a classifier head is small: n_embd x a few labels, or
// n_embd x n_embd).
std::vector<float> read_decoded(const WeightSource &src, const TensorInfo &t) {
    if (!type_supported(t.type))
        fail(LLM_ERR_UNSUPPORTED, "tensor '{}' has unsupported type {}", t.name, type_name(t.type));
    std::vector<float> v(t.n_elements());
    std::vector<uint8_t> row(t.row_bytes());
    for (uint64_t r = 0; r < t.n_rows(); ++r) {
        src.read(t, r * t.row_bytes(), row.data(), row.size());
        dequantize_row(t.type, row.data(), &v[r * t.ne[0]], static_cast<int64_t>(t.ne[0]));
    }
    return v;
}

// The cls.* tensors llama.cpp reads for RANK pooling (see Classifier); they join `used`.
Classifier read_classifier(const WeightSource &s, const ModelConfig &c, std::vector<const TensorInfo *> &used) {
    Classifier k;
    const TensorInfo *w = expect_tensor(s, "cls.weight", {c.n_embd, c.n_embd}, false);
    const TensorInfo *out = s.find("cls.output.weight");
    if (out) {
        if (out->ne[0] != c.n_embd || out->ne[2] != 1 || out->ne[3] != 1 || out->ne[1] == 0)
            fail(LLM_ERR_FORMAT, "tensor 'cls.output.weight' must be [{}, n_labels]", c.n_embd);
        k.out_w = read_decoded(s, *out);
        k.n_out = static_cast<int64_t>(out->ne[1]);
        used.push_back(out);
        if (const TensorInfo *b = expect_tensor(s, "cls.output.bias", {out->ne[1]}, false)) {
            k.out_b = read_decoded(s, *b);
            used.push_back(b);
        }
    }
    if (w) {
        k.w = read_decoded(s, *w);
        if (!out) k.n_out = c.n_embd;
        used.push_back(w);
        if (const TensorInfo *b = expect_tensor(s, "cls.bias", {c.n_embd}, false)) {
            k.b = read_decoded(s, *b);
            used.push_back(b);
        }
    }
    return k;
}

}  // namespace

std::unique_ptr<Model> Model::load(std::unique_ptr<WeightSource> src, const LoadOptions &opt) {
    std::unique_ptr<Model> m(new Model());
    m->src_ = std::move(src);
    m->vocab_only_ = opt.vocab_only;
    m->n_threads_ = opt.n_threads > 0 ? opt.n_threads : default_thread_count();
    const WeightSource &s = *m->src_;
    m->fingerprint_ = s.fingerprint();
    m->tok_ = Tokenizer::from_metadata(s.meta());

    if (!opt.vocab_only) {
        ModelConfig &c = m->cfg_;
        c = read_config(s.meta());
        c.n_vocab = static_cast<uint32_t>(m->tok_->n_vocab());
        m->tok_embd_ = expect_tensor(s, "token_embd.weight", {c.n_embd, c.n_vocab}, true);
        if (!type_supported(m->tok_embd_->type)) {
            fail(LLM_ERR_UNSUPPORTED, "tensor 'token_embd.weight' has unsupported type {}",
                 type_name(m->tok_embd_->type));
        }
        m->out_norm_ = read_f32(s, *expect_tensor(s, "output_norm.weight", {c.n_embd}, true));
        if (const TensorInfo *b = expect_tensor(s, "output_norm.bias", {c.n_embd}, c.arch->norm == NormKind::LAYER)) {
            m->out_norm_b_ = read_f32(s, *b);
        }
        m->output_ =
            c.arch->output_tied_always ? nullptr : expect_tensor(s, "output.weight", {c.n_embd, c.n_vocab}, false);
        if (!m->output_) m->output_ = m->tok_embd_;
        if (const TensorInfo *b = expect_tensor(s, "output.bias", {c.n_vocab}, false)) m->out_b_ = read_f32(s, *b);
        if (c.arch->position_embd) {
            m->pos_embd_ = expect_tensor(s, "position_embd.weight", {c.n_embd, c.n_ctx_train}, true);
            if (!type_supported(m->pos_embd_->type)) {
                fail(LLM_ERR_UNSUPPORTED, "tensor 'position_embd.weight' has unsupported type {}",
                     type_name(m->pos_embd_->type));
            }
        }
        if (!type_supported(m->output_->type)) {
            fail(LLM_ERR_UNSUPPORTED, "tensor '{}' has unsupported type {}", m->output_->name,
                 type_name(m->output_->type));
        }
        std::vector<const TensorInfo *> used = {m->tok_embd_, m->output_, m->pos_embd_};
        if (c.n_embd_per_layer > 0) {
            const uint64_t nl = static_cast<uint64_t>(c.n_layer) * c.n_embd_per_layer;
            m->ple_embd_ = expect_tensor(s, "per_layer_token_embd.weight", {nl, c.n_vocab}, true);
            m->ple_proj_ = expect_tensor(s, "per_layer_model_proj.weight", {c.n_embd, nl}, true);
            for (const TensorInfo *t : {m->ple_embd_, m->ple_proj_}) {
                if (!type_supported(t->type))
                    fail(LLM_ERR_UNSUPPORTED, "tensor '{}' has unsupported type {}", t->name, type_name(t->type));
            }
            const TensorInfo *norm = expect_tensor(s, "per_layer_proj_norm.weight", {c.n_embd_per_layer}, true);
            m->ple_norm_ = read_f32(s, *norm);
            m->ple_proj_bytes_ = AlignedBuffer(m->ple_proj_->nbytes);
            s.read(*m->ple_proj_, 0, m->ple_proj_bytes_.data(), m->ple_proj_->nbytes);
            used.insert(used.end(), {m->ple_embd_, m->ple_proj_, norm});
        }
        auto global = [&](const char *name, bool allowed, std::vector<float> &dst) {
            if (!allowed) return;
            if (const TensorInfo *t = expect_tensor(s, name, {c.n_rot / 2}, false)) {
                dst = read_f32(s, *t);
                used.push_back(t);
            }
        };
        global("rope_freqs.weight", c.arch->rope_freqs_tensor, m->rope_ff_);
        global("rope_factors_long.weight", c.arch->longrope_tensors, m->rope_long_);
        global("rope_factors_short.weight", c.arch->longrope_tensors, m->rope_short_);
        if (m->rope_long_.empty() != m->rope_short_.empty()) {
            fail(LLM_ERR_FORMAT, "LongRoPE needs both rope_factors_long.weight and rope_factors_short.weight");
        }
        for (const char *name : {"output_norm.weight", "output_norm.bias", "output.bias"}) used.push_back(s.find(name));
        m->cls_ = read_classifier(s, c, used);
        if (const auto pt = s.meta().u32(c.arch_name + ".pooling_type")) m->pooling_type_ = static_cast<int32_t>(*pt);
        m->blocks_ = bind_blocks(s, c);
        for (const BlockTensors &b : m->blocks_) used.insert(used.end(), b.t.begin(), b.t.end());
        const std::vector<const TensorInfo *> nextn = skipped_nextn_tensors(s, c);
        used.insert(used.end(), nextn.begin(), nextn.end());
        refuse_unused_tensors(s, used, c.arch_name);
        m->store_opt_ = opt.store;
        m->store_opt_.cache = m->src_->set_cache_policy(opt.store.cache);
        // A thread-bound host's read_at may run only on the calling thread: no I/O thread reads ahead.
        if (m->src_->thread_bound()) m->store_opt_.prefetch_depth = 0;
        m->layers_ = std::make_unique<LayerStore>(s, m->blocks_, m->store_opt_);

        // Decide what stays resident before reading any block, so an impossible budget costs nothing.
        ResidencyChoice keep{std::vector<bool>(m->layers_->n_units(), true), true};
        if (opt.store.residency == Residency::STREAMED) {
            keep = {std::vector<bool>(m->layers_->n_units(), false), false};
        } else if (opt.store.residency == Residency::BUDGET) {
            const uint64_t min = m->minimum_weight_bytes();
            if (opt.store.budget_bytes < min) {
                fail(LLM_ERR_OUT_OF_MEMORY,
                     "RAM budget {} bytes is below the minimum of {} bytes for this model "
                     "({} streaming slots of {} bytes + the norms and biases + an LM head chunk)",
                     opt.store.budget_bytes, min, 1 + m->layers_->prefetch_depth(), m->layers_->max_piece_bytes());
            }
            keep = m->choose_residency(opt.store.budget_bytes);
        }
        const float head_share = 0.1f;
        m->layers_->keep_resident(keep.units,
                                  [&](float f) { return !opt.progress || opt.progress(f * (1.0f - head_share)); });
        log().info("layer store: {} of {} half-blocks resident ({} bytes), largest streamed piece {} bytes",
                   keep.n_units(), m->layers_->n_units(), m->layers_->resident_bytes(), m->layers_->max_piece_bytes());
        m->apply_head_residency(keep.head_resident);
        if (opt.progress && !opt.progress(1.0f))
            fail(LLM_ERR_CANCELLED, "model load cancelled by the progress callback");
    }
    log().info("loaded {} model: {} layers, n_embd {}, vocab {}", m->cfg_.arch_name, m->cfg_.n_layer, m->cfg_.n_embd,
               m->tok_->n_vocab());
    return m;
}

const float *Model::rope_factors(int32_t n_ctx) const {
    if (!rope_ff_.empty()) return rope_ff_.data();
    if (rope_long_.empty()) return nullptr;
    const uint64_t padded = (static_cast<uint64_t>(std::max(n_ctx, 1)) + 255) / 256 * 256;
    return padded > cfg_.n_ctx_orig ? rope_long_.data() : rope_short_.data();
}

void Model::embed(int32_t token, float *dst, IoStats *stats) const {
    const TensorInfo &t = *tok_embd_;
    const uint64_t rb = t.row_bytes();
    thread_local std::vector<uint8_t> row;
    row.resize(rb);
    if (output_ == tok_embd_ && output_bytes_.size()) {
        if (head_packed())
            unpack_row(t.type, output_bytes_.data() + static_cast<uint64_t>(token / kPackRows) * kPackRows * rb,
                       static_cast<int64_t>(t.ne[0]), token % kPackRows, row.data());
        else
            std::memcpy(row.data(), output_bytes_.data() + static_cast<uint64_t>(token) * rb, rb);
    } else {
        src_->read(t, static_cast<uint64_t>(token) * rb, row.data(), rb);
        if (stats) stats->add_read(rb);
    }
    dequantize_row(t.type, row.data(), dst, static_cast<int64_t>(t.ne[0]));
}

void Model::per_layer_embed(int32_t token, float *dst, IoStats *stats) const {
    const TensorInfo &t = *ple_embd_;
    const uint64_t rb = t.row_bytes();
    thread_local std::vector<uint8_t> row;
    row.resize(rb);
    src_->read(t, static_cast<uint64_t>(token) * rb, row.data(), rb);
    if (stats) stats->add_read(rb);
    dequantize_row(t.type, row.data(), dst, static_cast<int64_t>(t.ne[0]));
}

WeightView Model::per_layer_proj() const {
    const TensorInfo &t = *ple_proj_;
    return {t.type, ple_proj_bytes_.data(), static_cast<int64_t>(t.ne[0]), static_cast<int64_t>(t.ne[1]),
            t.row_bytes()};
}

void Model::add_position(int32_t pos, float *dst, IoStats *stats) const {
    const TensorInfo &t = *pos_embd_;
    const uint64_t rb = t.row_bytes();
    thread_local std::vector<uint8_t> row;
    thread_local std::vector<float> f;
    row.resize(rb);
    f.resize(t.ne[0]);
    src_->read(t, static_cast<uint64_t>(pos) * rb, row.data(), rb);
    if (stats) stats->add_read(rb);
    dequantize_row(t.type, row.data(), f.data(), static_cast<int64_t>(t.ne[0]));
    for (uint64_t i = 0; i < t.ne[0]; ++i) dst[i] += f[i];
}

uint64_t Model::head_chunk_bytes() const {
    // Big enough that a chunk is one efficient read, small next to any block.
    const uint64_t rb = output_->row_bytes();
    const uint64_t rows = std::max<uint64_t>(1, (1ull << 20) / rb);
    return std::min<uint64_t>(rows, output_->ne[1]) * rb;
}

// The vectors (norms, biases) are resident whatever the budget: the units share what is left.
ResidencyChoice Model::choose_residency(uint64_t budget) const {
    const uint64_t vb = layers_->vector_bytes();
    const double routed = cfg_.n_expert ? static_cast<double>(cfg_.n_expert_used) / cfg_.n_expert : 1.0;
    return llm::choose_residency(budget > vb ? budget - vb : 0, layers_->unit_bytes(), output_->nbytes,
                                 layers_->stream_slot_bytes(), layers_->unit_decode_bytes(routed));
}

// Streaming needs the vectors, its slots and one head chunk, unless everything fits in less than that.
uint64_t Model::minimum_weight_bytes() const {
    return std::min(layers_->vector_bytes() + layers_->stream_slot_bytes() + head_chunk_bytes(),
                    layers_->total_block_bytes() + output_->nbytes);
}

// A resident head is packed exactly when its type and shape are packable (apply_head_residency).
bool Model::head_packed() const {
    return output_bytes_.size() && packable(output_->type, output_->ne[0], output_->ne[1]);
}

void Model::apply_head_residency(bool resident) {
    if (resident && output_bytes_.size() == 0) {
        AlignedBuffer b(output_->nbytes);
        src_->read(*output_, 0, b.data(), output_->nbytes);
        // Packed like a resident block's matrices: the head is the largest single matrix decode reads, and
        // the file-layout tiles would pack it on the fly every token (the same bits, a third of the speed).
        (void)pack_weights(output_->type, b.data(), output_->ne[0], output_->ne[1]);  // false: not packable, untouched
        output_bytes_ = std::move(b);
    } else if (!resident) {
        output_bytes_.clear();
    }
}

void Model::lm_head(const float *x, int64_t P, float *logits, ThreadPool *pool, AlignedBuffer &chunk_buf,
                    std::vector<float> &chunk_out, IoStats *stats) const {
    const int64_t V = output_->ne[1], E = output_->ne[0];
    const uint64_t rb = output_->row_bytes();
    if (output_bytes_.size()) {
        matmul({output_->type, output_bytes_.data(), E, V, rb, head_packed()}, x, P, logits, pool);
        return;
    }
    const int64_t rows = static_cast<int64_t>(head_chunk_bytes() / rb);
    chunk_out.resize(static_cast<size_t>(P * rows));
    MappedRange map;  // under MAP, the chunk's pages instead of a copy (one chunk mapped at a time)
    for (int64_t r0 = 0; r0 < V; r0 += rows) {
        const int64_t n = std::min(rows, V - r0);
        const uint64_t off = static_cast<uint64_t>(r0) * rb, len = static_cast<uint64_t>(n) * rb;
        const uint8_t *w = nullptr;
        if (layers_->maps() && (output_->offset + off) % kMapAlign == 0 &&
            src_->bytes(output_->shard).map_weights(output_->offset + off, len, map)) {
            w = map.data();
        } else {
            chunk_buf.resize(static_cast<size_t>(rows) * rb);
            src_->read(*output_, off, chunk_buf.data(), len);
            w = chunk_buf.data();
        }
        if (stats) stats->add_read(len);
        matmul({output_->type, w, E, n, rb}, x, P, chunk_out.data(), pool);
        for (int64_t p = 0; p < P; ++p) std::copy_n(&chunk_out[p * n], n, logits + p * V + r0);
    }
}

int64_t Model::prompt_chunk() const { return !vocab_only_ && streams() ? kStreamChunk : kPromptChunk; }

MemoryPlan Model::memory_plan(int32_t n_ctx, KvType k, KvType v) const {
    MemoryPlan mp;
    if (vocab_only_) return mp;
    const ModelConfig &c = cfg_;
    mp.n_layer = c.n_layer;
    mp.n_resident_layers = layers_->n_resident_layers();
    mp.resident_block_bytes = layers_->resident_bytes();
    const bool streamed = streams();
    mp.n_stream_slots = streamed ? 1 + layers_->prefetch_depth() : 0;
    mp.stream_slot_bytes = streamed ? layers_->stream_slot_bytes() : 0;
    mp.lm_head_bytes = output_bytes_.size() ? output_bytes_.size() : head_chunk_bytes();
    mp.embedding_bytes = tok_embd_->row_bytes();
    if (ple_embd_) mp.per_layer_embd_bytes = ple_embd_->row_bytes() + ple_proj_->nbytes;
    if (n_ctx <= 0) n_ctx = default_n_ctx(c.n_ctx_train);
    mp.kv_cache_bytes = KvCache::planned_bytes(c, n_ctx, k, v);  // the recurrent layers' state included
    // A prompt chunk's residual stream; the inputs and outputs of the matrices over W positions (the
    // chunk while any unit is streamed, each matrix being read once per chunk, else a sub-batch:
    // Scratch::ensure); one sub-batch's other intermediates; the logits.
    const uint64_t P = static_cast<uint64_t>(prompt_chunk()), S = kSubBatch, W = streamed ? P : S;
    const bool dense = c.n_expert == 0 || c.arch->moe_dense_branch;
    const uint64_t ff_wide = dense ? c.n_ff : 0,
                   ff_sub = dense ? (c.arch->ffn == FfnKind::SWIGLU_FUSED ? 2 : 1) * c.n_ff : 0;
    // The other kinds' and options' own buffers (Scratch::ensure).
    uint64_t kind_wide = 0, kind_sub = 0;
    if (c.arch->attn_output_gate) kind_wide += 3ull * c.n_q();
    if (c.has_recurrent()) {
        const GdnShape &g = c.gdn;
        kind_wide += g.conv_channels() + 2ull * g.value_dim() + 3ull * g.n_v_heads;
    }
    if (c.n_expert > 0 && c.arch->moe_dense_branch) {
        kind_wide += 2ull * c.n_embd;  // the experts' input, the dense branch's output
        kind_sub += c.n_embd;          // the router's input
    }
    // Per-layer inputs: every layer's for the chunk, and one layer's gate.
    const uint64_t ple_rows = static_cast<uint64_t>(c.n_layer) * c.n_embd_per_layer;
    kind_wide += c.n_embd_per_layer;
    if (c.arch->shared_expert) {
        kind_wide += c.n_ff_shexp + c.n_embd;
        kind_sub += c.n_ff_shexp;
    }
    mp.scratch_bytes = sizeof(float) * (P * c.n_embd * (c.arch->parallel_residual ? 3 : 1) + P * ple_rows +
                                        W * (c.n_embd + 2ull * c.n_q() + 2ull * c.n_kv() + ff_wide + kind_wide) +
                                        S * (2ull * c.n_embd + ff_sub + kind_sub) + 2ull * c.n_vocab + c.n_embd);
    mp.total_bytes = mp.resident_block_bytes + mp.stream_slot_bytes + mp.lm_head_bytes + mp.embedding_bytes +
                     mp.per_layer_embd_bytes + mp.kv_cache_bytes + mp.scratch_bytes;
    mp.minimum_weight_bytes = minimum_weight_bytes();
    return mp;
}

void Model::set_ram_budget(uint64_t bytes) {
    if (vocab_only_) return;
    const uint64_t min = minimum_weight_bytes();
    if (bytes < min) fail(LLM_ERR_OUT_OF_MEMORY, "RAM budget {} bytes is below the minimum of {} bytes", bytes, min);
    std::unique_lock<std::shared_mutex> lock(layers_->mutex());
    const ResidencyChoice keep = choose_residency(bytes);
    // Free first, then read: the peak never holds both the old and the new set.
    if (!keep.head_resident) apply_head_residency(false);
    layers_->keep_resident(keep.units);
    if (keep.head_resident) apply_head_residency(true);
    store_opt_.residency = Residency::BUDGET;
    store_opt_.budget_bytes = bytes;
    log().info("RAM budget {} bytes: {} of {} half-blocks resident, head {}", bytes, keep.n_units(), layers_->n_units(),
               keep.head_resident ? "resident" : "streamed");
}

std::shared_ptr<const grammar::VocabText> Model::grammar_vocab() const {
    std::call_once(grammar_vocab_once_, [&] {
        grammar_vocab_ = std::make_shared<const grammar::VocabText>(grammar::VocabText::build(*tok_));
    });
    return grammar_vocab_;
}

// The weight bytes one decoded token reads (what a decode's memory roof divides the read bandwidth
// by): every tensor but the tables a token reads one row of (the token table unless it is the LM
// head, position and per-layer token embeddings), routed expert matrices at n_expert_used of
// n_expert.
uint64_t Model::decode_read_bytes() const {
    const ModelConfig &c = cfg_;
    uint64_t all = 0, experts = 0;
    for (const TensorInfo &t : src_->tensors()) all += t.nbytes;
    for (const TensorInfo *t : {tok_embd_ == output_ ? nullptr : tok_embd_, pos_embd_, ple_embd_})
        if (t) all -= t->nbytes;
    for (const BlockTensors &b : blocks_)
        for (const RoleTraits &r : kRoleTraits)
            if (r.expert && b.t[r.key]) experts += b.t[r.key]->nbytes;
    return all - experts + (c.n_expert > 0 ? experts * c.n_expert_used / c.n_expert : experts);
}

std::string Model::info_json() const {
    nlohmann::json j;
    const WeightSource &s = *src_;
    j["gguf_version"] = s.version();
    j["file_bytes"] = s.file_size();
    j["fingerprint"] = fmt::format("{:016x}", fingerprint_);
    if (s.n_shards() > 1) j["n_shards"] = s.n_shards();  // file_bytes counts them all
    j["n_tensors"] = s.tensors().size();
    if (auto name = s.meta().str("general.name")) j["name"] = *name;
    j["tokenizer"] = {{"model", tok_->model_name()},
                      {"n_vocab", tok_->n_vocab()},
                      {"bos", tok_->bos()},
                      {"eos", tok_->eos()},
                      {"add_bos", tok_->adds_bos()}};
    j["vocab_only"] = vocab_only_;
    if (!vocab_only_) {
        const ModelConfig &c = cfg_;
        j["arch"] = c.arch_name;
        j["n_ctx_train"] = c.n_ctx_train;
        j["n_embd"] = c.n_embd;
        j["n_layer"] = c.n_layer;
        j["n_head"] = c.n_head;
        j["n_head_kv"] = c.n_head_kv;
        j["head_dim"] = c.head_dim;
        j["n_ff"] = c.n_ff;
        if (c.n_expert) j["n_ff_expert"] = c.n_ff_exp;
        j["n_rot"] = c.n_rot;
        if (c.n_expert) j["experts"] = {{"count", c.n_expert}, {"used", c.n_expert_used}};
        if (c.arch->shared_expert) j["n_ff_shared_expert"] = c.n_ff_shexp;
        if (c.arch->per_layer_shapes) {
            nlohmann::json shapes = nlohmann::json::array();
            for (const LayerShape &l : c.layer_shape)
                shapes.push_back(
                    {{"n_head_kv", l.n_head_kv}, {"head_dim", l.head_dim}, {"n_rot", l.n_rot}, {"n_ff", l.n_ff}});
            j["layer_shapes"] = shapes;
        }
        if (c.n_layer_kv < c.n_layer) j["kv_shared_layers"] = c.n_layer - c.n_layer_kv;
        if (c.n_embd_per_layer) j["n_embd_per_layer"] = c.n_embd_per_layer;
        std::vector<std::string> kinds;
        for (uint32_t l = 0; l < c.n_layer; ++l) kinds.emplace_back(name(c.kind(l)));
        j["layer_kinds"] = kinds;
        if (c.has_recurrent()) {
            const GdnShape &g = c.gdn;
            j["gated_delta_net"] = {{"conv_kernel", g.d_conv},
                                    {"key_heads", g.n_k_heads},
                                    {"value_heads", g.n_v_heads},
                                    {"head_dim", g.head_dim},
                                    {"head_map", c.arch->gdn_head_map == GdnHeadMap::TILED ? "tiled" : "interleaved"},
                                    {"state_bytes_per_layer", 4 * (g.conv_state_floats() + g.ssm_state_floats())}};
        }
        if (c.arch->attn_output_gate) j["attention_output_gate"] = true;
        if (c.arch->attn_sinks) j["attention_sinks"] = true;
        if (c.attn_temp_scale != 0.0f)
            j["attention_temperature"] = {{"scale", c.attn_temp_scale}, {"floor_positions", c.attn_temp_floor}};
        if (c.n_expert && c.arch->expert_weights != ExpertWeights::SOFTMAX_NORM) {
            j["experts"]["weights"] = name(c.arch->expert_weights);
            j["experts"]["biases"] = c.arch->moe_biases;
        }
        if (c.arch->reads_yarn_extras && c.rope_ext_factor != 0.0f)
            j["yarn"] = {
                {"beta_fast", c.yarn_beta_fast}, {"beta_slow", c.yarn_beta_slow}, {"log_multiplier", c.yarn_log_mul}};
        if (c.n_layer_nextn) j["nextn_layers_skipped"] = c.n_layer_nextn;
        j["norm"] = name(c.arch->norm);
        j["ffn"] = name(c.arch->ffn);
        j["parallel_residual"] = c.arch->parallel_residual;
        j["post_norms"] = c.arch->post_norms;
        j["qk_norm"] = c.arch->qk_norm;
        j["embedding_scale"] = c.embed_scale;
        j["position_embd"] = pos_embd_ != nullptr;
        j["sliding_window"] = {{"window", c.swa_window}, {"pattern", c.swa_pattern}, {"rope_base", c.rope_base_swa}};
        j["softcap"] = {{"attention", c.attn_softcap}, {"final", c.final_softcap}};
        j["q_scale"] = c.q_scale;
        j["kq_scale"] = c.kq_scale;
        j["rope"] = {{"style", name(c.arch->rope)},     {"freq_base", c.rope_base},
                     {"freq_scale", c.rope_freq_scale}, {"rope_freqs", !rope_ff_.empty()},
                     {"scaling", name(c.rope_scaling)}, {"attn_factor", c.rope_attn_factor},
                     {"ext_factor", c.rope_ext_factor}, {"original_context_length", c.n_ctx_orig},
                     {"longrope", !rope_long_.empty()}};
        j["norm_eps"] = c.norm_eps;
        j["tied_output"] = output_ == tok_embd_;
        std::map<std::string, int> types;
        for (const TensorInfo &t : s.tensors()) ++types[type_name(t.type)];
        j["tensor_types"] = types;
        j["weights"] = weight_types_json(s.tensors());
        j["weights"]["decode_read_bytes"] = decode_read_bytes();
        const MemoryPlan mp = memory_plan(0);
        j["memory"] = {{"residency", name(store_opt_.residency)},
                       {"ram_budget_bytes", store_opt_.budget_bytes},
                       {"prefetch_depth", layers_->prefetch_depth()},
                       {"page_cache", name(store_opt_.cache)},
                       {"n_resident_layers", mp.n_resident_layers},
                       {"resident_block_bytes", mp.resident_block_bytes},
                       {"n_resident_half_blocks", layers_->n_resident_units()},
                       {"max_half_block_bytes", layers_->max_unit_bytes()},
                       {"max_stream_piece_bytes", layers_->max_piece_bytes()},
                       {"vector_bytes", layers_->vector_bytes()},
                       {"n_stream_slots", mp.n_stream_slots},
                       {"stream_slot_bytes", mp.stream_slot_bytes},
                       {"lm_head_resident", output_bytes_.size() > 0},
                       {"lm_head_packed", head_packed()},
                       {"lm_head_bytes", mp.lm_head_bytes},
                       {"embedding_bytes", mp.embedding_bytes},
                       {"per_layer_embd_bytes", mp.per_layer_embd_bytes},
                       {"kv_cache_bytes_default_ctx", mp.kv_cache_bytes},
                       {"recurrent_state_bytes", RecurrentState::planned_bytes(c)},
                       {"scratch_bytes", mp.scratch_bytes},
                       {"predicted_peak_bytes", mp.total_bytes},
                       {"minimum_weight_bytes", mp.minimum_weight_bytes}};
    }
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);  // invalid UTF-8 (a file's name) as U+FFFD
}

}  // namespace llm
