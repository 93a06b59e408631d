// A loaded model: immutable after load and shareable by sessions on several threads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/aligned_buffer.h"
#include "gguf/weight_source.h"
#include "model/config.h"
#include "loader/layer_store.h"
#include "model/weights.h"
#include "tokenizer/tokenizer.h"

namespace llm {

struct LoadOptions {
    bool vocab_only = false;
    int32_t n_threads = 0;
    std::function<bool(float)> progress;  // may be empty
};

class Model {
public:
    // Takes the source; reads metadata, tokenizer and (unless vocab_only) the weights.
    static std::unique_ptr<Model> load(std::unique_ptr<WeightSource> src, const LoadOptions &opt);

    const ModelConfig &config() const { return cfg_; }
    const Tokenizer &tokenizer() const { return *tok_; }
    const WeightSource &source() const { return *src_; }
    const LayerStore &layers() const { return *layers_; }
    bool vocab_only() const { return vocab_only_; }
    int32_t default_threads() const { return n_threads_; }
    const std::string &info_json() const { return info_json_; }

    // token_embd row of `token` -> dst[n_embd], read from storage (only rows in use are touched).
    void embed(int32_t token, float *dst) const;
    WeightView output_view() const;
    // position_embd row of pos added to dst[n_embd] (learned absolute positions, gpt2).
    void add_position(int32_t pos, float *dst) const;
    bool has_position_embd() const { return pos_embd_ != nullptr; }
    const float *output_norm() const { return out_norm_.data(); }
    const float *output_norm_bias() const { return out_norm_b_.empty() ? nullptr : out_norm_b_.data(); }
    const float *output_bias() const { return out_b_.empty() ? nullptr : out_b_.data(); }
    const float *rope_freqs() const { return rope_ff_.empty() ? nullptr : rope_ff_.data(); }

private:
    void build_info_json();

    std::unique_ptr<WeightSource> src_;
    ModelConfig cfg_;
    std::unique_ptr<Tokenizer> tok_;
    std::vector<BlockTensors> blocks_;
    std::unique_ptr<LayerStore> layers_;
    const TensorInfo *tok_embd_ = nullptr;
    const TensorInfo *output_ = nullptr;   // token_embd when tied
    AlignedBuffer output_bytes_;
    const TensorInfo *pos_embd_ = nullptr;
    std::vector<float> out_norm_, out_norm_b_, out_b_;
    std::vector<float> rope_ff_;
    bool vocab_only_ = false;
    int32_t n_threads_ = 1;
    std::string info_json_;
};

}  // namespace llm
