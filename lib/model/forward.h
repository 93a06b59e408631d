// The forward pass: embed -> for each block, its mixer half (attention, or the layer's kind's own
// recipe: model/mixer_*.cpp) then its FFN half, each leasing its matrices from the BlockStreamer one
// at a time (wq, wk, wv, wo; gate, up, down) for the whole chunk -> norm -> logits. One recipe per
// kind serves every architecture; it reads its choices from the ArchSpec.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/aligned_buffer.h"
#include "loader/streamer.h"
#include "model/kv_cache.h"
#include "model/limits.h"
#include "model/model.h"

namespace llm {

class ThreadPool;

// Per-session activations, grown to the largest batch seen.
struct Scratch {
    std::vector<float> h, x, qkv, q, k, v, att, o, f, gate, up, logits_in;
    std::vector<float> par_x, par_o;  // parallel-residual archs: attention half -> FFN half, [P][n_embd]
    std::vector<float> qg, att_gate;  // gated attention: the joint [q | gate] projection, the gates
    // Gated delta-net layers: the conv's input (then output) q | k | v, the z gate, beta and the
    // decay per value head, the delta rule's output.
    std::vector<float> gdn_qkv, gdn_z, gdn_beta, gdn_g, gdn_y;
    std::vector<float> sh_gate, sh_up, sh_out;  // the shared expert's activations and output (or the dense branch's)
    std::vector<float> ple, ple_g;  // per-layer token embeddings: every layer's inputs [P][n_layer][n_pl]; the gate
    std::vector<float> moe_x;       // a dense branch beside the experts: the experts' own input
    std::vector<float> router_x;    // [sub-batch][n_embd]: the router's own normed input (gemma4)
    AlignedBuffer head_chunk;       // streamed LM head rows
    std::vector<float> head_out;
    std::vector<float> batch_logits;  // segments' head rows [rows][n_vocab] when their logits are not one buffer
    // For a chunk of P positions of which at most `wide` pass through a matrix at once.
    void ensure(const ModelConfig &c, int64_t P, int64_t wide, int64_t head_rows);
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

// One sequence's share of a batched pass: its tokens at its own positions on its own cache.
struct ForwardSegment {
    KvCache *kv = nullptr;
    const int32_t *tokens = nullptr;
    int64_t n_tokens = 0;
    int32_t pos0 = 0;
    bool all_logits = false;
    float *logits = nullptr;                    // as ForwardRequest::logits, for this segment's rows
    const std::atomic<bool> *cancel = nullptr;  // any segment's flag cancels the whole pass
    float *hidden = nullptr;                    // [n_tokens][n_embd]: the final norm's output of every
                                                // row (what embeddings pool); nullptr: not wanted
};

// Several sequences in one pass: their rows are stacked ([ΣP][n_embd], segment after segment) so
// every matmul, and so every streamed matrix's lease and read, runs once for all of them; only the
// rotary positions and attention run per segment, on the segment's cache. A row's result does not
// depend on the rows it travels with (the kernels' arithmetic per row is fixed), so each segment
// gets exactly what forward() alone gives it. ΣP is bounded by the caller (Model::prompt_chunk(),
// as for one sequence). forward() is the one-segment case.
void forward_batch(const Model &m, const ForwardSegment *segs, size_t n_seg, Scratch &s, ThreadPool *pool,
                   BlockStreamer *blocks, IoStats *stats);

}  // namespace llm
