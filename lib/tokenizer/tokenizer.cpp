#include "tokenizer/tokenizer.h"

#include "core/error.h"
#include "tokenizer/spm.h"

namespace llm {

std::unique_ptr<Tokenizer> Tokenizer::from_metadata(const Metadata &meta) {
    const std::string model = meta.req_str("tokenizer.ggml.model");
    if (model == "llama") return std::make_unique<SpmTokenizer>(meta);
    // gpt2 (byte-level BPE) reuses Vocab and arrives with its own class; the rest we never plan to run.
    fail(LLM_ERR_UNSUPPORTED, "tokenizer model '{}' is not supported", model);
}

}  // namespace llm
