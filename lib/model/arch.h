// Architectures as data: what the shared block recipe needs to know about one GGUF
// `general.architecture`. Adding an architecture means adding a spec here, not a code path.
#pragma once

#include <cstdint>
#include <string>

namespace llm {

enum class NormKind : uint8_t { RMS, LAYER };
enum class RopeKind : uint8_t { NONE, NORM /* adjacent pairs */, NEOX /* halves */ };
enum class FfnKind : uint8_t { SWIGLU, GEGLU, GELU };

struct ArchSpec {
    const char *name;
    NormKind norm;
    RopeKind rope;
    FfnKind ffn;
    bool output_may_tie;     // output.weight absent -> use token_embd.weight
    bool rope_dims_must_match_head; // llama: rope.dimension_count must equal head dim
};

// nullptr for architectures we do not run.
const ArchSpec *find_arch(const std::string &name);

}  // namespace llm
