// llm-tokenize: print the token ids of a text (vocab-only GGUF files work). Public API only: llm.h,
// linked against libllm like any host.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common.h"

using namespace tools;

int main(int argc, char **argv) {
    std::string model, text;
    bool have_text = false, bos = true, special = false;
    for (int i = 1; i < argc; ++i) {
        std::string f = argv[i];
        auto val = [&]() -> std::string {
            if (i + 1 >= argc) die("missing value for " + f);
            return argv[++i];
        };
        if (f == "-m")
            model = val();
        else if (f == "-p") {
            text = val();
            have_text = true;
        } else if (f == "-f") {
            std::string path = val();
            std::ifstream in(path, std::ios::binary);
            if (!in) die("cannot read '" + path + "'");
            std::stringstream ss;
            ss << in.rdbuf();
            text = ss.str();
            have_text = true;
        } else if (f == "--no-bos")
            bos = false;
        else if (f == "--parse-special")
            special = true;
        else if (f == "-h" || f == "--help") {
            std::puts("usage: llm-tokenize -m MODEL_OR_VOCAB.gguf (-p TEXT | -f FILE) [--no-bos] [--parse-special]");
            return 0;
        } else
            die("unknown flag '" + f + "'");
    }
    if (model.empty() || !have_text)
        die("usage: llm-tokenize -m MODEL.gguf (-p TEXT | -f FILE) [--no-bos] [--parse-special]");
    llm_model_params mp;
    llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
    mp.vocab_only = true;
    llm_model *m = nullptr;
    check(llm_model_load(model.c_str(), &mp, &m), "loading vocabulary");
    int32_t n = 0;
    int32_t st = llm_tokenize(m, text.data(), text.size(), bos, special, nullptr, 0, &n);
    if (st != LLM_ERR_BUFFER_TOO_SMALL) check(st, "tokenizing");
    std::vector<int32_t> ids(n);
    check(llm_tokenize(m, text.data(), text.size(), bos, special, ids.data(), n, &n), "tokenizing");
    for (int32_t i = 0; i < n; ++i) std::printf("%s%d", i ? " " : "", ids[i]);
    std::printf("\n");
    llm_model_free(m);
    return 0;
}
