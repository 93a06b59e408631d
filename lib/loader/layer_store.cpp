#include "loader/layer_store.h"

#include <algorithm>

#include "core/error.h"

namespace llm {

void load_block(const WeightSource &src, const BlockTensors &bt, BlockData &out) {
    std::vector<int> order;
    for (int s = 0; s < SLOT_COUNT; ++s)
        if (bt.t[s]) order.push_back(s);
    std::sort(order.begin(), order.end(), [&](int a, int b) { return bt.t[a]->offset < bt.t[b]->offset; });

    // Runs of tensors separated by at most a little padding become one read; the buffer keeps the
    // file's layout inside a run so each tensor keeps the file's alignment.
    constexpr uint64_t kMaxGap = 4096;
    struct Run { uint64_t begin, end, buf_off; };
    std::vector<Run> runs;
    std::vector<uint64_t> where(SLOT_COUNT, 0);
    uint64_t total = 0;
    for (int s : order) {
        const TensorInfo *t = bt.t[s];
        if (runs.empty() || t->offset < runs.back().end || t->offset - runs.back().end > kMaxGap) {
            total = (total + 63) / 64 * 64;
            runs.push_back({t->offset, t->offset + t->nbytes, total});
        } else {
            runs.back().end = t->offset + t->nbytes;
        }
        where[s] = runs.back().buf_off + (t->offset - runs.back().begin);
        total = runs.back().buf_off + (runs.back().end - runs.back().begin);
    }
    out.buf.resize(total);
    for (const Run &r : runs) src.bytes().read_at(r.begin, out.buf.data() + r.buf_off, r.end - r.begin);
    out.ptr.fill(nullptr);
    for (int s : order) out.ptr[s] = out.buf.data() + where[s];
    out.tensors = &bt;
}

LayerStore::LayerStore(const WeightSource &src, const std::vector<BlockTensors> &blocks)
    : src_(src), blocks_(blocks) {}

void LayerStore::load_all(const std::function<bool(float)> &progress) {
    resident_.clear();
    resident_.resize(blocks_.size());
    for (size_t l = 0; l < blocks_.size(); ++l) {
        load_block(src_, blocks_[l], resident_[l]);
        if (progress && !progress(static_cast<float>(l + 1) / static_cast<float>(blocks_.size()))) {
            fail(LLM_ERR_CANCELLED, "model load cancelled by the progress callback");
        }
    }
}

const BlockData &LayerStore::acquire(uint32_t layer) const { return resident_.at(layer); }

uint64_t LayerStore::resident_bytes() const {
    uint64_t n = 0;
    for (const BlockData &b : resident_) n += b.buf.size();
    return n;
}

}  // namespace llm
