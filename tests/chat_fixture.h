// A chat model for the tests: a copy of a fixture with a ChatML chat template, whose vocabulary turns
// two byte tokens no text uses (<0x01>, <0x02>) into the control tokens <|im_start|> and <|im_end|>,
// with <|im_end|> as EOS, so that parsing special tokens changes a rendered prompt's tokens.
// Shared by tests/test_chat.cpp and the chat_fixture program (the llm-chat ctest).
#pragma once

#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/byte_source.h"
#include "gguf_writer.h"
#include "gguf/weight_source.h"

namespace chat_fixture {

// ChatML, as Qwen2.5 and many others write it (without their default system prompt).
inline const char *const kChatml =
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

// A second, named template (tokenizer.chat_template.tool_use) that shows the BOS and EOS texts.
inline const char *const kNamed =
    "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}{{ eos_token }}";

struct Ids {
    int32_t im_start = -1, im_end = -1;
};

// Writes the chat copy of src (a llama fixture with the stories260K vocabulary) to dst.
inline Ids write(const std::string &src_path, const std::string &dst) {
    auto src = llm::WeightSource::open(llm::open_file_source(src_path));
    const llm::Metadata &meta = src->meta();
    std::vector<std::string> tokens = *meta.str_array("tokenizer.ggml.tokens");
    std::vector<int32_t> types =
        meta.i32_array("tokenizer.ggml.token_type").value_or(std::vector<int32_t>(tokens.size(), 1));
    Ids ids;
    for (size_t i = 0; i < tokens.size(); ++i) {
        if (tokens[i] == "<0x01>") ids.im_start = static_cast<int32_t>(i);
        if (tokens[i] == "<0x02>") ids.im_end = static_cast<int32_t>(i);
    }
    if (ids.im_start < 0 || ids.im_end < 0)
        llm::fail(LLM_ERR_INTERNAL, "{} lacks the byte tokens <0x01>, <0x02>", src_path);
    tokens[ids.im_start] = "<|im_start|>";
    tokens[ids.im_end] = "<|im_end|>";
    types[ids.im_start] = types[ids.im_end] = 3;  // CONTROL

    const auto replaced = [](const std::string &k) {
        return k == "tokenizer.ggml.tokens" || k == "tokenizer.ggml.token_type" || k == "tokenizer.ggml.eos_token_id";
    };
    llm::GgufWriter w;
    w.add_all_from(*src, replaced);
    w.add_string_array("tokenizer.ggml.tokens", tokens);
    w.add_array("tokenizer.ggml.token_type", types);
    w.add_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(ids.im_end));
    w.add_string("tokenizer.chat_template", kChatml);
    w.add_string("tokenizer.chat_template.tool_use", kNamed);
    w.write_file(dst);
    return ids;
}

}  // namespace chat_fixture
