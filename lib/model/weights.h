// Binding GGUF tensors to the roles the block recipe uses (loader/block.h), by name and with exact
// shape checks against the config.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "gguf/weight_source.h"
#include "loader/block.h"
#include "model/config.h"

namespace llm {

// Resolves every block's tensors by name and checks shapes against the config. Throws
// LLM_ERR_FORMAT naming a missing or misshapen tensor, LLM_ERR_UNSUPPORTED for an unusable type.
std::vector<BlockTensors> bind_blocks(const WeightSource &src, const ModelConfig &cfg);

// The tensors of the multi-token-prediction blocks after the n_layer the model runs
// (cfg.n_layer_nextn of them): what llama.cpp binds and skips there, found by name (absent ones
// null). They count as used, and nothing reads them.
std::vector<const TensorInfo *> skipped_nextn_tensors(const WeightSource &src, const ModelConfig &cfg);

// Every tensor of the file must be one the model binds (`used`, nullptr entries ignored): a tensor
// we would ignore may change the computation (llama.cpp refuses such files too). Throws
// LLM_ERR_UNSUPPORTED naming the first unused tensor.
void refuse_unused_tensors(const WeightSource &src, const std::vector<const TensorInfo *> &used,
                           const std::string &arch);

// Checks that tensor `name` exists (unless optional) with exactly the shape given; returns it.
const TensorInfo *expect_tensor(const WeightSource &src, const std::string &name, std::initializer_list<uint64_t> shape,
                                bool required);

}  // namespace llm
