#include "loader/layer_store.h"

#include <algorithm>

#include "core/error.h"
#include "core/log.h"

namespace llm {

BlockLayout plan_block(const BlockTensors &bt, uint32_t part, bool skip_experts, uint64_t align) {
    std::vector<int> order;
    for (int s = 0; s < SLOT_COUNT; ++s)
        if (bt.t[s] && unit_of(static_cast<Slot>(s)) == part && !(skip_experts && BlockData::is_expert_slot(static_cast<Slot>(s))))
            order.push_back(s);
    std::sort(order.begin(), order.end(), [&](int a, int b) {
        return std::pair(bt.t[a]->shard, bt.t[a]->offset) < std::pair(bt.t[b]->shard, bt.t[b]->offset);
    });

    // Tensors separated by at most a little padding become one read; inside a run the buffer keeps
    // the file's layout, so each tensor keeps the file's alignment.
    constexpr uint64_t kMaxGap = 4096;
    const uint64_t a = std::max<uint64_t>(align, 1);
    const uint64_t buf_align = std::max<uint64_t>(align, 64);
    auto up = [](uint64_t x, uint64_t m) { return (x + m - 1) / m * m; };
    BlockLayout l;
    for (int s : order) {
        const TensorInfo *t = bt.t[s];
        if (l.runs.empty() || t->shard != l.runs.back().shard || t->offset < l.runs.back().file_end ||
            t->offset - l.runs.back().file_end > kMaxGap) {
            l.runs.push_back({t->offset / a * a, t->offset + t->nbytes, up(l.total, buf_align), t->shard});
        } else {
            l.runs.back().file_end = t->offset + t->nbytes;
        }
        auto &r = l.runs.back();
        if (a > 1) r.file_end = up(r.file_end, a);  // may pass the end of the file: see read_weights_aligned
        l.where[s] = r.buf_off + (t->offset - r.file_begin);
        l.used[s] = true;
        l.total = r.buf_off + r.bytes();
    }
    return l;
}

void load_block(const WeightSource &src, const BlockTensors &bt, const BlockLayout &layout, BlockData &out,
                IoStats *stats) {
    out.buf.resize(layout.total);
    for (const auto &r : layout.runs) {
        ByteSource &file = src.bytes(r.shard);
        file.read_weights_aligned(r.file_begin, out.buf.data() + r.buf_off, r.bytes());
        if (stats) stats->add_read(std::min(r.file_end, file.size()) - r.file_begin);
    }
    for (int s = 0; s < SLOT_COUNT; ++s) out.ptr[s] = layout.used[s] ? out.buf.data() + layout.where[s] : nullptr;
    out.tensors = &bt;
    out.experts = nullptr;
}

LayerStore::LayerStore(const WeightSource &src, const std::vector<BlockTensors> &blocks, const LoaderOptions &opt)
    : src_(src), blocks_(blocks), opt_(opt) {
    if (opt_.prefetch_depth < 0) opt_.prefetch_depth = 0;
    layouts_.reserve(blocks.size() * kUnitsPerBlock);
    for (const BlockTensors &bt : blocks)
        for (uint32_t part = 0; part < kUnitsPerBlock; ++part) {
            const uint64_t align = opt_.cache == CachePolicy::DIRECT ? kDirectAlign : 0;
            layouts_.push_back(plan_block(bt, part, false, align));
            stream_layouts_.push_back(plan_block(bt, part, true, align));
            max_unit_ = std::max(max_unit_, stream_layouts_.back().total);
            total_blocks_ += layouts_.back().total;
        }
    for (const BlockTensors &bt : blocks)
        for (Slot s : {FFN_GATE_EXPS, FFN_UP_EXPS, FFN_DOWN_EXPS})
            if (const TensorInfo *t = bt.t[s]) max_slab_ = std::max(max_slab_, t->ne[1] * t->row_bytes());
    resident_.resize(layouts_.size());
}

uint64_t LayerStore::stream_slot_bytes() const {
    return static_cast<uint64_t>(1 + opt_.prefetch_depth) * max_unit_ + 3 * max_slab_;
}

uint32_t LayerStore::units_for_budget(uint64_t budget, uint64_t fixed) const {
    if (budget <= fixed) return 0;
    uint64_t left = budget - fixed, used = 0;
    uint32_t n = 0;
    while (n < layouts_.size() && used + layouts_[n].total <= left) used += layouts_[n++].total;
    return n;
}

void LayerStore::load_initial(const std::function<bool(float)> &progress) {
    uint32_t n = n_units();
    if (opt_.residency == Residency::STREAMED) {
        n = 0;
    } else if (opt_.residency == Residency::BUDGET) {
        // Streaming needs its slots; if everything fits, no slots are needed.
        n = units_for_budget(opt_.budget_bytes, 0);
        if (n < n_units()) n = units_for_budget(opt_.budget_bytes, stream_slot_bytes());
    }
    for (uint32_t u = 0; u < n; ++u) {
        auto b = std::make_unique<BlockData>();
        load_block(src_, tensors(u), layouts_[u], *b, nullptr);
        pack_block(*b);  // resident: packed once (stream slots stay in file layout)
        resident_[u] = std::move(b);
        if (progress && !progress(static_cast<float>(u + 1) / static_cast<float>(n))) {
            fail(LLM_ERR_CANCELLED, "model load cancelled by the progress callback");
        }
    }
    log().info("layer store: {} of {} half-blocks resident ({} bytes), largest {} bytes", n, n_units(), resident_bytes(), max_unit_);
}

void LayerStore::set_resident_count(uint32_t n, IoStats *stats) {
    n = std::min(n, n_units());
    opt_.residency = Residency::BUDGET;
    for (uint32_t u = n; u < n_units(); ++u) resident_[u].reset();
    for (uint32_t u = 0; u < n; ++u) {
        if (resident_[u]) continue;
        auto b = std::make_unique<BlockData>();
        load_block(src_, tensors(u), layouts_[u], *b, stats);
        pack_block(*b);
        resident_[u] = std::move(b);
    }
}

uint64_t LayerStore::resident_bytes() const {
    uint64_t n = 0;
    for (const auto &b : resident_)
        if (b) n += b->buf.size();
    return n;
}

uint32_t LayerStore::n_resident_units() const {
    uint32_t n = 0;
    for (const auto &b : resident_) n += b ? 1 : 0;
    return n;
}

uint32_t LayerStore::n_resident_layers() const {
    uint32_t n = 0;
    for (uint32_t l = 0; l < n_layer(); ++l) n += resident_[2 * l] && resident_[2 * l + 1] ? 1 : 0;
    return n;
}

}  // namespace llm
