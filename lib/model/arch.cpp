#include "model/arch.h"

namespace llm {
namespace {

// llama also covers Mistral-labelled files and llama3's rope_freqs scaling (a tensor, not a flag).
constexpr ArchSpec kArchs[] = {
    {"llama", NormKind::RMS, RopeKind::NORM, FfnKind::SWIGLU, true, true},
};

}  // namespace

const ArchSpec *find_arch(const std::string &name) {
    for (const ArchSpec &a : kArchs)
        if (name == a.name) return &a;
    return nullptr;
}

}  // namespace llm
