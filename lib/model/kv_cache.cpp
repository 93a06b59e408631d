#include "model/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "kernels/blocks.h"
#include "kernels/fp16.h"
#include "kernels/kernel_table.h"
#include "model/limits.h"

namespace llm {

uint64_t kv_row_bytes(KvType t, int64_t n) {
    switch (t) {
    case KvType::F32: return 4ull * n;
    case KvType::F16: return 2ull * n;
    case KvType::Q8_0: return static_cast<uint64_t>((n + QK - 1) / QK) * sizeof(BlockQ8_0);
    }
    return 0;
}

const char *name(KvType t) {
    switch (t) {
    case KvType::F32: return "f32";
    case KvType::F16: return "f16";
    case KvType::Q8_0: return "q8_0";
    }
    return "?";
}

int32_t kv_ring_positions(uint32_t window, int32_t n_ctx) {
    const int64_t ring = static_cast<int64_t>(window) + kKvWriteBatch - 1;
    return static_cast<int32_t>(std::min<int64_t>(ring, n_ctx));
}

namespace {

// Positions each layer keeps (none on a recurrent layer, nor on one that reads another's cache).
// A windowed layer whose cache later layers share keeps a prompt chunk more: every position of a
// forward pass is stored before those layers' first query reads it.
std::vector<int32_t> capacities(const ModelConfig &c, int32_t n_ctx, bool ring) {
    std::vector<int32_t> cap(c.n_layer, n_ctx);
    for (uint32_t l = 0; l < c.n_layer; ++l) {
        if (c.kind(l) != MixerKind::ATTENTION || !c.has_kv(l))
            cap[l] = 0;
        else if (ring && c.is_swa(l))
            cap[l] = kv_ring_positions(c.swa_window, n_ctx);
    }
    for (uint32_t l = 0; l < c.n_layer; ++l) {
        const uint32_t src = c.kv_layer(l);
        if (src != l && ring && c.is_swa(src))
            cap[src] = static_cast<int32_t>(std::min<int64_t>(c.swa_window + kPromptChunk - 1, n_ctx));
    }
    return cap;
}

}  // namespace

uint64_t KvCache::planned_bytes(const ModelConfig &c, int32_t n_ctx, KvType k, KvType v, bool ring) {
    const std::vector<int32_t> cap = capacities(c, n_ctx, ring);
    uint64_t bytes = 0;
    for (uint32_t l = 0; l < c.n_layer; ++l)
        bytes += static_cast<uint64_t>(cap[l]) * (kv_row_bytes(k, c.n_kv(l)) + kv_row_bytes(v, c.n_kv(l)));
    return bytes + RecurrentState::planned_bytes_with_checkpoints(c);
}

KvCache::KvCache(const ModelConfig &c, int32_t n_ctx, KvType k, KvType v, bool ring)
    : n_ctx_(n_ctx), window_(c.swa_window), type_k_(k), type_v_(v), rec_(c) {
    if (n_ctx <= 0) fail(LLM_ERR_INVALID_ARGUMENT, "n_ctx {} must be positive", n_ctx);
    uint64_t bk = 0, bv = 0;
    const std::vector<int32_t> caps = capacities(c, n_ctx, ring);
    for (uint32_t il = 0; il < c.n_layer; ++il) {
        Layer l;
        l.capacity = caps[il];
        l.n_kv = c.n_kv(il);
        l.row_k = kv_row_bytes(k, l.n_kv);
        l.row_v = kv_row_bytes(v, l.n_kv);
        l.base_k = bk;
        l.base_v = bv;
        if (l.capacity > 0 && l.capacity < n_ctx) l.owner.assign(static_cast<size_t>(l.capacity), -1);
        bk += static_cast<uint64_t>(l.capacity) * l.row_k;
        bv += static_cast<uint64_t>(l.capacity) * l.row_v;
        layers_.push_back(std::move(l));
    }
    k_.resize(bk);
    v_.resize(bv);
}

namespace {

void write_row(KvType t, const float *x, int64_t n, uint8_t *row) {
    switch (t) {
    case KvType::F32: std::memcpy(row, x, 4ull * n); break;
    case KvType::F16: {
        auto *h = reinterpret_cast<uint16_t *>(row);
        for (int64_t i = 0; i < n; ++i) h[i] = f32_to_fp16(x[i]);
        break;
    }
    case KvType::Q8_0: {
        // The activation quantizer: llama.cpp's x86 from_float for Q8_0, which writes its caches too.
        const int64_t full = n / QK * QK;
        auto *b = reinterpret_cast<BlockQ8_0 *>(row);
        if (full) quantize_row_q8_0(x, b, full);
        if (full < n) {  // a short row's last block, zero-padded
            float tail[QK] = {};
            std::copy(x + full, x + n, tail);
            quantize_row_q8_0(tail, b + full / QK, QK);
        }
        break;
    }
    }
}

}  // namespace

void KvCache::read_row(KvType t, const uint8_t *row, int64_t e0, int64_t n, float *dst) {
    switch (t) {
    case KvType::F32: std::memcpy(dst, row + 4 * e0, 4ull * n); break;
    case KvType::F16: {
        const auto *h = reinterpret_cast<const uint16_t *>(row) + e0;
        for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_f32(h[i]);
        break;
    }
    case KvType::Q8_0: {
        const auto *b = reinterpret_cast<const BlockQ8_0 *>(row);
        for (int64_t i = 0; i < n; ++i) {
            const BlockQ8_0 &blk = b[(e0 + i) / QK];
            dst[i] = fp16_to_f32(blk.d) * static_cast<float>(blk.qs[(e0 + i) % QK]);
        }
        break;
    }
    }
}

void KvCache::store(uint32_t layer, int32_t pos, const float *k, const float *v) {
    Layer &l = layers_[layer];
    write_row(type_k_, k, l.n_kv, k_row(layer, pos));
    write_row(type_v_, v, l.n_kv, v_row(layer, pos));
    if (!l.owner.empty()) l.owner[static_cast<size_t>(pos % l.capacity)] = pos;
}

void KvCache::read_k(uint32_t layer, int32_t pos, int64_t e0, int64_t n, float *dst) const {
    read_row(type_k_, k_row(layer, pos), e0, n, dst);
}

void KvCache::read_v(uint32_t layer, int32_t pos, int64_t e0, int64_t n, float *dst) const {
    read_row(type_v_, v_row(layer, pos), e0, n, dst);
}

bool KvCache::holds(uint32_t layer, int32_t pos) const {
    const Layer &l = layers_[layer];
    if (pos < 0 || pos >= n_ctx_ || l.capacity == 0) return false;
    return l.owner.empty() || l.owner[static_cast<size_t>(pos % l.capacity)] == pos;
}

bool KvCache::holds_window_before(int32_t n) const {
    for (uint32_t layer = 0; layer < layers_.size(); ++layer) {
        if (layers_[layer].owner.empty()) continue;
        for (int32_t p = std::max(0, n - static_cast<int32_t>(window_) + 1); p < n; ++p)
            if (!holds(layer, p)) return false;
    }
    return true;
}

void KvCache::copy_out(uint32_t layer, int32_t p0, int32_t p1, uint8_t *k_dst, uint8_t *v_dst) const {
    if (!has_rows(layer)) return;
    const uint64_t rk = layers_[layer].row_k, rv = layers_[layer].row_v;
    for (int32_t p = p0; p < p1; ++p) {
        if (!holds(layer, p)) fail(LLM_ERR_INTERNAL, "KV cache: layer {} no longer holds position {}", layer, p);
        std::memcpy(k_dst + static_cast<uint64_t>(p - p0) * rk, k_row(layer, p), rk);
        std::memcpy(v_dst + static_cast<uint64_t>(p - p0) * rv, v_row(layer, p), rv);
    }
}

void KvCache::copy_in(uint32_t layer, int32_t p0, int32_t p1, const uint8_t *k_src, const uint8_t *v_src) {
    Layer &l = layers_[layer];
    if (l.capacity == 0) return;
    if (p0 < 0 || p1 > n_ctx_ || p1 - p0 > l.capacity)
        fail(LLM_ERR_INTERNAL, "KV cache: positions [{}, {}) do not fit layer {}", p0, p1, layer);
    const uint64_t rk = l.row_k, rv = l.row_v;
    for (int32_t p = p0; p < p1; ++p) {
        std::memcpy(k_row(layer, p), k_src + static_cast<uint64_t>(p - p0) * rk, rk);
        std::memcpy(v_row(layer, p), v_src + static_cast<uint64_t>(p - p0) * rv, rv);
        if (!l.owner.empty()) l.owner[static_cast<size_t>(p % l.capacity)] = p;
    }
}

void KvCache::clear() {
    for (Layer &l : layers_) std::fill(l.owner.begin(), l.owner.end(), -1);
    rec_.clear();
}

int32_t KvCache::first_held(uint32_t layer, int32_t n_past) const {
    if (!is_ring(layer)) return 0;
    int32_t p = n_past;
    const int32_t lo = first_storable(layer, n_past);
    while (p > lo && holds(layer, p - 1)) --p;
    return p;
}

void KvCache::shift(int32_t keep, int32_t discard, int32_t n_past, const KeyRotator &rotate) {
    const int64_t n = n_past - keep - discard;
    if (discard <= 0 || n < 0) return;
    std::vector<float> keys;
    std::vector<uint8_t> kb, vb;
    std::vector<int32_t> moved;  // ring layers: the new positions of the rows in kb / vb
    for (uint32_t l = 0; l < layers_.size(); ++l) {
        Layer &L = layers_[l];
        if (L.capacity == 0) continue;  // a recurrent layer: no rows (its state cannot shift)
        const int64_t nkv = L.n_kv;
        const uint64_t rk = L.row_k, rv = L.row_v;
        if (L.owner.empty()) {
            if (n == 0) continue;
            std::memmove(v_row(l, keep), v_row(l, keep + discard), static_cast<uint64_t>(n) * rv);
            keys.resize(static_cast<size_t>(n * nkv));
            for (int64_t i = 0; i < n; ++i)
                read_k(l, keep + discard + static_cast<int32_t>(i), 0, nkv, keys.data() + i * nkv);
            rotate(l, keys.data(), n);
            for (int64_t i = 0; i < n; ++i)
                write_row(type_k_, keys.data() + i * nkv, nkv, k_row(l, keep + static_cast<int32_t>(i)));
            continue;
        }
        // A ring: renumbered positions belong in other slots (pos % capacity), so the rows still held
        // are taken out and stored again at their new positions. Kept positions (< keep) stay; no two
        // rows can land in one slot, as all of them lie within one capacity below the new n_past.
        moved.clear();
        kb.clear();
        vb.clear();
        for (int32_t p = std::max(keep + discard, first_storable(l, n_past)); p < n_past; ++p) {
            if (!holds(l, p)) continue;
            moved.push_back(p - discard);
            kb.insert(kb.end(), k_row(l, p), k_row(l, p) + rk);
            vb.insert(vb.end(), v_row(l, p), v_row(l, p) + rv);
        }
        for (int32_t &o : L.owner)
            if (o >= keep) o = -1;  // dropped, moved, or past n_past
        const int64_t m = static_cast<int64_t>(moved.size());
        keys.resize(static_cast<size_t>(m * nkv));
        for (int64_t i = 0; i < m; ++i) read_row(type_k_, kb.data() + i * rk, 0, nkv, keys.data() + i * nkv);
        if (m > 0) rotate(l, keys.data(), m);
        for (int64_t i = 0; i < m; ++i) {
            const int32_t p = moved[static_cast<size_t>(i)];
            write_row(type_k_, keys.data() + i * nkv, nkv, k_row(l, p));
            std::memcpy(v_row(l, p), vb.data() + i * rv, rv);
            L.owner[static_cast<size_t>(p % L.capacity)] = p;
        }
    }
}

}  // namespace llm
