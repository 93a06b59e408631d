// Several sessions in one pass: placeholder until the batch branch lands.
#include "core/error.h"
#include "runtime/session.h"

namespace llm {

void Session::next_batch(const std::vector<Session *> &, int32_t *, int32_t *) {
    fail(LLM_ERR_UNSUPPORTED, "batched sessions are not implemented yet");
}

}  // namespace llm
