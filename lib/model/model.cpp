#include "model/model.h"

#include <cstring>
#include <map>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "kernels/dequant.h"

namespace llm {
namespace {

std::vector<float> read_f32(const WeightSource &src, const TensorInfo &t) {
    if (t.type != TensorType::F32) fail(LLM_ERR_UNSUPPORTED, "tensor '{}' must be F32, has {}", t.name, type_name(t.type));
    std::vector<float> v(t.n_elements());
    src.read(t, 0, v.data(), t.nbytes);
    return v;
}

}  // namespace

std::unique_ptr<Model> Model::load(std::unique_ptr<WeightSource> src, const LoadOptions &opt) {
    std::unique_ptr<Model> m(new Model());
    m->src_ = std::move(src);
    m->vocab_only_ = opt.vocab_only;
    m->n_threads_ = opt.n_threads > 0 ? opt.n_threads : default_thread_count();
    const WeightSource &s = *m->src_;
    m->tok_ = Tokenizer::from_metadata(s.meta());

    if (!opt.vocab_only) {
        ModelConfig &c = m->cfg_;
        c = read_config(s.meta());
        c.n_vocab = static_cast<uint32_t>(m->tok_->n_vocab());
        m->tok_embd_ = expect_tensor(s, "token_embd.weight", {c.n_embd, c.n_vocab}, true);
        if (!type_supported(m->tok_embd_->type)) {
            fail(LLM_ERR_UNSUPPORTED, "tensor 'token_embd.weight' has unsupported type {}", type_name(m->tok_embd_->type));
        }
        m->out_norm_ = read_f32(s, *expect_tensor(s, "output_norm.weight", {c.n_embd}, true));
        if (const TensorInfo *b = expect_tensor(s, "output_norm.bias", {c.n_embd}, c.arch->norm == NormKind::LAYER)) {
            m->out_norm_b_ = read_f32(s, *b);
        }
        m->output_ = c.arch->output_tied_always ? nullptr : expect_tensor(s, "output.weight", {c.n_embd, c.n_vocab}, false);
        if (!m->output_) m->output_ = m->tok_embd_;
        if (const TensorInfo *b = expect_tensor(s, "output.bias", {c.n_vocab}, false)) m->out_b_ = read_f32(s, *b);
        if (c.arch->position_embd) {
            m->pos_embd_ = expect_tensor(s, "position_embd.weight", {c.n_embd, c.n_ctx_train}, true);
            if (!type_supported(m->pos_embd_->type)) {
                fail(LLM_ERR_UNSUPPORTED, "tensor 'position_embd.weight' has unsupported type {}", type_name(m->pos_embd_->type));
            }
        }
        if (!type_supported(m->output_->type)) {
            fail(LLM_ERR_UNSUPPORTED, "tensor '{}' has unsupported type {}", m->output_->name, type_name(m->output_->type));
        }
        if (const TensorInfo *rf = expect_tensor(s, "rope_freqs.weight", {c.n_rot / 2}, false)) {
            m->rope_ff_ = read_f32(s, *rf);
        }
        m->blocks_ = bind_blocks(s, c);
        m->layers_ = std::make_unique<LayerStore>(s, m->blocks_);

        // Progress: blocks then the LM head, weighted by bytes would be nicer; layers dominate.
        const float head_share = 0.1f;
        m->layers_->load_all([&](float f) { return !opt.progress || opt.progress(f * (1.0f - head_share)); });
        m->output_bytes_.resize(m->output_->nbytes);
        s.read(*m->output_, 0, m->output_bytes_.data(), m->output_->nbytes);
        if (opt.progress && !opt.progress(1.0f)) fail(LLM_ERR_CANCELLED, "model load cancelled by the progress callback");
    }
    m->build_info_json();
    log().info("loaded {} model: {} layers, n_embd {}, vocab {}", m->cfg_.arch_name, m->cfg_.n_layer,
               m->cfg_.n_embd, m->tok_->n_vocab());
    return m;
}

void Model::embed(int32_t token, float *dst) const {
    const TensorInfo &t = *tok_embd_;
    const uint64_t rb = t.row_bytes();
    thread_local std::vector<uint8_t> row;
    row.resize(rb);
    if (output_ == tok_embd_) {
        std::memcpy(row.data(), output_bytes_.data() + static_cast<uint64_t>(token) * rb, rb);
    } else {
        src_->read(t, static_cast<uint64_t>(token) * rb, row.data(), rb);
    }
    dequantize_row(t.type, row.data(), dst, static_cast<int64_t>(t.ne[0]));
}

void Model::add_position(int32_t pos, float *dst) const {
    const TensorInfo &t = *pos_embd_;
    const uint64_t rb = t.row_bytes();
    thread_local std::vector<uint8_t> row;
    thread_local std::vector<float> f;
    row.resize(rb);
    f.resize(t.ne[0]);
    src_->read(t, static_cast<uint64_t>(pos) * rb, row.data(), rb);
    dequantize_row(t.type, row.data(), f.data(), static_cast<int64_t>(t.ne[0]));
    for (uint64_t i = 0; i < t.ne[0]; ++i) dst[i] += f[i];
}

WeightView Model::output_view() const {
    return {output_->type, output_bytes_.data(), static_cast<int64_t>(output_->ne[0]),
            static_cast<int64_t>(output_->ne[1]), output_->row_bytes()};
}

void Model::build_info_json() {
    nlohmann::json j;
    const WeightSource &s = *src_;
    j["gguf_version"] = s.version();
    j["file_bytes"] = s.file_size();
    j["n_tensors"] = s.tensors().size();
    if (auto name = s.meta().str("general.name")) j["name"] = *name;
    j["tokenizer"] = {{"model", tok_->model_name()}, {"n_vocab", tok_->n_vocab()}, {"bos", tok_->bos()},
                      {"eos", tok_->eos()}, {"add_bos", tok_->adds_bos()}};
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
        j["n_rot"] = c.n_rot;
        if (c.n_expert) j["experts"] = {{"count", c.n_expert}, {"used", c.n_expert_used}};
        j["norm"] = c.arch->norm == NormKind::RMS ? "rms" : "layer";
        j["ffn"] = c.arch->ffn == FfnKind::SWIGLU ? "swiglu" : c.arch->ffn == FfnKind::GEGLU ? "geglu"
                 : c.arch->ffn == FfnKind::SWIGLU_FUSED ? "swiglu_fused" : "gelu";
        j["parallel_residual"] = c.arch->parallel_residual;
        j["post_norms"] = c.arch->post_norms;
        j["qk_norm"] = c.arch->qk_norm;
        j["embedding_scale"] = c.embed_scale;
        j["position_embd"] = pos_embd_ != nullptr;
        j["sliding_window"] = {{"window", c.swa_window}, {"pattern", c.swa_pattern}, {"rope_base", c.rope_base_swa}};
        j["softcap"] = {{"attention", c.attn_softcap}, {"final", c.final_softcap}};
        j["q_scale"] = c.q_scale;
        j["kq_scale"] = c.kq_scale;
        j["rope"] = {{"style", c.arch->rope == RopeKind::NORM ? "norm" : c.arch->rope == RopeKind::NEOX ? "neox" : "none"},
                     {"freq_base", c.rope_base}, {"freq_scale", c.rope_freq_scale}, {"rope_freqs", !rope_ff_.empty()}};
        j["norm_eps"] = c.norm_eps;
        j["tied_output"] = output_ == tok_embd_;
        std::map<std::string, int> types;
        for (const TensorInfo &t : s.tensors()) ++types[type_name(t.type)];
        j["tensor_types"] = types;
        j["memory"] = {{"resident_block_bytes", layers_->resident_bytes()},
                       {"output_bytes", output_bytes_.size()},
                       {"residency", "resident"}};
    }
    info_json_ = j.dump();
}

}  // namespace llm
