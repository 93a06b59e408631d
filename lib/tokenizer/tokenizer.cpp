#include "tokenizer/tokenizer.h"

#include "core/error.h"
#include "tokenizer/bpe.h"
#include "tokenizer/spm.h"

namespace llm {

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos, bool parse_special) const {
    std::vector<int32_t> out;
    const bool with_bos = add_bos && adds_bos() && bos() >= 0;
    if (with_bos) out.push_back(bos());
    encode_text(text, parse_special, out);
    // Never two BOS: a chat template's rendering may begin with the BOS text ({{ bos_token }}), which
    // parse_special makes a BOS. llama.cpp's chat code strips that text from the rendering before
    // tokenizing with BOS (llama_tokenize itself would give two and warn); dropping the added BOS
    // gives the same tokens.
    if (with_bos && out.size() >= 2 && out[1] == out[0]) out.erase(out.begin());
    if (add_bos && adds_eos() && eos() >= 0) out.push_back(eos());
    return out;
}

std::unique_ptr<Tokenizer> Tokenizer::from_metadata(const Metadata &meta) {
    const std::string model = meta.req_str("tokenizer.ggml.model");
    if (model == "llama") return std::make_unique<SpmTokenizer>(meta);
    if (model == "gpt2") return std::make_unique<BpeTokenizer>(meta);
    if (model == "gemma4") return std::make_unique<BpeTokenizer>(meta, true);
    // WordPiece, Unigram and the rest belong to architectures we never plan to run.
    fail(LLM_ERR_UNSUPPORTED, "tokenizer model '{}' is not supported", model);
}

}  // namespace llm
