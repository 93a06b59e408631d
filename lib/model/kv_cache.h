// The KV cache: what one sequence keeps of every layer, by the layer's kind. Attention layers keep
// keys (after RoPE) and values, one row of the layer's n_kv = n_head_kv·head_dim elements per position (a
// windowed layer's may differ from a full one's: gemma4), in the
// session's element type (F32, F16 or Q8_0, chosen separately for K and V); layers that attend to a
// sliding window keep only the positions a query can still reach, reused as a ring, the others
// n_ctx positions. Recurrent layers keep no rows, only their fixed state (recurrent()).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "model/config.h"
#include "model/kv_type.h"
#include "model/recurrent_state.h"

namespace llm {

// Bytes of one cached row of n elements: Q8_0 pads the row to whole blocks of 32 (zeros).
uint64_t kv_row_bytes(KvType t, int64_t n);

// Positions a windowed layer's ring holds. attention() writes at most kKvWriteBatch new positions
// before their queries read the cache, and the first of those queries still needs the window - 1
// positions before it, so no key is overwritten before its last use.
int32_t kv_ring_positions(uint32_t window, int32_t n_ctx);

class KvCache {
public:
    // ring = false keeps n_ctx positions on every layer (a test switch: the results are the same).
    KvCache(const ModelConfig &c, int32_t n_ctx, KvType k, KvType v, bool ring = true);

    // The most a cache of these parameters allocates, the recurrent state and its checkpoints included
    // (the memory plan asks this).
    static uint64_t planned_bytes(const ModelConfig &c, int32_t n_ctx, KvType k, KvType v, bool ring = true);

    KvType type_k() const { return type_k_; }
    KvType type_v() const { return type_v_; }
    // Bytes of one cached row of the layer (0 on a recurrent layer: it keeps no rows).
    uint64_t row_bytes_k(uint32_t layer) const { return has_rows(layer) ? layers_[layer].row_k : 0; }
    uint64_t row_bytes_v(uint32_t layer) const { return has_rows(layer) ? layers_[layer].row_v : 0; }
    int32_t n_ctx() const { return n_ctx_; }
    // The context length that picks the RoPE factor table (Model::rope_factors): n_ctx, or the
    // session's when an embedding's cache is cut to its text (so a text gets the table its
    // session's context would).
    int32_t rope_ctx() const { return rope_ctx_ > 0 ? rope_ctx_ : n_ctx_; }
    void set_rope_ctx(int32_t n) { rope_ctx_ = n; }
    // Elements of one cached row of the layer.
    int64_t n_kv(uint32_t layer) const { return layers_[layer].n_kv; }
    uint64_t bytes() const { return k_.size() + v_.size() + rec_.bytes(); }
    // The recurrent layers' state (empty without them).
    RecurrentState &recurrent() { return rec_; }
    const RecurrentState &recurrent() const { return rec_; }

    // Positions layer `layer` keeps: n_ctx, the ring's size on windowed layers, 0 on recurrent ones.
    int32_t capacity(uint32_t layer) const { return layers_[layer].capacity; }
    bool is_ring(uint32_t layer) const { return layers_[layer].capacity > 0 && layers_[layer].capacity < n_ctx_; }
    // The layer keeps KV rows (an attention layer).
    bool has_rows(uint32_t layer) const { return layers_[layer].capacity > 0; }
    // Consecutive positions pos, pos+1, ... sit in consecutive rows up to the ring's end: how many.
    int32_t run_length(uint32_t layer, int32_t pos) const {
        const int32_t cap = layers_[layer].capacity;
        return cap - pos % cap;
    }

    // The row holding position pos (its ring slot on windowed layers), row_bytes_k/v() long.
    uint8_t *k_row(uint32_t layer, int32_t pos) { return k_.data() + offset_k(layer, pos); }
    uint8_t *v_row(uint32_t layer, int32_t pos) { return v_.data() + offset_v(layer, pos); }
    const uint8_t *k_row(uint32_t layer, int32_t pos) const { return k_.data() + offset_k(layer, pos); }
    const uint8_t *v_row(uint32_t layer, int32_t pos) const { return v_.data() + offset_v(layer, pos); }

    // Converts k and v (the layer's n_kv f32 each) to the cache's types and stores them as position pos.
    void store(uint32_t layer, int32_t pos, const float *k, const float *v);
    // Elements [e0, e0 + n) of a cached row as f32 (the exact values attention reads).
    void read_k(uint32_t layer, int32_t pos, int64_t e0, int64_t n, float *dst) const;
    void read_v(uint32_t layer, int32_t pos, int64_t e0, int64_t n, float *dst) const;

    // Whether the rows of position pos are still those written for it: always true on full-length
    // layers; on a ring, false once a later position has taken its slot (or before it was written).
    bool holds(uint32_t layer, int32_t pos) const;
    // Whether every windowed layer still holds the positions a query at position n reads
    // (n - window + 1 .. n - 1): what a session checks after a truncation or a failed call.
    bool holds_window_before(int32_t n) const;
    // Raw bytes of positions [p0, p1) of one layer, K rows then V rows (each position's row as
    // stored), for saving a session; copy_in writes them back and marks them held. On a ring,
    // [p0, p1) must be positions it holds (copy_out) or can hold at once (p1 - p0 <= capacity).
    // Nothing on a recurrent layer (no rows).
    void copy_out(uint32_t layer, int32_t p0, int32_t p1, uint8_t *k_dst, uint8_t *v_dst) const;
    void copy_in(uint32_t layer, int32_t p0, int32_t p1, const uint8_t *k_src, const uint8_t *v_src);
    // Forgets which positions the rings hold, and zeroes the recurrent state (after a reset, or
    // before recomputing the context from position 0).
    void clear();

    // The oldest position p such that layer holds every position of [p, n_past): 0 on full-length
    // layers; on a ring at least n_past - capacity, more once a truncation or failed call took slots.
    int32_t first_held(uint32_t layer, int32_t n_past) const;
    // The oldest of positions [0, n_past) layer can hold at once (0 on full-length layers).
    int32_t first_storable(uint32_t layer, int32_t n_past) const {
        return is_ring(layer) ? std::max(0, n_past - layers_[layer].capacity) : 0;
    }

    // Context shift: on every layer positions [keep + discard, n_past) are renumbered to start at
    // keep (rows move; on a ring to the slots of their new positions, as every slot is pos % capacity).
    // rotate(layer, keys, n) re-rotates n moved keys handed over as f32 rows of n_kv; F16 and Q8_0
    // keys are decoded, rotated and stored again (Q8_0's requantization changes them slightly).
    // Values only move.
    using KeyRotator = std::function<void(uint32_t layer, float *keys, int64_t n)>;
    void shift(int32_t keep, int32_t discard, int32_t n_past, const KeyRotator &rotate);

private:
    struct Layer {
        int32_t capacity = 0;
        int64_t n_kv = 0;                 // elements of a row
        uint64_t row_k = 0, row_v = 0;    // bytes of a row
        uint64_t base_k = 0, base_v = 0;  // the layer's first row in k_ / v_, in bytes
        std::vector<int32_t> owner;       // ring layers: the position each slot holds (-1: none)
    };
    uint64_t offset_k(uint32_t layer, int32_t pos) const {
        const Layer &l = layers_[layer];
        return l.base_k + static_cast<uint64_t>(pos % l.capacity) * l.row_k;
    }
    uint64_t offset_v(uint32_t layer, int32_t pos) const {
        const Layer &l = layers_[layer];
        return l.base_v + static_cast<uint64_t>(pos % l.capacity) * l.row_v;
    }
    static void read_row(KvType t, const uint8_t *row, int64_t e0, int64_t n, float *dst);

    int32_t n_ctx_;
    int32_t rope_ctx_ = 0;  // 0: n_ctx_
    uint32_t window_ = 0;
    KvType type_k_, type_v_;
    std::vector<Layer> layers_;
    std::vector<uint8_t> k_, v_;
    RecurrentState rec_;
};

}  // namespace llm
