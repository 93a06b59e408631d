// Embeddings: pooled final-norm hidden states of whole texts (llm_session_embed). Each input is
// its own sequence at positions 0.., on key/value caches of its own made for the call, so the
// session's context, logits and sampler are never touched; several inputs share each pass.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model.h"

namespace llm {

// llama.cpp's enum llama_pooling_type, whose values the files' <arch>.pooling_type stores.
enum class Pooling : int32_t { UNSPECIFIED = -1, NONE = 0, MEAN = 1, CLS = 2, LAST = 3, RANK = 4 };

const char *name(Pooling p);
// Parses "none", "mean", "cls", "last", "rank" (and "unspecified"); false for anything else.
bool parse_pooling(const char *text, Pooling &out);

// The pooling a call uses: the caller's, or with UNSPECIFIED the file's key, and NONE when the file
// has none (llama.cpp's rule). Throws INVALID_ARGUMENT for a value outside the enum (also a file's),
// UNSUPPORTED for RANK on a model without a classifier head.
Pooling resolve_pooling(const Model &m, int32_t requested);

// Floats per output row: n_embd, or the classifier's outputs for RANK.
int64_t pooled_dim(const Model &m, Pooling p);

// Rows an input of n tokens gives: n for NONE, else 1.
inline int64_t pooled_rows(Pooling p, int64_t n_tokens) { return p == Pooling::NONE ? n_tokens : 1; }

// L2 normalisation as llama.cpp's common_embd_normalize(…, 2): the sum of squares in double, then
// every value times (float)(1 / sqrt(sum)); an all-zero row stays zero.
void l2_normalize(float *v, int64_t n);

}  // namespace llm
