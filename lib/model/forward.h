// The forward pass: embed -> for each block, for each of its two units (attention half, FFN half):
// lease the unit's weights from the BlockStreamer, run that half of the recipe, end the lease ->
// norm -> logits. One recipe serves every architecture; it reads its choices from the ArchSpec.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/aligned_buffer.h"
#include "loader/streamer.h"
#include "model/kv_type.h"
#include "model/limits.h"
#include "model/model.h"

namespace llm {

class ThreadPool;

// Keys (after RoPE) and values of every layer, in f32: [n_layer][n_ctx][n_kv].
class KvCache {
public:
    KvCache(const ModelConfig &c, int32_t n_ctx);
    float *k(uint32_t layer, int32_t pos) { return k_.data() + offset(layer, pos); }
    float *v(uint32_t layer, int32_t pos) { return v_.data() + offset(layer, pos); }
    int32_t n_ctx() const { return n_ctx_; }
    uint64_t bytes() const { return (k_.size() + v_.size()) * sizeof(float); }

    // Saved sessions and context shift reach the stored rows only through the calls below, so a
    // change of storage (element types, a window ring) is adapted here alone. A "row" is one
    // position's keys (or values) of one layer as stored.
    KvType type_k() const { return KvType::F32; }
    KvType type_v() const { return KvType::F32; }
    uint64_t row_bytes_k(uint32_t layer) const { (void)layer; return n_kv_ * sizeof(float); }
    uint64_t row_bytes_v(uint32_t layer) const { (void)layer; return n_kv_ * sizeof(float); }
    // The first of positions [0, n_past) that layer still holds and later tokens can see (0 here; a
    // window ring holds only the last window's positions).
    int32_t first_held(uint32_t layer, int32_t n_past) const { (void)layer; (void)n_past; return 0; }
    // Rows of positions [first, last) of a layer, keys then values: (last - first) * row_bytes_k bytes
    // of keys at k_dst, as many value rows at v_dst. copy_in puts saved rows back where positions
    // [first, last) belong, and never allocates or throws.
    void copy_out(uint32_t layer, int32_t first, int32_t last, void *k_dst, void *v_dst) const;
    void copy_in(uint32_t layer, int32_t first, int32_t last, const void *k_src, const void *v_src) noexcept;
    // Context shift: on every layer, positions [keep + discard, n_past) move down to start at keep.
    // rotate(layer, keys, n) then re-rotates the n moved keys, handed over as f32 rows of n_kv.
    using KeyRotator = std::function<void(uint32_t layer, float *keys, int64_t n)>;
    void shift(int32_t keep, int32_t discard, int32_t n_past, const KeyRotator &rotate);

private:
    size_t offset(uint32_t layer, int32_t pos) const { return (static_cast<size_t>(layer) * n_ctx_ + pos) * n_kv_; }
    int32_t n_ctx_;
    uint32_t n_layer_;
    size_t n_kv_;
    std::vector<float> k_, v_;
};

// Per-session activations, grown to the largest batch seen.
struct Scratch {
    std::vector<float> h, x, qkv, q, k, v, att, o, f, gate, up, logits_in;
    std::vector<float> par_x, par_o;  // parallel-residual archs: attention half -> FFN half, [P][n_embd]
    AlignedBuffer head_chunk;         // streamed LM head rows
    std::vector<float> head_out;
    void ensure(const ModelConfig &c, int64_t P, int64_t head_rows);
};

struct ForwardRequest {
    const int32_t *tokens = nullptr;
    int64_t n_tokens = 0;
    int32_t pos0 = 0;                           // position of tokens[0]
    bool all_logits = false;                    // logits for every token, else only the last
    float *logits = nullptr;                    // [all_logits ? n_tokens : 1][n_vocab]; nullptr: skip the head
    const std::atomic<bool> *cancel = nullptr;  // checked between blocks
    BlockStreamer *blocks = nullptr;            // where block weights come from
    IoStats *stats = nullptr;
};

void forward(const Model &m, KvCache &kv, Scratch &s, ThreadPool *pool, const ForwardRequest &req);

}  // namespace llm
