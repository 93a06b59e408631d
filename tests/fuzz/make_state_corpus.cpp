// Writes the seed corpus of fuzz_state: valid saved sessions of each fuzz model (empty, after a
// prompt, after sampled generation, truncated so it has no logits, a full context), so nothing binary
// is committed. Usage: fuzz_state_corpus MODEL.gguf [HYBRID.gguf] OUT_DIR
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "llm.h"
#include "state_fuzz_common.h"

namespace fs = std::filesystem;

namespace {

void write(const fs::path &p, const std::vector<uint8_t> &b) {
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char *>(b.data()), static_cast<std::streamsize>(b.size()));
    if (!f) state_fuzz::die(p.c_str());
}

// The seeds of one model, named with prefix.
int seeds(const char *model, const fs::path &out, const std::string &prefix) {
    llm_model *m = state_fuzz::load_model(model);
    llm_session *s = state_fuzz::session(m);
    int n = 0;
    auto seed = [&](const char *name) {
        write(out / (prefix + name), state_fuzz::save(s));
        ++n;
    };
    seed("empty");
    const int32_t prompt[] = {1, 403, 407, 261, 378};
    if (llm_session_prefill(s, prompt, 5) != LLM_OK) state_fuzz::die("prefill");
    seed("prompt");
    for (int i = 0; i < 3; ++i) {
        int32_t t = 0;
        if (llm_session_sample(s, &t) != LLM_OK || llm_session_accept(s, t) != LLM_OK) state_fuzz::die("generate");
    }
    seed("generated");
    // A hybrid's recurrent state then goes as the checkpoint at the prompt's end (5 < 6).
    if (llm_session_truncate(s, 6) != LLM_OK) state_fuzz::die("truncate");
    seed("no-logits");
    std::vector<int32_t> fill(state_fuzz::kCtx - 6, 300);
    if (llm_session_prefill(s, fill.data(), fill.size()) != LLM_OK) state_fuzz::die("fill");
    seed("full");
    llm_session_free(s);
    llm_model_free(m);
    return n;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc != 3 && argc != 4) {
        std::fprintf(stderr, "usage: %s MODEL.gguf [HYBRID.gguf] OUT_DIR\n", argv[0]);
        return 2;
    }
    llm_set_log_level(LLM_LOG_OFF);
    const fs::path out = argv[argc - 1];
    fs::create_directories(out);
    int n = seeds(argv[1], out, "state-");
    if (argc == 4) n += seeds(argv[2], out, "state-hybrid-");
    std::printf("wrote %d seeds to %s\n", n, out.c_str());
    return 0;
}
