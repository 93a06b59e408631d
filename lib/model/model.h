// A loaded model: shared by sessions on several threads. Immutable after load except for the
// RAM-budget dial, which sessions observe through the LayerStore's mutex.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/aligned_buffer.h"
#include "gguf/weight_source.h"
#include "kernels/matmul.h"
#include "loader/layer_store.h"
#include "model/config.h"
#include "model/kv_type.h"
#include "model/weights.h"
#include "tokenizer/tokenizer.h"

namespace llm {

class ThreadPool;

struct LoadOptions {
    bool vocab_only = false;
    int32_t n_threads = 0;
    LayerStoreOptions store;
    std::function<bool(float)> progress;  // may be empty
};

// Predicted memory of the model plus one session with n_ctx positions.
// A reranker's classifier head (llama.cpp's cls.* tensors), decoded to f32 at load: optionally
// hidden = tanh(w·x + b) ([n_embd] -> [n_embd]), then out = out_w·hidden + out_b ([n_out] scores).
// Empty (n_out 0) for models without one.
struct Classifier {
    std::vector<float> w, b, out_w, out_b;  // absent parts empty
    int64_t n_out = 0;                      // rows of out_w (or of w when there is no out_w)
};

struct MemoryPlan {
    uint32_t n_layer = 0, n_resident_layers = 0, n_stream_slots = 0;
    uint64_t resident_block_bytes = 0;
    uint64_t stream_slot_bytes = 0;  // per session, when any block is streamed
    uint64_t lm_head_bytes = 0;      // resident head, or one streamed chunk
    uint64_t embedding_bytes = 0;    // rows are read on demand: one row of scratch
    // Per-layer token embeddings (gemma4's E2B/E4B): their table is read by rows like token_embd (one
    // row of scratch); the projection from the embeddings, per_layer_model_proj, is resident.
    uint64_t per_layer_embd_bytes = 0;
    uint64_t kv_cache_bytes = 0;
    uint64_t scratch_bytes = 0;
    uint64_t total_bytes = 0;
    uint64_t minimum_weight_bytes = 0;  // the smallest ram budget that can run the model
};

namespace grammar {
struct VocabText;
}

class Model {
public:
    // Takes the source; reads metadata, tokenizer and (unless vocab_only) the weights the residency
    // policy keeps. A budget below the minimum fails with LLM_ERR_OUT_OF_MEMORY before any block is read.
    static std::unique_ptr<Model> load(std::unique_ptr<WeightSource> src, const LoadOptions &opt);

    const ModelConfig &config() const { return cfg_; }
    const Tokenizer &tokenizer() const { return *tok_; }
    const WeightSource &source() const { return *src_; }
    const LayerStore &layers() const { return *layers_; }
    bool vocab_only() const { return vocab_only_; }
    int32_t default_threads() const { return n_threads_; }
    // WeightSource::fingerprint of the file, computed once at load: binds saved sessions to it.
    uint64_t fingerprint() const { return fingerprint_; }
    std::string info_json() const;
    // The vocabulary's texts decoded for grammar-constrained sampling: built by the first session that
    // sets a grammar, then shared (any thread).
    std::shared_ptr<const grammar::VocabText> grammar_vocab() const;

    // token_embd row of `token` -> dst[n_embd], read from storage (only rows in use are touched).
    void embed(int32_t token, float *dst, IoStats *stats) const;
    // position_embd row of pos added to dst[n_embd] (learned absolute positions, gpt2).
    void add_position(int32_t pos, float *dst, IoStats *stats) const;
    bool has_position_embd() const { return pos_embd_ != nullptr; }
    // per_layer_token_embd row of `token` -> dst[n_layer · n_embd_per_layer], read from storage.
    void per_layer_embed(int32_t token, float *dst, IoStats *stats) const;
    // per_layer_model_proj [n_embd -> n_layer · n_embd_per_layer] (resident) and per_layer_proj_norm.
    WeightView per_layer_proj() const;
    const float *per_layer_proj_norm() const { return ple_norm_.data(); }
    const float *output_norm() const { return out_norm_.data(); }
    const float *output_norm_bias() const { return out_norm_b_.empty() ? nullptr : out_norm_b_.data(); }
    const float *output_bias() const { return out_b_.empty() ? nullptr : out_b_.data(); }
    const Classifier &classifier() const { return cls_; }
    // <arch>.pooling_type as llama.cpp's enum (0 none, 1 mean, 2 cls, 3 last, 4 rank); -1 when the
    // file has no such key.
    int32_t pooling_type() const { return pooling_type_; }
    // RoPE frequency divisors for a session of n_ctx positions: rope_freqs if the file has it, else
    // LongRoPE's long table when the context (padded to 256, as llama.cpp pads it) is longer than
    // rope.scaling.original_context_length, else its short table; nullptr without any.
    const float *rope_factors(int32_t n_ctx) const;

    // logits[P][n_vocab] = W_out · x[P][n_embd]; the head is streamed in row chunks (through
    // chunk_buf) when it is not resident.
    void lm_head(const float *x, int64_t P, float *logits, ThreadPool *pool, AlignedBuffer &chunk_buf,
                 std::vector<float> &chunk_out, IoStats *stats) const;

    // Whether any unit is streamed (with the resident set as it is now).
    bool streams() const { return layers_->n_resident_units() < layers_->n_units(); }
    // Prompt tokens per forward() call: kStreamChunk while any unit is streamed, else kPromptChunk.
    int64_t prompt_chunk() const;

    // A session of n_ctx positions (<= 0: the default) with keys and values cached as k and v.
    MemoryPlan memory_plan(int32_t n_ctx, KvType k = kDefaultKvType, KvType v = kDefaultKvType) const;
    // The run-time dial: keeps resident what a BUDGET load with `bytes` would (choose_residency).
    // Caller must not run sessions concurrently (it still takes the store's mutex exclusively).
    void set_ram_budget(uint64_t bytes);

private:
    uint64_t head_chunk_bytes() const;
    uint64_t minimum_weight_bytes() const;
    ResidencyChoice choose_residency(uint64_t budget) const;  // BUDGET's policy with this model's sizes
    void apply_head_residency(bool resident);
    bool head_packed() const;  // output_bytes_ in the packed layout (kernels/repack.h)
    uint64_t decode_read_bytes() const;

    std::unique_ptr<WeightSource> src_;
    ModelConfig cfg_;
    std::unique_ptr<Tokenizer> tok_;
    std::vector<BlockTensors> blocks_;
    std::unique_ptr<LayerStore> layers_;
    const TensorInfo *tok_embd_ = nullptr;
    const TensorInfo *output_ = nullptr;  // token_embd when tied
    const TensorInfo *pos_embd_ = nullptr;
    const TensorInfo *ple_embd_ = nullptr, *ple_proj_ = nullptr;
    AlignedBuffer ple_proj_bytes_;
    std::vector<float> ple_norm_;
    AlignedBuffer output_bytes_;  // empty when the head is streamed
    std::vector<float> out_norm_, out_norm_b_, out_b_;
    Classifier cls_;
    int32_t pooling_type_ = -1;
    std::vector<float> rope_ff_, rope_long_, rope_short_;
    LayerStoreOptions store_opt_;
    bool vocab_only_ = false;
    int32_t n_threads_ = 1;
    uint64_t fingerprint_ = 0;
    mutable std::once_flag grammar_vocab_once_;
    mutable std::shared_ptr<const grammar::VocabText> grammar_vocab_;
};

}  // namespace llm
