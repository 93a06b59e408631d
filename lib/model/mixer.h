// The mixer halves of the layer kinds other than ATTENTION (whose recipe, attention_half, lives in
// model/forward.cpp): one function per kind, in model/mixer_<kind>.cpp, each updating h in place
// over the P positions of a chunk, its weights leased from the BlockStreamer, each run of rows on
// its own sequence's cache (RowRun). forward_batch dispatches on ModelConfig::kind(layer).
#pragma once

#include <cstdint>
#include <vector>

#include "model/block_ops.h"
#include "model/forward.h"

namespace llm {

// Gated DeltaNet (qwen35, qwen3next), llama.cpp's build_layer_attn_linear: h += out(gated_norm(
// delta_rule(l2norm(q), l2norm(k), v), z)), where q | k | v = silu(conv1d(attn_qkv · norm(h))) over
// the layer's rolling conv window, z = attn_gate · norm(h), and per value head beta = sigmoid(·)
// and decay = exp(softplus(alpha + dt_bias) · ssm_a). Each run's tokens walk its recurrent state
// in order, one token at a time, so a chunk of any size gives the bits of token-by-token decode.
void gated_delta_net_half(const Model &m, const HalfWeights &w, uint32_t layer, const std::vector<RowRun> &runs,
                          Scratch &s, ThreadPool *pool, float *h, int64_t P);

// Speculation's rollback (RecurrentState's journal): the state back to the journal's snapshot, then
// every recurrent layer re-absorbs positions [snapshot, n) from its records: the conv window takes
// the recorded inputs, the delta rule runs on the recorded q, k, v, beta and decay with the code
// of a pass, so the state gets the bits the pass gave it, without reading a weight.
void replay_recurrent(const ModelConfig &c, RecurrentState &st, int32_t n, ThreadPool *pool);

}  // namespace llm
