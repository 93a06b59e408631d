// The per-sequence state of the recurrent layers (MixerKind::GATED_DELTA_NET), what they keep
// instead of KV rows: per layer the causal conv's last d_conv - 1 inputs of every channel and the
// delta rule's matrix of every value head, f32, zero at the start of a sequence. Its size is fixed
// whatever the context, and it is never streamed. The layouts are llama.cpp's (its R and S tensors):
//   conv: [channel][d_conv - 1], oldest input first, channels in attn_qkv's q | k | v order
//   ssm:  [value head][j][i] = S[i][j], key index i, value index j (a value's column is contiguous)
// A state cannot be cut back to an earlier position: each layer remembers how many positions it
// has absorbed, so a caller that would continue it from another position is caught (next_pos()).
// What can go back is a copy: checkpoints keep whole copies of the state (every recurrent layer) at
// positions the session chooses (runtime/session.cpp says which), at most kStateCheckpoints of
// them, the oldest dropped; a session restores the newest one at or below where it goes back to and
// recomputes only the tokens after it.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"

namespace llm {

class RecurrentState {
public:
    RecurrentState() = default;
    explicit RecurrentState(const ModelConfig &c);

    // What a state of this model allocates, without checkpoints.
    static uint64_t planned_bytes(const ModelConfig &c);
    // The most a state and its checkpoints allocate (the memory plan asks this).
    static uint64_t planned_bytes_with_checkpoints(const ModelConfig &c);
    // The state and the checkpoints allocated so far (slots are allocated when first used, then kept).
    uint64_t bytes() const;
    bool empty() const { return data_.empty(); }
    // The state's floats, every recurrent layer's conv then ssm part in layer order (saved sessions).
    float *data() { return data_.data(); }
    const float *data() const { return data_.data(); }
    uint64_t n_floats() const { return data_.size(); }

    float *conv(uint32_t layer) { return data_.data() + layers_[layer].conv; }
    float *ssm(uint32_t layer) { return data_.data() + layers_[layer].ssm; }
    // The position of the next token layer's state expects: the positions it has absorbed.
    int32_t next_pos(uint32_t layer) const { return layers_[layer].next; }
    void set_next_pos(uint32_t layer, int32_t pos) { layers_[layer].next = pos; }
    // Every recurrent layer has absorbed exactly positions [0, n) (true without recurrent layers).
    bool at(int32_t n) const;
    // Back to the start of a sequence: zeros, nothing absorbed (the checkpoints stay).
    void clear();
    // Every recurrent layer marked as having absorbed positions [0, n) (after the floats were
    // written from a saved session).
    void set_all_next_pos(int32_t n);

    // Checkpoints. save_checkpoint copies the state, which must be at(pos), replacing one at the same
    // position or else the oldest when all slots are taken (a no-op without recurrent layers).
    void save_checkpoint(int32_t pos);
    // Restores the newest checkpoint at a position <= n and returns its position; with none, clears
    // the state and returns 0 (the start of a sequence is a checkpoint that costs nothing).
    int32_t restore_checkpoint(int32_t n);
    // The position restore_checkpoint(n) would return.
    int32_t checkpoint_at_or_below(int32_t n) const;
    // The floats restore_checkpoint(n) would restore (n_floats() of them; nullptr for the zero state).
    const float *checkpoint_data(int32_t n) const;
    // Forgets checkpoints past position n (their tokens are gone), or all of them.
    void drop_checkpoints_after(int32_t n);
    void drop_checkpoints();
    int32_t n_checkpoints() const;

    // Speculation's rollback without a second pass over the weights: begin_journal(pos) keeps a
    // snapshot of the state (which must be at(pos)) and turns recording on; while it is on, each
    // recurrent layer records, per token it absorbs, its conv inputs and the delta rule's inputs
    // (record()). After a rejected draft the state goes back to the snapshot and re-absorbs the
    // accepted tokens from the records (replay_recurrent, model/mixer.h), bit for bit as the pass did.
    // Records stay valid until a layer absorbs a token without recording (absorbed_unrecorded()).
    void begin_journal(int32_t pos);
    void stop_recording() { recording_ = false; }
    bool recording() const { return recording_; }
    void drop_journal();
    // Called by a layer absorbing tokens while recording is off: the records no longer follow the state.
    void absorbed_unrecorded() {
        if (journal_pos_ >= 0) drop_journal();
    }
    // Floats of one token's record: conv inputs and outputs (conv_channels each), beta and decay
    // exponent (n_v_heads each).
    uint64_t record_floats() const { return record_floats_; }
    // The record of layer's token at position pos (record_floats() floats), created on first use.
    float *record(uint32_t layer, int32_t pos);
    const float *record(uint32_t layer, int32_t pos) const;
    // The journal can bring the state to n: its snapshot is at or below n, and every recurrent layer
    // recorded the tokens of [snapshot, n).
    bool journal_covers(int32_t n) const;
    int32_t journal_pos() const { return journal_pos_; }
    const float *snapshot() const { return snapshot_.data(); }
    bool is_recurrent(uint32_t layer) const { return layers_[layer].recurrent; }
    uint32_t n_layer() const { return static_cast<uint32_t>(layers_.size()); }

private:
    struct Layer {
        uint64_t conv = 0, ssm = 0;  // offsets in data_ (floats)
        int32_t next = 0;
        bool recurrent = false;
        std::vector<float> records;  // the journal: record_floats_ per token from journal_pos_
    };
    struct Checkpoint {
        int32_t pos = -1;     // -1: a free slot
        uint64_t serial = 0;  // order of saving: the smallest is the oldest
        std::vector<float> data;
    };
    std::vector<Layer> layers_;
    std::vector<float> data_;
    std::vector<Checkpoint> checkpoints_;  // grows to kStateCheckpoints slots
    uint64_t serial_ = 0;
    std::vector<float> snapshot_;  // the journal's: the state at journal_pos_
    int32_t journal_pos_ = -1;     // -1: no journal
    bool recording_ = false;
    uint64_t record_floats_ = 0;
};

}  // namespace llm
