// Element type of the cached keys and values (chosen per session, separately for K and V).
#pragma once

#include <cstdint>

namespace llm {

// Values equal the C API's LLM_KV_* codes.
enum class KvType : int32_t { F32 = 0, F16 = 1, Q8_0 = 2 };
const char *name(KvType t);  // "f32", "f16", "q8_0" (kv_cache.cpp)

// A session's type for K and V unless it chooses (llama.cpp's default too); the C API's memory
// plan counts it.
constexpr KvType kDefaultKvType = KvType::F16;

}  // namespace llm
