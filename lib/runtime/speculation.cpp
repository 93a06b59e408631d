// Speculative decoding: placeholder until the speculation branch lands.
#include "core/error.h"
#include "runtime/session.h"

namespace llm {

void Session::set_speculation(const SpeculationOptions &) { fail(LLM_ERR_UNSUPPORTED, "speculation is not implemented yet"); }

}  // namespace llm
