#include "model/recurrent_state.h"

#include <algorithm>

namespace llm {

uint64_t RecurrentState::planned_bytes(const ModelConfig &c) {
    uint64_t floats = 0;
    for (uint32_t l = 0; l < c.n_layer; ++l)
        if (c.kind(l) == MixerKind::GATED_DELTA_NET) floats += c.gdn.conv_state_floats() + c.gdn.ssm_state_floats();
    return floats * sizeof(float);
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
}

bool RecurrentState::at(int32_t n) const {
    return std::all_of(layers_.begin(), layers_.end(), [n](const Layer &l) { return !l.recurrent || l.next == n; });
}

void RecurrentState::clear() {
    std::fill(data_.begin(), data_.end(), 0.0f);
    for (Layer &l : layers_) l.next = 0;
}

}  // namespace llm
