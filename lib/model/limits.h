// Sizes that the runtime, the forward pass and the memory plan must agree on, each defined once here
// so a change to one cannot leave another computing with the old value.
#pragma once

#include <algorithm>
#include <cstdint>

namespace llm {

// Prompt tokens per forward() call: a longer prompt is run in chunks of this many, which bounds the
// scratch memory (the residual stream of one chunk).
constexpr int64_t kPromptChunk = 512;

// Prompt tokens per forward() call while any block is streamed. Each streamed matrix is read once
// per chunk, so the activations between one matrix and the next span the chunk (Scratch::ensure):
// tinyllama-1.1b holds ~56 KiB of them per position, a 512-token chunk more than its largest matrix.
// Half the chunk halves them and reads the streamed weights twice per 512 prompt tokens.
constexpr int64_t kStreamChunk = 256;

// Positions computed together inside a block: bounds the activations' memory independently of the
// prompt chunk that a block read serves. Each matrix of a resident block is read once per sub-batch:
// 128 positions instead of 64 read the weights half as often: tinyllama-1.1B F16 pp512 median 112.5 ->
// 124.8 tok/s in 11 alternating rounds here (Q4_0 +8%, Q8_0 +1%), peak RSS +6.3 MiB.
constexpr int64_t kSubBatch = 128;

// New keys and values attention() stores before their queries read the cache: a windowed layer's ring
// holds the window and this many positions more (kv_ring_positions), whatever the sub-batch.
constexpr int64_t kKvWriteBatch = 64;

// Copies of a recurrent state a session keeps to go back to (RecurrentState's checkpoints): taken at
// prompt-chunk boundaries and at the end of each prefill, the oldest dropped. Each costs one state
// (e.g. 50 MiB for Qwen3.5-4B's shape); the memory plan counts all of them.
constexpr int32_t kStateCheckpoints = 4;

// The context a session gets when the host asks for none (n_ctx <= 0): this many tokens, or the
// model's training context if that is shorter.
constexpr uint32_t kDefaultCtx = 4096;

inline int32_t default_n_ctx(uint32_t n_ctx_train) { return static_cast<int32_t>(std::min(n_ctx_train, kDefaultCtx)); }

}  // namespace llm
