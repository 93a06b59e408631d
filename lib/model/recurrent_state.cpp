#include "model/recurrent_state.h"

#include <algorithm>

#include "core/error.h"
#include "model/limits.h"

namespace llm {

uint64_t RecurrentState::planned_bytes(const ModelConfig &c) {
    uint64_t floats = 0;
    for (uint32_t l = 0; l < c.n_layer; ++l)
        if (c.kind(l) == MixerKind::GATED_DELTA_NET) floats += c.gdn.conv_state_floats() + c.gdn.ssm_state_floats();
    return floats * sizeof(float);
}

uint64_t RecurrentState::planned_bytes_with_checkpoints(const ModelConfig &c) {
    return planned_bytes(c) * (1 + static_cast<uint64_t>(kStateCheckpoints));
}

uint64_t RecurrentState::bytes() const {
    uint64_t n = data_.size();
    for (const Checkpoint &k : checkpoints_) n += k.data.size();
    return n * sizeof(float);  // the journal is speculation's, not the cache's (README)
}

void RecurrentState::begin_journal(int32_t pos) {
    if (data_.empty()) return;
    if (!at(pos)) fail(LLM_ERR_INTERNAL, "a journal from position {} of a state that is not there", pos);
    snapshot_.assign(data_.begin(), data_.end());
    for (Layer &l : layers_) l.records.clear();
    journal_pos_ = pos;
    recording_ = true;
}

void RecurrentState::drop_journal() {
    journal_pos_ = -1;
    recording_ = false;
    for (Layer &l : layers_) l.records.clear();
}

float *RecurrentState::record(uint32_t layer, int32_t pos) {
    Layer &l = layers_[layer];
    const uint64_t at = static_cast<uint64_t>(pos - journal_pos_) * record_floats_;
    if (pos < journal_pos_ || at > l.records.size())
        fail(LLM_ERR_INTERNAL, "layer {} records position {} out of order", layer, pos);
    if (at == l.records.size()) l.records.resize(at + record_floats_);
    return l.records.data() + at;
}

const float *RecurrentState::record(uint32_t layer, int32_t pos) const {
    return layers_[layer].records.data() + static_cast<uint64_t>(pos - journal_pos_) * record_floats_;
}

bool RecurrentState::journal_covers(int32_t n) const {
    if (journal_pos_ < 0 || journal_pos_ > n) return false;
    const uint64_t need = static_cast<uint64_t>(n - journal_pos_) * record_floats_;
    return std::all_of(layers_.begin(), layers_.end(),
                       [need](const Layer &l) { return !l.recurrent || l.records.size() >= need; });
}

RecurrentState::RecurrentState(const ModelConfig &c) : layers_(c.n_layer) {
    uint64_t n = 0;
    for (uint32_t l = 0; l < c.n_layer; ++l) {
        if (c.kind(l) != MixerKind::GATED_DELTA_NET) continue;
        Layer &L = layers_[l];
        L.recurrent = true;
        L.conv = n;
        n += c.gdn.conv_state_floats();
        L.ssm = n;
        n += c.gdn.ssm_state_floats();
    }
    data_.assign(n, 0.0f);
    record_floats_ = 2ull * c.gdn.conv_channels() + 2ull * c.gdn.n_v_heads;
}

bool RecurrentState::at(int32_t n) const {
    return std::all_of(layers_.begin(), layers_.end(), [n](const Layer &l) { return !l.recurrent || l.next == n; });
}

void RecurrentState::clear() {
    std::fill(data_.begin(), data_.end(), 0.0f);
    for (Layer &l : layers_) l.next = 0;
}

void RecurrentState::set_all_next_pos(int32_t n) {
    for (Layer &l : layers_) l.next = n;
}

void RecurrentState::save_checkpoint(int32_t pos) {
    if (data_.empty()) return;
    if (!at(pos)) fail(LLM_ERR_INTERNAL, "a checkpoint at position {} of a state that is not there", pos);
    Checkpoint *slot = nullptr;
    for (Checkpoint &k : checkpoints_)
        if (k.pos == pos) slot = &k;
    if (!slot) {
        for (Checkpoint &k : checkpoints_)
            if (k.pos < 0) slot = &k;
    }
    if (!slot && checkpoints_.size() < static_cast<size_t>(kStateCheckpoints)) slot = &checkpoints_.emplace_back();
    if (!slot) {
        slot = &*std::min_element(checkpoints_.begin(), checkpoints_.end(),
                                  [](const Checkpoint &a, const Checkpoint &b) { return a.serial < b.serial; });
    }
    slot->pos = pos;
    slot->serial = ++serial_;
    slot->data.assign(data_.begin(), data_.end());
}

int32_t RecurrentState::checkpoint_at_or_below(int32_t n) const {
    int32_t best = 0;
    for (const Checkpoint &k : checkpoints_)
        if (k.pos >= 0 && k.pos <= n) best = std::max(best, k.pos);
    return best;
}

const float *RecurrentState::checkpoint_data(int32_t n) const {
    const int32_t pos = checkpoint_at_or_below(n);
    for (const Checkpoint &k : checkpoints_)
        if (k.pos == pos && pos > 0) return k.data.data();
    return nullptr;
}

int32_t RecurrentState::restore_checkpoint(int32_t n) {
    const float *src = checkpoint_data(n);
    if (!src) {
        clear();
        return 0;
    }
    const int32_t pos = checkpoint_at_or_below(n);
    std::copy_n(src, data_.size(), data_.begin());
    set_all_next_pos(pos);
    return pos;
}

void RecurrentState::drop_checkpoints_after(int32_t n) {
    for (Checkpoint &k : checkpoints_)
        if (k.pos > n) k.pos = -1;
}

void RecurrentState::drop_checkpoints() { drop_checkpoints_after(-1); }

int32_t RecurrentState::n_checkpoints() const {
    return static_cast<int32_t>(
        std::count_if(checkpoints_.begin(), checkpoints_.end(), [](const Checkpoint &k) { return k.pos >= 0; }));
}

}  // namespace llm
