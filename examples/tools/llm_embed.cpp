// llm-embed: pooled embeddings of texts or token arrays (llm_session_embed), as JSON or plain rows.
// Many texts (-f FILE, one per line) go through in calls of --batch texts each and the JSON reports
// texts per second, to compare with llama.cpp's llama-embedding. Public API only: llm.h.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "common.h"

using namespace tools;

namespace {

const char *kUsage =
    "usage: llm-embed -m MODEL.gguf [options] (-p TEXT | --tokens IDS | -f FILE)...\n"
    "  -p TEXT              a text to embed (repeatable)\n"
    "  --tokens IDS         token ids to embed as given, comma-separated (repeatable)\n"
    "  -f FILE              texts to embed, one per line (empty lines skipped)\n"
    "  --pooling P          none | mean | cls | last | rank (default: the file's pooling_type, else none)\n"
    "  --normalize          L2-normalise every vector\n"
    "  --json               one JSON object: \"embeddings\" (per input a vector; pooling none: a list of\n"
    "                       rows), \"pooling\", \"n_dim\", \"n_tokens\", \"seconds\", \"texts_per_second\"\n"
    "  --batch N            inputs per llm_session_embed call (default: all in one)\n"
    "  --ctx N              the session's n_ctx: the longest input, and the positions of the inputs\n"
    "                       evaluated together (default: the model's, at most 4096)\n"
    "  -t N                 threads\n"
    "  --kv-type T          f32 | f16 | q8_0 (default f16)\n"
    "  --residency M        resident | streamed | budget;  --ram-budget SIZE (implies budget)\n";

struct Input {
    bool is_tokens = false;
    std::string text;
    std::vector<int32_t> tokens;
};

int32_t parse_pooling(const std::string &s) {
    if (s == "none") return LLM_POOLING_NONE;
    if (s == "mean") return LLM_POOLING_MEAN;
    if (s == "cls") return LLM_POOLING_CLS;
    if (s == "last") return LLM_POOLING_LAST;
    if (s == "rank") return LLM_POOLING_RANK;
    die("--pooling takes none, mean, cls, last or rank");
}

const char *pooling_name(int32_t p) {
    switch (p) {
    case LLM_POOLING_NONE: return "none";
    case LLM_POOLING_MEAN: return "mean";
    case LLM_POOLING_CLS: return "cls";
    case LLM_POOLING_LAST: return "last";
    case LLM_POOLING_RANK: return "rank";
    default: return "unknown";
    }
}

void print_row(const float *v, int32_t n, bool json) {
    if (json) std::fputc('[', stdout);
    for (int32_t i = 0; i < n; ++i) std::printf(json ? "%s%.9g" : "%s%.9g", i ? (json ? "," : " ") : "", v[i]);
    std::fputs(json ? "]" : "\n", stdout);
}

}  // namespace

int main(int argc, char **argv) {
    std::string model;
    std::vector<Input> inputs;
    llm_embed_params ep;
    llm_embed_params_init(&ep, LLM_EMBED_PARAMS_VERSION);
    llm_session_params sp;
    llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
    bool json = false;
    int32_t residency = LLM_RESIDENCY_RESIDENT, threads = 0;
    uint64_t budget = 0;
    size_t batch = 0;
    for (int i = 1; i < argc; ++i) {
        const std::string f = argv[i];
        auto val = [&]() -> const char * {
            if (i + 1 >= argc) die("missing value for " + f);
            return argv[++i];
        };
        if (f == "-m") {
            model = val();
        } else if (f == "-p") {
            inputs.push_back({false, val(), {}});
        } else if (f == "--tokens") {
            inputs.push_back({true, "", parse_int_list(f, val())});
        } else if (f == "-f") {
            const std::string path = val();
            std::ifstream in(path, std::ios::binary);
            if (!in) die("cannot read '" + path + "'");
            for (std::string line; std::getline(in, line);) {
                if (!line.empty() && line.back() == '\r') line.pop_back();
                if (!line.empty()) inputs.push_back({false, line, {}});
            }
        } else if (f == "--pooling") {
            ep.pooling = parse_pooling(val());
        } else if (f == "--normalize") {
            ep.normalize = true;
        } else if (f == "--json") {
            json = true;
        } else if (f == "--batch") {
            batch = static_cast<size_t>(single(f, val()));
        } else if (f == "--ctx") {
            sp.n_ctx = single(f, val());
        } else if (f == "-t") {
            threads = single(f, val());
        } else if (parse_residency_flag(f, val, residency, budget) || parse_session_flag(f, val, sp)) {
        } else if (f == "-h" || f == "--help") {
            std::fputs(kUsage, stdout);
            return 0;
        } else {
            die("unknown flag '" + f + "'\n" + kUsage);
        }
    }
    if (model.empty() || inputs.empty()) die(kUsage);
    if (batch == 0) batch = inputs.size();

    llm_model_params mp;
    llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
    mp.n_threads = threads;
    mp.residency = residency;
    mp.ram_budget_bytes = budget;
    llm_model *m = nullptr;
    check(llm_model_load(model.c_str(), &mp, &m), "loading model");
    llm_session *s = nullptr;
    check(llm_session_create(m, &sp, &s), "creating session");
    const int32_t pooling = ep.pooling == LLM_POOLING_UNSPECIFIED ? llm_model_pooling_type(m) : ep.pooling;

    // Per call: the texts and token arrays of inputs [b0, b1), in order (a call takes one kind, so a
    // mixed run calls per run of one kind).
    std::vector<std::vector<float>> results;
    std::vector<int32_t> rows_of, tokens_of;
    int32_t dim = 0;
    double seconds = 0;
    for (size_t b0 = 0; b0 < inputs.size();) {
        size_t b1 = b0;
        while (b1 < inputs.size() && b1 - b0 < batch && inputs[b1].is_tokens == inputs[b0].is_tokens) ++b1;
        std::vector<const char *> texts;
        std::vector<const int32_t *> toks;
        std::vector<size_t> lens;
        for (size_t i = b0; i < b1; ++i) {
            texts.push_back(inputs[i].text.c_str());
            toks.push_back(inputs[i].tokens.data());
            lens.push_back(inputs[i].tokens.size());
        }
        std::vector<int32_t> rows(b1 - b0);
        auto call = [&](float *out, size_t cap, size_t *n) {
            return inputs[b0].is_tokens
                       ? llm_session_embed_tokens(s, toks.data(), lens.data(), b1 - b0, &ep, out, cap, n, &dim,
                                                  rows.data())
                       : llm_session_embed(s, texts.data(), b1 - b0, &ep, out, cap, n, &dim, rows.data());
        };
        size_t n = 0;
        int32_t st = call(nullptr, 0, &n);
        if (st != LLM_ERR_BUFFER_TOO_SMALL) check(st, "embedding");
        std::vector<float> out(n);
        const auto t0 = std::chrono::steady_clock::now();
        check(call(out.data(), out.size(), &n), "embedding");
        seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        size_t at = 0;
        for (size_t i = b0; i < b1; ++i) {
            const size_t len = static_cast<size_t>(rows[i - b0]) * static_cast<size_t>(dim);
            results.emplace_back(out.begin() + static_cast<std::ptrdiff_t>(at),
                                 out.begin() + static_cast<std::ptrdiff_t>(at + len));
            rows_of.push_back(rows[i - b0]);
            tokens_of.push_back(
                inputs[i].is_tokens
                    ? static_cast<int32_t>(inputs[i].tokens.size())
                    : static_cast<int32_t>(tokenize(m, inputs[i].text, ep.add_bos, ep.parse_special).size()));
            at += len;
        }
        b0 = b1;
    }

    if (!json) {
        for (size_t i = 0; i < results.size(); ++i)
            for (int32_t r = 0; r < rows_of[i]; ++r) print_row(&results[i][static_cast<size_t>(r * dim)], dim, false);
    } else {
        uint64_t total_tokens = 0;
        for (int32_t t : tokens_of) total_tokens += static_cast<uint64_t>(t);
        std::printf("{\"pooling\":\"%s\",\"normalize\":%s,\"n_dim\":%d,\"n_inputs\":%zu,\"n_tokens\":[",
                    pooling_name(pooling), ep.normalize ? "true" : "false", dim, results.size());
        for (size_t i = 0; i < tokens_of.size(); ++i) std::printf("%s%d", i ? "," : "", tokens_of[i]);
        std::printf("],\"seconds\":%.6f,\"texts_per_second\":%.3f,\"tokens_per_second\":%.3f,\"embeddings\":[", seconds,
                    seconds > 0 ? static_cast<double>(results.size()) / seconds : 0.0,
                    seconds > 0 ? static_cast<double>(total_tokens) / seconds : 0.0);
        for (size_t i = 0; i < results.size(); ++i) {
            if (i) std::fputc(',', stdout);
            if (pooling == LLM_POOLING_NONE) {
                std::fputc('[', stdout);
                for (int32_t r = 0; r < rows_of[i]; ++r) {
                    if (r) std::fputc(',', stdout);
                    print_row(&results[i][static_cast<size_t>(r * dim)], dim, true);
                }
                std::fputc(']', stdout);
            } else {
                print_row(results[i].data(), dim, true);
            }
        }
        std::printf("]}\n");
    }
    llm_session_free(s);
    llm_model_free(m);
    return 0;
}
