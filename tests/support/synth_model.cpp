// Synthetic models (synth_model.h): the named shapes, random weights quantized per type, and the
// GGUF file written through GgufWriter.
#include "synth_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <stdexcept>

#include "core/error.h"
#include "gguf/weight_source.h"
#include "gguf_writer.h"
#include "kernels/blocks.h"
#include "kernels/dequant.h"
#include "kernels/fp16.h"
#include "kernels/kernel_table.h"

namespace tools {
namespace {

using llm::TensorType;

const SynthShape kShapes[] = {
    {"tinyllama-1.1b", 2048, 22, 32, 4, 5632, 32000, 2048},
    {"tiny-deep", 256, 24, 8, 4, 768, 512, 512},  // many small layers: budget tests
    {"small-128m", 768, 12, 12, 4, 2048, 32000, 2048},
    // Gemma 3 1B: 26 layers, 1 KV head of 256, window 512 on 5 of every 6 layers.
    {"gemma3-1b", 1152, 26, 4, 1, 6912, 262144, 32768, "gemma3", 256, 512, 6},
    // Gemma 4 E2B's text model (its config.json): 35 layers of 1536, 8 query heads and 1 KV head, of 256
    // on the windowed layers (window 512) and 512 on every fifth (full); the rest in kGemma4.
    {"gemma4-e2b", 1536, 35, 8, 1, 6144, 262144, 131072, "gemma4", 256, 512, 5},
    // Gemma 4 E4B: 42 layers of 2560, 2 KV heads, every sixth layer full.
    {"gemma4-e4b", 2560, 42, 8, 2, 10240, 262144, 131072, "gemma4", 256, 512, 6},
    // Qwen3.5-4B's text model (its config.json): 32 layers, 24 of them gated delta-net (16 key and 32
    // value heads of 128), 8 full attention with 16 query heads (and their output gates) and 4 KV heads of
    // 256; embeddings tied.
    {"qwen3.5-4b", 2560, 32, 16, 4, 9216, 248320, 32768, "qwen35", 256, 0, 0, 16, 32, 128},
    // gpt-oss-20b (its config.json): 24 layers of 2880, 64 query and 8 KV heads of 64, a 128-position
    // window on even layers, 32 experts of width 2880 with 4 routed per token, o200k-sized vocabulary.
    {"gpt-oss-20b", 2880, 24, 64, 8, 2880, 201088, 131072, "gpt-oss", 64, 128, 2, 0, 0, 0, 32, 4},
    // The same layer at a toy size, for tests of the writer.
    {"gpt-oss-toy", 64, 2, 4, 2, 32, 300, 256, "gpt-oss", 16, 4, 2, 0, 0, 0, 4, 2},
};

// Gemma 4's E-model extras by shape name (the published config.json's global_head_dim,
// num_kv_shared_layers, hidden_size_per_layer_input and use_double_wide_mlp).
struct Gemma4Entry {
    const char *name;
    SynthGemma4 g4;
};
const Gemma4Entry kGemma4[] = {
    {"gemma4-e2b", {512, 20, 256, true}},
    {"gemma4-e4b", {512, 18, 256, false}},
};

struct Rng {
    uint64_t s;
    uint64_t next() {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        return s;
    }
    float uniform() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }  // [0, 1)
};

TensorType parse_type(const std::string &t) {
    if (t == "f32") return TensorType::F32;
    if (t == "f16") return TensorType::F16;
    if (t == "bf16") return TensorType::BF16;
    if (t == "q8_0") return TensorType::Q8_0;
    if (t == "q4_0") return TensorType::Q4_0;
    if (t == "q4_1") return TensorType::Q4_1;
    if (t == "q5_0") return TensorType::Q5_0;
    if (t == "q5_1") return TensorType::Q5_1;
    if (t == "q4_k" || t == "q4_k_m") return TensorType::Q4_K;
    if (t == "mxfp4_moe") return TensorType::Q8_0;  // the experts' MXFP4 is chosen per tensor
    if (t == "q5_k") return TensorType::Q5_K;
    if (t == "q6_k") return TensorType::Q6_K;
    throw std::runtime_error("unknown synthetic type '" + t + "'");
}

void put_f16(uint8_t *p, float v) {
    const uint16_t h = llm::f32_to_fp16(v);
    std::memcpy(p, &h, 2);
}

// Random bytes for n_rows rows of a type, with every scale field set to a small sane value so the
// weights have a standard deviation of roughly 0.02 and nothing is Inf/NaN.
void fill_rows(TensorType t, uint64_t n_in, uint64_t n_rows, Rng &rng, llm::GgufSink &out) {
    const uint64_t rb = llm::row_bytes(t, n_in);
    std::vector<uint8_t> row(rb);
    for (uint64_t r = 0; r < n_rows; ++r) {
        for (uint64_t i = 0; i + 8 <= rb; i += 8) {
            uint64_t v = rng.next();
            std::memcpy(&row[i], &v, 8);
        }
        for (uint64_t i = rb / 8 * 8; i < rb; ++i) row[i] = static_cast<uint8_t>(rng.next());
        uint8_t *b = row.data();
        switch (t) {
        case TensorType::F32:
            for (uint64_t i = 0; i < n_in; ++i) {
                float v = (rng.uniform() - 0.5f) * 0.07f;
                std::memcpy(b + 4 * i, &v, 4);
            }
            break;
        case TensorType::F16:
            for (uint64_t i = 0; i < n_in; ++i) put_f16(b + 2 * i, (rng.uniform() - 0.5f) * 0.07f);
            break;
        case TensorType::BF16:
            for (uint64_t i = 0; i < n_in; ++i) {
                uint16_t h = llm::f32_to_bf16((rng.uniform() - 0.5f) * 0.07f);
                std::memcpy(b + 2 * i, &h, 2);
            }
            break;
        case TensorType::Q8_0:
            for (uint64_t i = 0; i < rb; i += 34) put_f16(b + i, 0.02f / 73.0f);
            break;
        case TensorType::Q4_0:
        case TensorType::Q5_0:
            for (uint64_t i = 0; i < rb; i += llm::type_info(t).bytes) put_f16(b + i, 0.02f / 5.0f);
            break;
        case TensorType::Q4_1:
        case TensorType::Q5_1:
            for (uint64_t i = 0; i < rb; i += llm::type_info(t).bytes) {
                put_f16(b + i, 0.02f / 5.0f);
                put_f16(b + i + 2, -0.03f);
            }
            break;
        case TensorType::Q4_K:
        case TensorType::Q5_K:
            for (uint64_t i = 0; i < rb; i += llm::type_info(t).bytes) {
                put_f16(b + i, 0.02f / 150.0f);
                put_f16(b + i + 2, 0.02f / 40.0f);
            }
            break;
        case TensorType::MXFP4:  // scale 2^(120-128): the largest code (12) is 0.047
            for (uint64_t i = 0; i < rb; i += 17) b[i] = 120;
            break;
        case TensorType::Q6_K:
            for (uint64_t i = 0; i < rb; i += 210) {
                for (int s = 0; s < 16; ++s) b[i + 192 + s] = static_cast<uint8_t>(1 + rng.next() % 16);
                put_f16(b + i + 208, 0.02f / 150.0f);
            }
            break;
        default: throw std::runtime_error("synthetic writer cannot fill " + llm::type_name(t));
        }
        out.write(row.data(), rb);
    }
}

// Receives rows in type `from` and writes them in type `to`: each row dequantized (the reference
// dequantizer) and quantized again, so a file made through it holds the same weights as the `from`
// file at the precision of `to`.
class Requantize final : public llm::GgufSink {
public:
    Requantize(TensorType from, TensorType to, uint64_t n_in, llm::GgufSink &out)
        : from_(from), to_(to), n_in_(n_in), out_(out), row_(llm::row_bytes(from, n_in)), f_(n_in),
          dst_(llm::row_bytes(to, n_in)) {}
    void write(const void *p, uint64_t n) override {
        const auto *b = static_cast<const uint8_t *>(p);
        while (n > 0) {
            const uint64_t take = std::min<uint64_t>(n, row_.size() - fill_);
            std::memcpy(row_.data() + fill_, b, take);
            fill_ += take, b += take, n -= take;
            if (fill_ == row_.size()) flush();
        }
    }

private:
    void flush() {
        fill_ = 0;
        const int64_t n = static_cast<int64_t>(n_in_);
        llm::dequantize_row(from_, row_.data(), f_.data(), n);
        switch (to_) {
        case TensorType::F32: std::memcpy(dst_.data(), f_.data(), dst_.size()); break;
        case TensorType::F16:
            for (int64_t i = 0; i < n; ++i) put_f16(dst_.data() + 2 * i, f_[i]);
            break;
        case TensorType::Q8_0:
            llm::quantize_row_q8_0(f_.data(), reinterpret_cast<llm::BlockQ8_0 *>(dst_.data()), n);
            break;
        case TensorType::Q4_0: quantize_row_q4_0_ref(f_.data(), dst_.data(), n); break;
        default:
            throw std::runtime_error("--from-type: cannot write " + llm::type_name(to_) + " (f32, f16, q8_0, q4_0)");
        }
        out_.write(dst_.data(), dst_.size());
    }

    TensorType from_, to_;
    uint64_t n_in_;
    llm::GgufSink &out_;
    std::vector<uint8_t> row_;
    uint64_t fill_ = 0;
    std::vector<float> f_;
    std::vector<uint8_t> dst_;
};

// A SentencePiece vocabulary: specials, the 256 byte tokens, then distinct made-up pieces.
void add_synth_vocab(llm::GgufWriter &w, uint32_t n_vocab) {
    std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
    std::vector<int32_t> types = {2, 3, 3};
    char buf[16];
    for (int b = 0; b < 256; ++b) {
        std::snprintf(buf, sizeof buf, "<0x%02X>", b);
        tokens.push_back(buf);
        types.push_back(6);
    }
    const char *alpha = "abcdefghijklmnopqrstuvwxyz";
    for (uint32_t i = 0; tokens.size() < n_vocab; ++i) {
        std::string piece = "\xE2\x96\x81";
        for (uint32_t x = i + 1; x > 0; x /= 27) piece += alpha[x % 26];
        tokens.push_back(piece + std::to_string(i));
        types.push_back(1);
    }
    tokens.resize(n_vocab);
    types.resize(n_vocab);
    std::vector<float> scores(n_vocab);
    for (uint32_t i = 0; i < n_vocab; ++i) scores[i] = -static_cast<float>(i);
    w.add_string("tokenizer.ggml.model", "llama");
    w.add_string_array("tokenizer.ggml.tokens", tokens);
    w.add_array("tokenizer.ggml.scores", scores);
    w.add_array("tokenizer.ggml.token_type", types);
    w.add_u32("tokenizer.ggml.bos_token_id", 1);
    w.add_u32("tokenizer.ggml.eos_token_id", 2);
}

// GPT-2's byte alphabet: the printable bytes stand for themselves, the others for U+0100 on, in order.
std::string byte_level_char(int b) {
    const auto printable = [](int x) { return (x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174; };
    int cp = b;
    if (!printable(b)) {
        cp = 256;
        for (int x = 0; x < b; ++x) cp += !printable(x);
    }
    std::string out;
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return out;
}

// A byte-level BPE vocabulary as GPT-2-style files carry it: the 256 byte tokens, then tokens made by
// seeded merges of two earlier tokens (half of the left parts drawn from the printable ASCII bytes, so
// word-like pieces dominate, as in real vocabularies; the rest anything, multi-byte UTF-8 and broken
// sequences included), and the end-of-text token last.
void add_synth_bpe_vocab(llm::GgufWriter &w, uint32_t n_vocab, uint64_t seed) {
    std::vector<std::string> tokens;
    std::vector<int32_t> types;
    std::vector<std::string> merges;
    std::set<std::string> seen;
    for (int b = 0; b < 256; ++b) {
        tokens.push_back(byte_level_char(b));
        types.push_back(1);
        seen.insert(tokens.back());
    }
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 7;
    const auto next = [&x]() {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        return x;
    };
    while (tokens.size() + 1 < n_vocab) {
        const uint64_t r = next();
        const size_t a = r & 1 ? static_cast<size_t>(32 + (r >> 1) % 95) : static_cast<size_t>((r >> 1) % tokens.size());
        const size_t b = static_cast<size_t>(next() % std::min<size_t>(tokens.size(), 4096));
        std::string t = tokens[a] + tokens[b];
        if (t.size() > 48 || !seen.insert(t).second) continue;
        merges.push_back(tokens[a] + " " + tokens[b]);
        tokens.push_back(std::move(t));
        types.push_back(1);
    }
    tokens.push_back("<|endoftext|>");
    types.push_back(3);
    const uint32_t eot = static_cast<uint32_t>(tokens.size() - 1);
    w.add_string("tokenizer.ggml.model", "gpt2");
    w.add_string("tokenizer.ggml.pre", "gpt-2");
    w.add_string_array("tokenizer.ggml.tokens", tokens);
    w.add_array("tokenizer.ggml.token_type", types);
    w.add_string_array("tokenizer.ggml.merges", merges);
    w.add_u32("tokenizer.ggml.bos_token_id", eot);
    w.add_u32("tokenizer.ggml.eos_token_id", eot);
}

// The shape's vocabulary (SynthShape::vocab).
void add_vocab(llm::GgufWriter &w, const SynthShape &sh, uint64_t seed) {
    if (sh.vocab.empty()) return add_synth_vocab(w, sh.n_vocab);
    if (sh.vocab == "bpe") return add_synth_bpe_vocab(w, sh.n_vocab, seed);
    auto src = llm::WeightSource::open_file(sh.vocab);
    for (const auto &[key, v] : src->meta().all())
        if (key.rfind("tokenizer.", 0) == 0) w.add_kv_raw(key, static_cast<uint32_t>(v.type), llm::GgufWriter::encode_value(v));
}

// Q4_K_M's rule for attn_v / ffn_down: more bits for the first and last eighth and every third layer.
bool use_more_bits(uint32_t i, uint32_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

}  // namespace

void quantize_row_q4_0_ref(const float *x, uint8_t *dst, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b, x += 32, dst += 18) {
        float max = 0.0f, amax = 0.0f;
        for (int j = 0; j < 32; ++j)
            if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]), max = x[j];
        // The extreme value maps to -8 exactly, the others round to nearest within -8..7.
        const float d = max / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        put_f16(dst, d);
        for (int j = 0; j < 16; ++j) {
            const int lo = std::min(15, static_cast<int>(x[j] * id + 8.5f));
            const int hi = std::min(15, static_cast<int>(x[j + 16] * id + 8.5f));
            dst[2 + j] = static_cast<uint8_t>(lo | (hi << 4));
        }
    }
}

const SynthShape *find_shape(const std::string &name) {
    for (const SynthShape &s : kShapes)
        if (s.name == name) return &s;
    return nullptr;
}

std::string shape_names() {
    std::string s;
    for (const SynthShape &x : kShapes) s += (s.empty() ? "" : ", ") + x.name;
    return s;
}

bool is_synth_type(const std::string &type) {
    try {
        parse_type(type);
        return true;
    } catch (...) {
        return false;
    }
}

std::string synth_type_names() {
    return "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k, q4_k_m, mxfp4_moe";
}

void write_synth_model(const SynthShape &sh, const std::string &type, const std::string &path, uint64_t seed,
                       const std::string &from_type) {
    if (!sh.vocab.empty() && sh.vocab != "bpe") {  // a copied vocabulary sets n_vocab
        const auto src = llm::WeightSource::open_file(sh.vocab);
        const auto *toks = src->meta().str_array("tokenizer.ggml.tokens");
        if (!toks) throw std::runtime_error(sh.vocab + " has no tokenizer.ggml.tokens");
        if (toks->size() != sh.n_vocab) {
            SynthShape s = sh;
            s.n_vocab = static_cast<uint32_t>(toks->size());
            return write_synth_model(s, type, path, seed, from_type);
        }
    }
    if (sh.arch == "gemma4") {
        for (const Gemma4Entry &e : kGemma4)
            if (sh.name == e.name) return write_synth_gemma4(sh, e.g4, type, path, seed, from_type);
        throw std::runtime_error("synthetic gemma4 shape " + sh.name + " has no layout (kGemma4)");
    }

    const TensorType base = parse_type(type);
    const bool convert = !from_type.empty();
    if (convert && (type == "q4_k_m" || from_type == "q4_k_m" || type == "mxfp4_moe" || from_type == "mxfp4_moe"))
        throw std::runtime_error("--from-type does not take q4_k_m or mxfp4_moe");
    const TensorType from = convert ? parse_type(from_type) : base;
    const bool km = type == "q4_k_m";
    const bool gemma = sh.arch == "gemma3", qwen35 = sh.arch == "qwen35", oss = sh.arch == "gpt-oss";
    if (oss != (sh.n_expert > 0)) throw std::runtime_error("synthetic shape " + sh.name + ": experts only for gpt-oss");
    const TensorType expert_type = type == "mxfp4_moe" ? TensorType::MXFP4 : base;
    const uint64_t hd = sh.head_dim ? sh.head_dim : sh.n_embd / sh.n_head;
    const std::string a = sh.arch + ".";
    llm::GgufWriter w;
    w.add_string("general.architecture", sh.arch);
    w.add_string("general.name", "synthetic " + sh.name + " " + type + (convert ? " from " + from_type : ""));
    w.add_u32(a + "context_length", sh.n_ctx);
    w.add_u32(a + "embedding_length", sh.n_embd);
    w.add_u32(a + "block_count", sh.n_layer);
    w.add_u32(a + "feed_forward_length", sh.n_ff);
    w.add_u32(a + "attention.head_count", sh.n_head);
    w.add_u32(a + "attention.head_count_kv", sh.n_head_kv);
    w.add_u32(a + "attention.key_length", static_cast<uint32_t>(hd));
    w.add_u32(a + "attention.value_length", static_cast<uint32_t>(hd));
    w.add_u32(a + "rope.dimension_count", static_cast<uint32_t>(qwen35 ? hd / 4 : hd));
    w.add_f32(a + "attention.layer_norm_rms_epsilon", qwen35 ? 1e-6f : 1e-5f);
    w.add_f32(a + "rope.freq_base", qwen35 ? 1e7f : gemma ? 1e6f : oss ? 150000.0f : 10000.0f);
    if (oss) {  // YaRN x32 over 4096 positions, as the published files set it
        w.add_u32(a + "expert_count", sh.n_expert);
        w.add_u32(a + "expert_used_count", sh.n_expert_used);
        w.add_u32(a + "expert_feed_forward_length", sh.n_ff);
        w.add_string(a + "rope.scaling.type", "yarn");
        w.add_f32(a + "rope.scaling.factor", 32.0f);
        w.add_u32(a + "rope.scaling.original_context_length", 4096);
    }
    if (qwen35) {
        w.add_array(a + "rope.dimension_sections", std::vector<int32_t>{11, 11, 10, 0});
        w.add_u32(a + "full_attention_interval", 4);
        w.add_u32(a + "ssm.conv_kernel", 4);
        w.add_u32(a + "ssm.state_size", sh.gdn_head_dim);
        w.add_u32(a + "ssm.group_count", sh.gdn_k_heads);
        w.add_u32(a + "ssm.time_step_rank", sh.gdn_v_heads);
        w.add_u32(a + "ssm.inner_size", sh.gdn_v_heads * sh.gdn_head_dim);
    }
    if (sh.swa_window) {
        w.add_u32(a + "attention.sliding_window", sh.swa_window);
        if (!oss) w.add_u32(a + "attention.sliding_window_pattern", sh.swa_pattern);  // gpt-oss: fixed, 2
    }

    add_vocab(w, sh, seed);

    auto rng = std::make_shared<Rng>(Rng{seed * 0x9E3779B97F4A7C15ull + 1});
    // Converting, the random stream is the from_type file's, so the values are that file's.
    auto matrix = [&](const std::string &name, uint64_t n_in, uint64_t n_out, TensorType t) {
        if (!convert) {
            w.add_tensor(name, {n_in, n_out}, t, [=](llm::GgufSink &out) { fill_rows(t, n_in, n_out, *rng, out); });
            return;
        }
        w.add_tensor(name, {n_in, n_out}, t, [=](llm::GgufSink &out) {
            Requantize conv(from, t, n_in, out);
            fill_rows(from, n_in, n_out, *rng, conv);
        });
    };
    auto ones = [&](const std::string &name, uint64_t n) {
        std::vector<uint8_t> d(n * 4);
        const float one = 1.0f;
        for (uint64_t i = 0; i < n; ++i) std::memcpy(&d[i * 4], &one, 4);
        w.add_tensor(name, {n}, TensorType::F32, std::move(d));
    };
    auto filled = [&](const std::string &name, uint64_t n, float v) {
        std::vector<uint8_t> d(n * 4);
        for (uint64_t i = 0; i < n; ++i) std::memcpy(&d[i * 4], &v, 4);
        w.add_tensor(name, {n}, TensorType::F32, std::move(d));
    };
    // Small random values: biases, sinks, the router (random so tokens route to different experts).
    auto noise = [&](const std::string &name, std::vector<uint64_t> dims, float scale) {
        uint64_t n = 1;
        for (uint64_t d : dims) n *= d;
        std::vector<uint8_t> d(n * 4);
        for (uint64_t i = 0; i < n; ++i) {
            const float v = (rng->uniform() - 0.5f) * scale;
            std::memcpy(&d[i * 4], &v, 4);
        }
        w.add_tensor(name, dims, TensorType::F32, std::move(d));
    };
    // n_x experts of [n_in -> n_out] in one tensor: n_x * n_out rows.
    auto experts = [&](const std::string &name, uint64_t n_in, uint64_t n_out, uint64_t n_x, TensorType t) {
        w.add_tensor(name, {n_in, n_out, n_x}, t, [=](llm::GgufSink &out) { fill_rows(t, n_in, n_out * n_x, *rng, out); });
    };
    const uint64_t E = sh.n_embd, Q = hd * sh.n_head, KV = hd * sh.n_head_kv, FF = sh.n_ff;
    matrix("token_embd.weight", E, sh.n_vocab, base);
    for (uint32_t l = 0; l < sh.n_layer; ++l) {
        const std::string p = "blk." + std::to_string(l) + ".";
        const TensorType more = km && use_more_bits(l, sh.n_layer) ? TensorType::Q6_K : base;
        ones(p + "attn_norm.weight", E);
        if (qwen35) {
            if (l % 4 != 3) {  // gated delta-net: in-projections, conv taps, decay and beta, gated norm
                const uint64_t KD = uint64_t{sh.gdn_k_heads} * sh.gdn_head_dim, VD = uint64_t{sh.gdn_v_heads} * sh.gdn_head_dim;
                matrix(p + "attn_qkv.weight", E, 2 * KD + VD, base);
                matrix(p + "attn_gate.weight", E, VD, base);
                matrix(p + "ssm_conv1d.weight", 4, 2 * KD + VD, TensorType::F32);
                filled(p + "ssm_dt.bias", sh.gdn_v_heads, 0.0f);
                filled(p + "ssm_a", sh.gdn_v_heads, -1.0f);  // -exp(A_log): a decay below 1
                matrix(p + "ssm_alpha.weight", E, sh.gdn_v_heads, base);
                matrix(p + "ssm_beta.weight", E, sh.gdn_v_heads, base);
                ones(p + "ssm_norm.weight", sh.gdn_head_dim);
                matrix(p + "ssm_out.weight", VD, E, base);
            } else {  // full attention, the query projection carrying the output gate
                matrix(p + "attn_q.weight", E, 2 * Q, base);
                matrix(p + "attn_k.weight", E, KV, base);
                matrix(p + "attn_v.weight", E, KV, more);
                ones(p + "attn_q_norm.weight", hd);
                ones(p + "attn_k_norm.weight", hd);
                matrix(p + "attn_output.weight", Q, E, base);
            }
            ones(p + "post_attention_norm.weight", E);
            matrix(p + "ffn_gate.weight", E, FF, base);
            matrix(p + "ffn_up.weight", E, FF, base);
            matrix(p + "ffn_down.weight", FF, E, more);
            continue;
        }
        matrix(p + "attn_q.weight", E, Q, base);
        matrix(p + "attn_k.weight", E, KV, base);
        matrix(p + "attn_v.weight", E, KV, more);
        matrix(p + "attn_output.weight", Q, E, base);
        if (oss) {  // [n_embd, n_expert] router; experts [n_embd -> n_ff] x n_expert and back
            const uint64_t NX = sh.n_expert;
            noise(p + "attn_q.bias", {Q}, 0.02f);
            noise(p + "attn_k.bias", {KV}, 0.02f);
            noise(p + "attn_v.bias", {KV}, 0.02f);
            noise(p + "attn_output.bias", {E}, 0.02f);
            noise(p + "attn_sinks.weight", {sh.n_head}, 1.0f);
            ones(p + "post_attention_norm.weight", E);
            noise(p + "ffn_gate_inp.weight", {E, NX}, 0.2f);
            noise(p + "ffn_gate_inp.bias", {NX}, 0.02f);
            experts(p + "ffn_gate_exps.weight", E, FF, NX, expert_type);
            noise(p + "ffn_gate_exps.bias", {FF, NX}, 0.02f);
            experts(p + "ffn_up_exps.weight", E, FF, NX, expert_type);
            noise(p + "ffn_up_exps.bias", {FF, NX}, 0.02f);
            experts(p + "ffn_down_exps.weight", FF, E, NX, expert_type);
            noise(p + "ffn_down_exps.bias", {E, NX}, 0.02f);
            continue;
        }
        if (gemma) {
            ones(p + "attn_q_norm.weight", hd);
            ones(p + "attn_k_norm.weight", hd);
            ones(p + "post_attention_norm.weight", E);
            ones(p + "post_ffw_norm.weight", E);
        }
        ones(p + "ffn_norm.weight", E);
        matrix(p + "ffn_gate.weight", E, FF, base);
        matrix(p + "ffn_up.weight", E, FF, base);
        matrix(p + "ffn_down.weight", FF, E, more);
    }
    ones("output_norm.weight", E);
    if (!gemma && !qwen35) matrix("output.weight", E, sh.n_vocab, km ? TensorType::Q6_K : base);  // tied
    w.write_file(path);
}

// Tensors and keys as llama.cpp's converter writes an E2B/E4B file (the order of the shared gemma4
// fixtures', which follow it): tied embeddings, the per-layer token table and its projection, one global
// rope_freqs for the full layers' partial rotation; in every layer V's own projection, per-head q/k norms,
// the per-layer input's gate and projection, and layer_output_scale. The shared layers still carry
// attn_k / attn_v / attn_k_norm, as published files do.
void write_synth_gemma4(const SynthShape &sh, const SynthGemma4 &g4, const std::string &type, const std::string &path,
                        uint64_t seed, const std::string &from_type) {
    const TensorType base = parse_type(type);
    const bool convert = !from_type.empty();
    if (convert && (type == "q4_k_m" || from_type == "q4_k_m"))
        throw std::runtime_error("--from-type does not take q4_k_m");
    const TensorType from = convert ? parse_type(from_type) : base;
    const bool km = type == "q4_k_m";
    const uint32_t L = sh.n_layer, first_shared = L - g4.shared_kv_layers;
    if (g4.shared_kv_layers + 2 > L || sh.swa_pattern < 2 || sh.head_dim == 0)
        throw std::runtime_error("synthetic gemma4 shape " + sh.name + ": inconsistent layout");
    auto is_swa = [&](uint32_t l) { return l % sh.swa_pattern != sh.swa_pattern - 1; };
    auto head_dim = [&](uint32_t l) -> uint64_t { return is_swa(l) ? sh.head_dim : g4.global_head_dim; };
    auto ff = [&](uint32_t l) -> uint64_t {
        return g4.double_wide_mlp && l >= first_shared ? 2ull * sh.n_ff : sh.n_ff;
    };

    const std::string a = "gemma4.";
    llm::GgufWriter w;
    w.add_string("general.architecture", "gemma4");
    w.add_string("general.name", "synthetic " + sh.name + " " + type + (convert ? " from " + from_type : ""));
    // llama.cpp's file type, for its tools' reports: Q4_K_M is 15, the others their type's.
    const int ftype = km ? 15 : type == "f32" ? 0 : type == "f16" ? 1 : type == "q8_0" ? 7 : -1;
    if (ftype >= 0) w.add_u32("general.file_type", static_cast<uint32_t>(ftype));
    w.add_u32(a + "block_count", L);
    w.add_u32(a + "context_length", sh.n_ctx);
    w.add_u32(a + "embedding_length", sh.n_embd);
    std::vector<int32_t> ffs(L);
    for (uint32_t l = 0; l < L; ++l) ffs[l] = static_cast<int32_t>(ff(l));
    w.add_array(a + "feed_forward_length", ffs);
    w.add_u32(a + "attention.head_count", sh.n_head);
    w.add_u32(a + "attention.head_count_kv", sh.n_head_kv);
    w.add_f32(a + "rope.freq_base", 1e6f);
    w.add_f32(a + "rope.freq_base_swa", 1e4f);
    w.add_f32(a + "attention.layer_norm_rms_epsilon", 1e-6f);
    w.add_u32(a + "attention.key_length", g4.global_head_dim);
    w.add_u32(a + "attention.value_length", g4.global_head_dim);
    w.add_f32(a + "final_logit_softcapping", 30.0f);
    w.add_u32(a + "attention.sliding_window", sh.swa_window);
    w.add_u32(a + "attention.shared_kv_layers", g4.shared_kv_layers);
    w.add_u32(a + "embedding_length_per_layer_input", g4.n_embd_per_layer);
    std::vector<uint8_t> swa(L);
    for (uint32_t l = 0; l < L; ++l) swa[l] = is_swa(l) ? 1 : 0;
    w.add_array(a + "attention.sliding_window_pattern", llm::MetaType::BOOL, swa.data(), L);
    w.add_u32(a + "attention.key_length_swa", sh.head_dim);
    w.add_u32(a + "attention.value_length_swa", sh.head_dim);
    w.add_u32(a + "rope.dimension_count", g4.global_head_dim);
    w.add_u32(a + "rope.dimension_count_swa", sh.head_dim);
    add_synth_vocab(w, sh.n_vocab);

    auto rng = std::make_shared<Rng>(Rng{seed * 0x9E3779B97F4A7C15ull + 1});
    auto matrix = [&](const std::string &name, uint64_t n_in, uint64_t n_out, TensorType t) {
        if (!convert) {
            w.add_tensor(name, {n_in, n_out}, t, [=](llm::GgufSink &out) { fill_rows(t, n_in, n_out, *rng, out); });
            return;
        }
        w.add_tensor(name, {n_in, n_out}, t, [=](llm::GgufSink &out) {
            Requantize conv(from, t, n_in, out);
            fill_rows(from, n_in, n_out, *rng, conv);
        });
    };
    auto filled = [&](const std::string &name, std::vector<float> v) {
        std::vector<uint8_t> d(v.size() * 4);
        std::memcpy(d.data(), v.data(), d.size());
        w.add_tensor(name, {v.size()}, TensorType::F32, std::move(d));
    };
    auto ones = [&](const std::string &name, uint64_t n) { filled(name, std::vector<float>(n, 1.0f)); };

    const uint64_t E = sh.n_embd, PL = uint64_t{g4.n_embd_per_layer} * L;
    // llama-quantize gives the token tables of a tied model the head's type, and keeps
    // per_layer_model_proj as converted (F16).
    const TensorType embd = km ? TensorType::Q6_K : base;
    ones("output_norm.weight", E);
    matrix("per_layer_model_proj.weight", E, PL, base == TensorType::F32 ? TensorType::F32 : TensorType::F16);
    ones("per_layer_proj_norm.weight", g4.n_embd_per_layer);
    matrix("per_layer_token_embd.weight", PL, sh.n_vocab, embd);
    // [global_head_dim / 2]: a quarter of the full layers' dims rotate, the rest see a frequency of ~0.
    std::vector<float> freqs(g4.global_head_dim / 2, 1e30f);
    std::fill_n(freqs.begin(), g4.global_head_dim / 8, 1.0f);
    filled("rope_freqs.weight", freqs);
    matrix("token_embd.weight", E, sh.n_vocab, embd);
    for (uint32_t l = 0; l < L; ++l) {
        const std::string p = "blk." + std::to_string(l) + ".";
        const TensorType more = km && use_more_bits(l, L) ? TensorType::Q6_K : base;
        const uint64_t hd = head_dim(l), Q = hd * sh.n_head, KV = hd * sh.n_head_kv, FF = ff(l);
        matrix(p + "attn_k.weight", E, KV, base);
        ones(p + "attn_k_norm.weight", hd);
        ones(p + "attn_norm.weight", E);
        matrix(p + "attn_output.weight", Q, E, base);
        matrix(p + "attn_q.weight", E, Q, base);
        ones(p + "attn_q_norm.weight", hd);
        matrix(p + "attn_v.weight", E, KV, more);
        matrix(p + "ffn_down.weight", FF, E, more);
        matrix(p + "ffn_gate.weight", E, FF, base);
        ones(p + "ffn_norm.weight", E);
        matrix(p + "ffn_up.weight", E, FF, base);
        matrix(p + "inp_gate.weight", E, g4.n_embd_per_layer, base);
        ones(p + "layer_output_scale.weight", 1);
        ones(p + "post_attention_norm.weight", E);
        ones(p + "post_ffw_norm.weight", E);
        ones(p + "post_norm.weight", E);
        matrix(p + "proj.weight", g4.n_embd_per_layer, E, base);
    }
    w.write_file(path);
}

}  // namespace tools
