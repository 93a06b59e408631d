#include "core/error.h"

namespace llm {

const char *status_string(int32_t status) noexcept {
    switch (status) {
    case LLM_OK: return "ok";
    case LLM_DONE: return "done (end of generation)";
    case LLM_ERR_INVALID_ARGUMENT: return "invalid argument";
    case LLM_ERR_IO: return "I/O error";
    case LLM_ERR_FORMAT: return "malformed model file";
    case LLM_ERR_UNSUPPORTED: return "unsupported";
    case LLM_ERR_OUT_OF_MEMORY: return "out of memory";
    case LLM_ERR_CONTEXT_FULL: return "context full";
    case LLM_ERR_BUFFER_TOO_SMALL: return "buffer too small";
    case LLM_ERR_CANCELLED: return "cancelled";
    case LLM_ERR_INTERNAL: return "internal error";
    case LLM_ERR_NOT_FOUND: return "not found";
    default: return "unknown status";
    }
}

}  // namespace llm
