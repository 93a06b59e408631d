// The per-sequence state of the recurrent layers (MixerKind::GATED_DELTA_NET), what they keep
// instead of KV rows: per layer the causal conv's last d_conv - 1 inputs of every channel and the
// delta rule's matrix of every value head, f32, zero at the start of a sequence. Its size is fixed
// whatever the context, and it is never streamed. The layouts are llama.cpp's (its R and S tensors):
//   conv: [channel][d_conv - 1], oldest input first, channels in attn_qkv's q | k | v order
//   ssm:  [value head][j][i] = S[i][j], key index i, value index j (a value's column is contiguous)
// A state cannot be cut back to an earlier position: each layer remembers how many positions it
// has absorbed, so a caller that would continue it from another position is caught (next_pos()).
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"

namespace llm {

class RecurrentState {
public:
    RecurrentState() = default;
    explicit RecurrentState(const ModelConfig &c);

    // What a state of this model allocates (the memory plan asks this).
    static uint64_t planned_bytes(const ModelConfig &c);
    uint64_t bytes() const { return data_.size() * sizeof(float); }
    bool empty() const { return data_.empty(); }

    float *conv(uint32_t layer) { return data_.data() + layers_[layer].conv; }
    float *ssm(uint32_t layer) { return data_.data() + layers_[layer].ssm; }
    // The position of the next token layer's state expects: the positions it has absorbed.
    int32_t next_pos(uint32_t layer) const { return layers_[layer].next; }
    void set_next_pos(uint32_t layer, int32_t pos) { layers_[layer].next = pos; }
    // Every recurrent layer has absorbed exactly positions [0, n) (true without recurrent layers).
    bool at(int32_t n) const;
    // Back to the start of a sequence: zeros, nothing absorbed.
    void clear();

private:
    struct Layer {
        uint64_t conv = 0, ssm = 0;  // offsets in data_ (floats)
        int32_t next = 0;
        bool recurrent = false;
    };
    std::vector<Layer> layers_;
    std::vector<float> data_;
};

}  // namespace llm
