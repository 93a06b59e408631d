// Writes the seed corpus of fuzz_gguf from the project's test data, so no model bytes are committed:
//   - a few real files whole (stories260K, small fixture models: SPM and BPE vocabularies, an
//     architecture we do not run);
//   - their metadata re-written with the vocabulary cut to its first 300 tokens (merges and special
//     ids kept consistent) and no tensors: small files that load vocab-only and reach the tokenizers;
//   - tiny complete llama models (one layer, n_embd 32) in f32 and q8_0 that load and evaluate;
//   - truncated copies (inside the header, at each section boundary, inside the data) and copies
//     with a few bytes flipped.
// Usage: fuzz_gguf_corpus SHARED_DIR OUT_DIR
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "gguf_writer.h"
#include "gguf/weight_source.h"
#include "synth_model.h"

namespace fs = std::filesystem;
using namespace llm;

namespace {

constexpr uint32_t kVocabCut = 300;

std::vector<uint8_t> read_all(const fs::path &p) {
    std::ifstream f(p, std::ios::binary);
    if (!f) throw std::runtime_error("cannot read " + p.string());
    return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void write_all(const fs::path &p, const uint8_t *data, size_t n) {
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char *>(data), static_cast<std::streamsize>(n));
    if (!f) throw std::runtime_error("cannot write " + p.string());
}

// Re-emits the metadata of `src` with no tensors, the vocabulary arrays cut to `cut` entries, only
// the merges whose parts and result survive, and special token ids that still point inside.
std::vector<uint8_t> vocab_file(const WeightSource &src, uint32_t cut) {
    const Metadata &meta = src.meta();
    std::set<std::string> kept;
    if (const auto *toks = meta.str_array("tokenizer.ggml.tokens")) {
        for (size_t i = 0; i < toks->size() && i < cut; ++i) kept.insert((*toks)[i]);
    }
    GgufWriter w;
    for (const auto &[key, v] : meta.all()) {
        const bool per_token =
            key == "tokenizer.ggml.tokens" || key == "tokenizer.ggml.scores" || key == "tokenizer.ggml.token_type";
        if (v.type == MetaType::STRING) {
            w.add_string(key, v.str);
        } else if (v.type == MetaType::ARRAY && v.elem_type == MetaType::STRING) {
            std::vector<std::string> s = v.strs;
            if (per_token && s.size() > cut) s.resize(cut);
            if (key == "tokenizer.ggml.merges") {
                std::vector<std::string> keep;
                for (const std::string &m : s) {
                    const size_t sp = m.find(' ');
                    if (sp == std::string::npos) continue;
                    const std::string a = m.substr(0, sp), b = m.substr(sp + 1);
                    if (kept.count(a) && kept.count(b) && kept.count(a + b)) keep.push_back(m);
                }
                s = std::move(keep);
            }
            w.add_string_array(key, s);
        } else if (v.type == MetaType::ARRAY) {
            const uint64_t count = per_token && v.count > cut ? cut : v.count;
            w.add_array(key, v.elem_type, v.raw.data(), count);
        } else if (key.rfind("tokenizer.ggml.", 0) == 0 && key.size() > 9 &&
                   key.compare(key.size() - 9, 9, "_token_id") == 0 && v.type == MetaType::U32) {
            uint32_t id = 0;
            std::memcpy(&id, v.raw.data(), 4);
            w.add_u32(key, id < cut ? id : cut - 1);
        } else {
            w.add_kv_raw(key, static_cast<uint32_t>(v.type), v.raw);
        }
    }
    return w.to_bytes();
}

class Seeds {
public:
    explicit Seeds(fs::path dir) : dir_(std::move(dir)) { fs::create_directories(dir_); }

    void add(const std::string &name, const std::vector<uint8_t> &b) { add(name, b.data(), b.size()); }
    void add(const std::string &name, const uint8_t *p, size_t n) {
        write_all(dir_ / name, p, n);
        ++count_;
    }

    // Cuts at the start of the header fields, around the data offset, in the middle and at the end.
    void truncations(const std::string &name, const std::vector<uint8_t> &b, uint64_t data_offset) {
        std::set<uint64_t> cuts = {0, 3, 4, 7, 8, 16, 23, 24, 40, 100, 1000};
        for (uint64_t c : {data_offset / 2, data_offset - 1, data_offset, data_offset + 1, (data_offset + b.size()) / 2,
                           static_cast<uint64_t>(b.size()) - 1}) {
            cuts.insert(c);
        }
        for (uint64_t c : cuts) {
            if (c >= b.size()) continue;
            add(name + ".cut" + std::to_string(c), b.data(), c);
        }
    }

    // Deterministic byte flips inside the first `span` bytes (the header, where parsing happens).
    void mutations(const std::string &name, const std::vector<uint8_t> &b, uint64_t span, int n, uint64_t seed) {
        uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
        auto next = [&] {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            return s;
        };
        span = std::min<uint64_t>(span, b.size());
        if (span == 0) return;
        for (int i = 0; i < n; ++i) {
            std::vector<uint8_t> m = b;
            const int flips = 1 + static_cast<int>(next() % 4);
            for (int f = 0; f < flips; ++f) {
                const uint64_t at = next() % span;
                const uint64_t kind = next() % 3;
                m[at] = kind == 0   ? static_cast<uint8_t>(m[at] ^ (1u << (next() % 8)))
                        : kind == 1 ? 0xFF
                                    : static_cast<uint8_t>(next());
            }
            add(name + ".mut" + std::to_string(i), m);
        }
    }

    int count() const { return count_; }

private:
    fs::path dir_;
    int count_ = 0;
};

}  // namespace

int main(int argc, char **argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s SHARED_DIR OUT_DIR\n", argv[0]);
        return 2;
    }
    try {
        const fs::path shared = argv[1];
        Seeds seeds(argv[2]);

        // Tiny complete models: they load, tokenize and evaluate in microseconds.
        const fs::path tmp = fs::path(argv[2]) / ".tiny.tmp";
        const tools::SynthShape tiny{"fuzz-tiny", 32, 1, 2, 1, 32, 300, 64};
        for (const char *type : {"f32", "q8_0"}) {
            tools::write_synth_model(tiny, type, tmp.string(), 3);
            const std::vector<uint8_t> b = read_all(tmp);
            const std::string name = std::string("tiny-") + type + ".gguf";
            seeds.add(name, b);
            auto ws = WeightSource::open(open_file_source(tmp.string()));
            seeds.truncations(name, b, ws->data_offset());
            seeds.mutations(name, b, ws->data_offset(), 12, type[0]);
        }
        fs::remove(tmp);

        const std::vector<std::string> models = {
            "models/stories260K.gguf",          // SPM, llama: the main supported path
            "fixtures/models/llama.q2_k.gguf",  // K-quant weights, 32000-token SPM vocabulary
            "fixtures/models/gpt2.q4_0.gguf",   // BPE vocabulary, architecture not run
            "fixtures/models/qwen2.q4_0.gguf",  // BPE with another pre-tokenizer
            "fixtures/models/phi3.q4_0.gguf",
        };
        uint64_t seed = 10;
        for (const std::string &rel : models) {
            const fs::path p = shared / rel;
            const std::string name = p.filename().string();
            const std::vector<uint8_t> b = read_all(p);
            auto ws = WeightSource::open(open_file_source(p.string()));
            if (rel.find("stories260K") != std::string::npos || rel.find("q2_k") != std::string::npos) {
                seeds.add(name, b);
                seeds.truncations(name, b, ws->data_offset());
            }
            const std::vector<uint8_t> v = vocab_file(*ws, kVocabCut);
            const std::string vname = name + ".vocab300";
            seeds.add(vname, v);
            seeds.truncations(vname, v, v.size());
            seeds.mutations(vname, v, v.size(), 8, ++seed);
        }
        std::printf("wrote %d seeds to %s\n", seeds.count(), argv[2]);
        return 0;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "fuzz_gguf_corpus: %s\n", e.what());
        return 1;
    }
}
