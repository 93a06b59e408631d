#include "tokenizer/tokenizer.h"

#include "core/error.h"
#include "tokenizer/bpe.h"
#include "tokenizer/spm.h"

namespace llm {

std::unique_ptr<Tokenizer> Tokenizer::from_metadata(const Metadata &meta) {
    const std::string model = meta.req_str("tokenizer.ggml.model");
    if (model == "llama") return std::make_unique<SpmTokenizer>(meta);
    if (model == "gpt2") return std::make_unique<BpeTokenizer>(meta);
    // WordPiece, Unigram and the rest belong to architectures we never plan to run.
    fail(LLM_ERR_UNSUPPORTED, "tokenizer model '{}' is not supported", model);
}

}  // namespace llm
