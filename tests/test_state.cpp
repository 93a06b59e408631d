// Saved sessions and context shift, through the public C API (and rope_shift's math directly):
//   - save -> destroy session and model -> reload -> load -> continue gives the tokens of a run that
//     never stopped, greedy and sampled, in every residency mode, through files and host callbacks;
//   - every corrupt or mismatched state (another model, each truncation, each flipped byte, a newer
//     format, a context too small, failing writers and readers) fails with a clear status and leaves
//     the session exactly as it was;
//   - context shift: re-rotated keys give the logits of a fresh session holding the kept tokens, in
//     prefill and generation, and is refused where positions are learned.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "kernels/fp16.h"
#include "llm.h"
#include "model/rope.h"
#include "runtime/session_state.h"
#include "sampling/sampler.h"
#include "synth_model.h"

namespace {

namespace fs = std::filesystem;

const std::string kShared = LLM_SHARED_DIR;
const std::string kStories = kShared + "/models/stories260K.gguf";
std::string fixture(const std::string &stem) {
    // The gpt-oss / Mistral 3 group's models sit in their own folder.
    const bool group = stem.rfind("gptoss", 0) == 0 || stem.find("mistral3") != std::string::npos;
    return kShared + (group ? "/fixtures/gptoss_mistral3/models/" : "/fixtures/models/") + stem + ".gguf";
}

struct Mode {
    const char *name;
    int32_t residency;
    int32_t prefetch;
    bool budget;  // half-way between the model's minimum and everything resident
};
const Mode kModes[] = {{"resident", LLM_RESIDENCY_RESIDENT, 1, false},
                       {"streamed prefetch 0", LLM_RESIDENCY_STREAMED, 0, false},
                       {"streamed prefetch 1", LLM_RESIDENCY_STREAMED, 1, false},
                       {"budget", LLM_RESIDENCY_BUDGET, 1, true}};

llm_model *load_model(const std::string &path, const Mode &mode = kModes[0]) {
    llm_model_params mp;
    llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
    mp.n_threads = 2;
    mp.residency = mode.residency;
    mp.prefetch_depth = mode.prefetch;
    if (mode.budget) {
        llm_model *probe = load_model(path);
        const auto info = nlohmann::json::parse(llm_model_info_json(probe));
        const uint64_t total = info["memory"]["resident_block_bytes"].get<uint64_t>() +
                               info["memory"]["lm_head_bytes"].get<uint64_t>();
        const uint64_t min = info["memory"]["minimum_weight_bytes"];
        llm_model_free(probe);
        mp.ram_budget_bytes = (min + total) / 2;
    }
    llm_model *m = nullptr;
    INFO(path << " " << mode.name);
    REQUIRE(llm_model_load(path.c_str(), &mp, &m) == LLM_OK);
    return m;
}

llm_session_params params(float temperature, int32_t n_ctx = 0) {
    llm_session_params sp;
    llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
    sp.temperature = temperature;
    sp.seed = 1234;
    sp.repeat_penalty = 1.1f;  // the history matters too
    sp.n_ctx = n_ctx;
    sp.n_threads = 2;
    return sp;
}

llm_session *session(llm_model *m, const llm_session_params &sp) {
    llm_session *s = nullptr;
    REQUIRE(llm_session_create(m, &sp, &s) == LLM_OK);
    return s;
}

std::vector<int32_t> tokenize(const llm_model *m, const std::string &text, bool bos = true) {
    int32_t n = 0;
    llm_tokenize(m, text.data(), text.size(), bos, false, nullptr, 0, &n);
    std::vector<int32_t> ids(n);
    REQUIRE(llm_tokenize(m, text.data(), text.size(), bos, false, ids.data(), n, &n) == LLM_OK);
    return ids;
}

// n steps of sample + accept (end-of-generation tokens accepted too, so every run has n tokens).
std::vector<int32_t> generate(llm_session *s, int n) {
    std::vector<int32_t> out;
    for (int i = 0; i < n; ++i) {
        int32_t t = -1;
        REQUIRE(llm_session_sample(s, &t) == LLM_OK);
        REQUIRE(llm_session_accept(s, t) == LLM_OK);
        out.push_back(t);
    }
    return out;
}

std::vector<int32_t> context(const llm_session *s) {
    int32_t n = 0;
    llm_session_tokens(s, nullptr, 0, &n);
    std::vector<int32_t> t(n);
    REQUIRE(llm_session_tokens(s, t.data(), n, &n) == LLM_OK);
    return t;
}

std::vector<float> logits(llm_session *s) {
    const float *lg = nullptr;
    int32_t nv = 0;
    if (llm_session_logits(s, &lg, &nv) != LLM_OK) return {};
    return std::vector<float>(lg, lg + nv);
}

// ---- states in memory -----------------------------------------------------------------------------

// A writer into a vector; write call number fail_at (1-based) fails with `status`.
struct MemWriter {
    std::vector<uint8_t> bytes;
    int calls = 0, fail_at = -1;
    int32_t status = LLM_ERR_IO;
    llm_writer writer() {
        llm_writer w{};
        w.version = LLM_WRITER_VERSION;
        w.user = this;
        w.write = [](void *u, const void *src, uint64_t n) -> int32_t {
            auto *m = static_cast<MemWriter *>(u);
            if (++m->calls == m->fail_at) return m->status;
            m->bytes.insert(m->bytes.end(), static_cast<const uint8_t *>(src), static_cast<const uint8_t *>(src) + n);
            return LLM_OK;
        };
        return w;
    }
};

std::vector<uint8_t> save_mem(llm_session *s) {
    MemWriter w;
    const llm_writer lw = w.writer();
    REQUIRE(llm_session_save_io(s, &lw) == LLM_OK);
    return w.bytes;
}

// Bytes served through llm_io; read_at call number fail_at (1-based) fails. Counts closes.
struct MemReader {
    const std::vector<uint8_t> *bytes;
    int calls = 0, fail_at = -1, closes = 0;
    llm_io io() {
        llm_io io{};
        io.version = LLM_IO_VERSION;
        io.user = this;
        io.size = [](void *u) -> uint64_t { return static_cast<MemReader *>(u)->bytes->size(); };
        io.read_at = [](void *u, uint64_t off, void *dst, uint64_t n) -> int32_t {
            auto *m = static_cast<MemReader *>(u);
            if (++m->calls == m->fail_at) return LLM_ERR_IO;
            if (off > m->bytes->size() || n > m->bytes->size() - off) return LLM_ERR_IO;
            std::memcpy(dst, m->bytes->data() + off, n);
            return LLM_OK;
        };
        io.close = [](void *u) { ++static_cast<MemReader *>(u)->closes; };
        return io;
    }
};

int32_t load_mem(llm_session *s, const std::vector<uint8_t> &bytes, int fail_at = -1) {
    MemReader r{&bytes};
    r.fail_at = fail_at;
    const llm_io io = r.io();
    const int32_t st = llm_session_load_io(s, &io);
    CHECK(r.closes == 1);
    return st;
}

uint64_t fnv(const uint8_t *p, size_t n) {
    llm::Fnv1a64 h;
    h.add(p, n);
    return h.value();
}

// The state with its checksum recomputed (to corrupt a field past the checksum).
void reseal(std::vector<uint8_t> &b) {
    const uint64_t sum = fnv(b.data(), b.size() - 8);
    std::memcpy(b.data() + b.size() - 8, &sum, 8);
}

// Each layer's first stored position in a saved state (the format's layer table).
std::vector<uint32_t> layer_firsts(const std::vector<uint8_t> &b) {
    size_t at = 12;
    auto u32 = [&] {
        uint32_t v;
        std::memcpy(&v, b.data() + at, 4);
        at += 4;
        return v;
    };
    at += u32();  // architecture
    const uint32_t n_layer = u32();
    at += 5 * 4;
    at += 8 * u32();          // tensor types
    at += 8 + 6 * 4 + 4 + 624 * 4;  // fingerprint, KV types, n_ctx, n_past, n_logits, n_history, RNG
    std::vector<uint32_t> f(n_layer);
    for (uint32_t l = 0; l < n_layer; ++l) {
        f[l] = u32();
        at += 16;
    }
    return f;
}

fs::path temp_dir() {
    fs::path d = fs::temp_directory_path() / ("llm_state_test_" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
}

}  // namespace

// ---- resume ----------------------------------------------------------------------------------------

TEST_CASE("save, destroy, reload, load, continue equals one uninterrupted run in every residency mode", "[state]") {
    const fs::path dir = temp_dir();
    const std::string file = (dir / "resume.llmstate").string();
    const int kFirst = 12, kSecond = 20;
    for (const std::string &model : {kStories, fixture("llama.q8_0"), fixture("gptoss.mxfp4_moe")}) {
        for (const Mode &mode : kModes) {
            for (float temp : {0.0f, 0.9f}) {
                INFO(model << ", " << mode.name << ", temperature " << temp);
                const llm_session_params sp = params(temp);
                std::vector<int32_t> whole;
                {
                    llm_model *m = load_model(model, mode);
                    llm_session *s = session(m, sp);
                    const std::vector<int32_t> prompt = tokenize(m, "Once upon a time");
                    REQUIRE(llm_session_prefill(s, prompt.data(), prompt.size()) == LLM_OK);
                    whole = generate(s, kFirst + kSecond);
                    llm_session_free(s);
                    llm_model_free(m);
                }
                std::vector<int32_t> resumed;
                {
                    llm_model *m = load_model(model, mode);
                    llm_session *s = session(m, sp);
                    const std::vector<int32_t> prompt = tokenize(m, "Once upon a time");
                    REQUIRE(llm_session_prefill(s, prompt.data(), prompt.size()) == LLM_OK);
                    resumed = generate(s, kFirst);
                    REQUIRE(llm_session_save(s, file.c_str()) == LLM_OK);
                    llm_session_free(s);
                    llm_model_free(m);
                }
                {
                    llm_model *m = load_model(model, mode);
                    llm_session *s = session(m, sp);
                    REQUIRE(llm_session_load(s, file.c_str()) == LLM_OK);
                    CHECK(llm_session_n_past(s) == static_cast<int32_t>(tokenize(m, "Once upon a time").size()) + kFirst);
                    const std::vector<int32_t> rest = generate(s, kSecond);
                    resumed.insert(resumed.end(), rest.begin(), rest.end());
                    llm_session_free(s);
                    llm_model_free(m);
                }
                CHECK(resumed == whole);
            }
        }
    }
    fs::remove_all(dir);
}

// F16 and Q8_0 caches are saved as stored, and windowed layers (gemma2: window 8 on layer 0,
// gemma3: window 6, gpt-oss: window 4 on layer 0, with sinks and MXFP4 experts) as their rings: the
// prompt is longer than a ring (window + 63 positions), so it has wrapped when saved, and the
// resumed session must not need to recompute anything.
TEST_CASE("resume equals an uninterrupted run with F16 and Q8_0 KV and with a wrapped window ring", "[state][cpu-neutral]") {
    const int kFirst = 12, kSecond = 20, kPrompt = 90;
    for (const char *stem : {"llama.q8_0", "gemma2.f32", "gemma3.f32", "gptoss.f32", "gptoss.mxfp4_moe"}) {
        for (const int32_t kv_type : {LLM_KV_F32, LLM_KV_F16, LLM_KV_Q8_0}) {
            for (float temp : {0.0f, 0.9f}) {
                INFO(stem << ", KV type " << kv_type << ", temperature " << temp);
                llm_model *m = load_model(fixture(stem));
                llm_session_params sp = params(temp, 256);
                sp.kv_type_k = sp.kv_type_v = kv_type;
                std::mt19937 rng(5);
                std::vector<int32_t> prompt(kPrompt);
                for (int32_t &t : prompt) t = 3 + static_cast<int32_t>(rng() % 500);
                llm_session *a = session(m, sp);
                REQUIRE(llm_session_prefill(a, prompt.data(), prompt.size()) == LLM_OK);
                const std::vector<int32_t> whole = generate(a, kFirst + kSecond);
                const std::vector<float> whole_logits = logits(a);

                llm_session *b = session(m, sp);
                REQUIRE(llm_session_prefill(b, prompt.data(), prompt.size()) == LLM_OK);
                std::vector<int32_t> resumed = generate(b, kFirst);
                const std::vector<uint8_t> bytes = save_mem(b);
                // Layer 0 is windowed in the gemma and gpt-oss fixtures: its ring holds window + 63
                // positions.
                if (std::string(stem) != "llama.q8_0") CHECK(layer_firsts(bytes)[0] > 0);
                else CHECK(layer_firsts(bytes)[0] == 0);
                llm_session_free(b);
                llm_session *c = session(m, sp);
                REQUIRE(load_mem(c, bytes) == LLM_OK);
                const std::vector<int32_t> rest = generate(c, kSecond);
                resumed.insert(resumed.end(), rest.begin(), rest.end());
                CHECK(resumed == whole);
                CHECK(logits(c) == whole_logits);
                CHECK(nlohmann::json::parse(llm_session_stats_json(c))["kv_recomputed_tokens"] == 0);
                llm_session_free(c);
                llm_session_free(a);
                llm_model_free(m);
            }
        }
    }
}

TEST_CASE("a state moves between residency modes, host callbacks and a larger context", "[state]") {
    llm_model *resident = load_model(kStories);
    llm_model *streamed = load_model(kStories, kModes[2]);
    const llm_session_params sp = params(0.8f, 128);
    llm_session *a = session(resident, sp);
    const std::vector<int32_t> prompt = tokenize(resident, "Lily and Ben");
    REQUIRE(llm_session_prefill(a, prompt.data(), prompt.size()) == LLM_OK);
    generate(a, 5);
    const std::vector<uint8_t> state = save_mem(a);
    // Saved twice, the same bytes: nothing in the state depends on when or where it was written.
    CHECK(save_mem(a) == state);
    const std::vector<int32_t> ref = generate(a, 15);

    llm_session_params bigger = sp;
    bigger.n_ctx = 512;
    llm_session *b = session(streamed, bigger);
    CHECK(load_mem(b, state) == LLM_OK);
    CHECK(generate(b, 15) == ref);
    // Loading replaces a non-empty context too.
    CHECK(load_mem(b, state) == LLM_OK);
    CHECK(generate(b, 15) == ref);
    llm_session_free(a);
    llm_session_free(b);
    llm_model_free(resident);
    llm_model_free(streamed);
}

// ---- corrupt and mismatched states ----------------------------------------------------------------

namespace {

// A session with a context of its own, and a twin that never sees a load: after each failed load the
// session must still equal the twin (tokens, logits, and the logits of one more token).
struct Target {
    llm_model *m;
    llm_session *s, *twin;
    std::vector<int32_t> tokens;
    std::vector<float> lg;
    Target(llm_model *model, const llm_session_params &sp) : m(model), s(session(model, sp)), twin(session(model, sp)) {
        const std::vector<int32_t> p = tokenize(m, "The cat sat on the mat");
        REQUIRE(llm_session_prefill(s, p.data(), p.size()) == LLM_OK);
        REQUIRE(llm_session_prefill(twin, p.data(), p.size()) == LLM_OK);
        tokens = context(s);
        lg = logits(s);
    }
    ~Target() {
        llm_session_free(s);
        llm_session_free(twin);
    }
    // Cheap: tokens and logits unchanged.
    bool unchanged() { return context(s) == tokens && logits(s) == lg; }
    // And the session goes on exactly as its twin (this advances both).
    void goes_on() {
        REQUIRE(unchanged());
        int32_t a = -1, b = -1;
        REQUIRE(llm_session_sample(s, &a) == LLM_OK);
        REQUIRE(llm_session_sample(twin, &b) == LLM_OK);
        CHECK(a == b);
        REQUIRE(llm_session_accept(s, a) == LLM_OK);
        REQUIRE(llm_session_accept(twin, b) == LLM_OK);
        CHECK(logits(s) == logits(twin));
        tokens = context(s);
        lg = logits(s);
    }
};

std::vector<uint8_t> good_state(llm_model *m, const llm_session_params &sp, int n_gen = 4) {
    llm_session *s = session(m, sp);
    const std::vector<int32_t> p = tokenize(m, "Once upon a time");
    REQUIRE(llm_session_prefill(s, p.data(), p.size()) == LLM_OK);
    generate(s, n_gen);
    std::vector<uint8_t> b = save_mem(s);
    llm_session_free(s);
    return b;
}

bool mentions(const char *what) { return std::string(llm_last_error()).find(what) != std::string::npos; }

}  // namespace

TEST_CASE("a state made by another model is refused, naming the first difference", "[state]") {
    llm_model *f32 = load_model(fixture("llama.f32"));
    const llm_session_params sp = params(0.8f, 64);
    const std::vector<uint8_t> state = good_state(f32, sp);
    struct Other {
        std::string stem;
        const char *names;
    };
    // Same shapes, other tensor types; another architecture; the same types and shapes but other
    // weights' metadata (mistral is llama with another RoPE base).
    for (const Other &o : {Other{"llama.q8_0", "tensor types"}, Other{"gpt2.f32", "architecture"},
                           Other{"mistral.f32", "fingerprint"}, Other{"llama.f16", "tensor types"}}) {
        INFO(o.stem);
        llm_model *m = load_model(fixture(o.stem));
        Target t(m, sp);
        CHECK(load_mem(t.s, state) == LLM_ERR_INVALID_ARGUMENT);
        CHECK(mentions("another model"));
        CHECK(mentions(o.names));
        CHECK(std::string(llm_session_last_error(t.s)) == llm_last_error());
        t.goes_on();
        llm_model_free(m);
    }
    llm_model_free(f32);
}

TEST_CASE("every truncation of a state fails with LLM_ERR_FORMAT and changes nothing", "[state]") {
    llm_model *m = load_model(fixture("llama.f32"));
    const llm_session_params sp = params(0.8f, 64);
    const std::vector<uint8_t> state = good_state(m, sp);
    INFO("state of " << state.size() << " bytes");
    REQUIRE(state.size() < 100000);  // small enough to try every length
    Target t(m, sp);
    llm_session *empty = session(m, sp);
    for (size_t n = 0; n < state.size(); ++n) {
        const std::vector<uint8_t> cut(state.begin(), state.begin() + static_cast<ptrdiff_t>(n));
        const int32_t st = load_mem(t.s, cut);
        if (st != LLM_ERR_FORMAT || !t.unchanged()) {
            FAIL("truncated to " << n << " bytes: status " << st << " (" << llm_last_error() << ")");
        }
        // Every tenth length, into an empty session too (its rows would go straight into the cache).
        if (n % 10 == 0) REQUIRE(load_mem(empty, cut) == LLM_ERR_FORMAT);
    }
    CHECK(llm_session_n_past(empty) == 0);
    // One byte too many is refused as well.
    std::vector<uint8_t> longer = state;
    longer.push_back(0);
    CHECK(load_mem(t.s, longer) == LLM_ERR_FORMAT);
    CHECK(mentions("follow the end"));
    t.goes_on();
    // The empty session still works as a fresh one.
    const std::vector<int32_t> p = tokenize(m, "The cat sat on the mat");
    REQUIRE(llm_session_prefill(empty, p.data(), p.size()) == LLM_OK);
    llm_session *fresh = session(m, sp);
    REQUIRE(llm_session_prefill(fresh, p.data(), p.size()) == LLM_OK);
    CHECK(logits(empty) == logits(fresh));
    llm_session_free(fresh);
    llm_session_free(empty);
    llm_model_free(m);
}

TEST_CASE("a flipped bit anywhere in a state fails with LLM_ERR_FORMAT and changes nothing", "[state]") {
    llm_model *m = load_model(fixture("llama.f32"));
    const llm_session_params sp = params(0.8f, 64);
    const std::vector<uint8_t> state = good_state(m, sp);
    Target t(m, sp);
    llm_session *empty = session(m, sp);
    std::mt19937 rng(5);
    for (size_t i = 0; i < state.size(); ++i) {
        std::vector<uint8_t> b = state;
        b[i] ^= static_cast<uint8_t>(1u << (rng() % 8));
        const int32_t st = load_mem(i % 7 == 0 ? empty : t.s, b);
        if (st != LLM_ERR_FORMAT || !t.unchanged()) {
            FAIL("bit flipped in byte " << i << ": status " << st << " (" << llm_last_error() << ")");
        }
    }
    CHECK(llm_session_n_past(empty) == 0);
    // In the body (a key row) it is the checksum that notices.
    std::vector<uint8_t> b = state;
    b[b.size() - 100] ^= 0x10;
    CHECK(load_mem(t.s, b) == LLM_ERR_FORMAT);
    CHECK(mentions("checksum"));
    t.goes_on();
    llm_session_free(empty);
    llm_model_free(m);
}

TEST_CASE("a newer format version, a wrong magic, another KV type and a context too small are refused", "[state]") {
    llm_model *m = load_model(fixture("llama.f32"));
    llm_session_params sp = params(0.8f, 64);
    sp.kv_type_k = sp.kv_type_v = LLM_KV_F32;
    const std::vector<uint8_t> state = good_state(m, sp, 20);
    Target t(m, sp);

    std::vector<uint8_t> newer = state;
    const uint32_t v = llm::kStateFormatVersion + 1;
    std::memcpy(newer.data() + 8, &v, 4);
    reseal(newer);
    CHECK(load_mem(t.s, newer) == LLM_ERR_FORMAT);
    CHECK(mentions("newer"));
    CHECK(t.unchanged());

    std::vector<uint8_t> magic = state;
    magic[0] = 'X';
    reseal(magic);
    CHECK(load_mem(t.s, magic) == LLM_ERR_FORMAT);
    CHECK(mentions("magic"));
    CHECK(t.unchanged());

    // Rows of another KV element type (here: the header says F16 keys) fit no F32 session.
    std::vector<uint8_t> kv = state;
    uint32_t arch_len = 0, n_types = 0;
    std::memcpy(&arch_len, kv.data() + 12, 4);
    std::memcpy(&n_types, kv.data() + 16 + arch_len + 24, 4);
    const size_t kv_at = 16 + arch_len + 24 + 4 + 8 * n_types + 8;
    const uint32_t f16 = LLM_KV_F16;
    std::memcpy(kv.data() + kv_at, &f16, 4);
    reseal(kv);
    CHECK(load_mem(t.s, kv) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(mentions("F16 keys"));
    CHECK(t.unchanged());

    // A GGUF file is not a state either.
    CHECK(llm_session_load(t.s, fixture("llama.f32").c_str()) == LLM_ERR_FORMAT);
    CHECK(llm_session_load(t.s, "/nonexistent/state") == LLM_ERR_IO);
    CHECK(t.unchanged());

    // A session whose context holds its own prompt but fewer positions than the state.
    const int32_t n_state = static_cast<int32_t>(tokenize(m, "Once upon a time").size()) + 20;
    llm_session_params small = sp;
    small.n_ctx = static_cast<int32_t>(tokenize(m, "The cat sat on the mat").size()) + 1;
    REQUIRE(small.n_ctx < n_state);
    Target tiny(m, small);
    CHECK(load_mem(tiny.s, state) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(mentions(("context has " + std::to_string(small.n_ctx)).c_str()));
    tiny.goes_on();
    t.goes_on();
    llm_model_free(m);
}

TEST_CASE("a version 1 state (before the recurrent fields) still loads and continues the same", "[state]") {
    // Version 2 added two header fields after the layer table (recurrent_pos, recurrent_floats: 0 on
    // an attention-only model) and nothing else for such a model: without them, it is version 1.
    llm_model *m = load_model(fixture("llama.f32"));
    const llm_session_params sp = params(0.8f, 64);
    const std::vector<uint8_t> v2 = good_state(m, sp, 6);
    std::vector<uint8_t> v1 = v2;
    const uint32_t one = 1;
    std::memcpy(v1.data() + 8, &one, 4);
    uint32_t arch = 0, n_layer = 0, n_types = 0;
    std::memcpy(&arch, v1.data() + 12, 4);
    std::memcpy(&n_layer, v1.data() + 16 + arch, 4);
    std::memcpy(&n_types, v1.data() + 16 + arch + 24, 4);
    const size_t fields = 16 + arch + 24 + 4 + 8ull * n_types + 8 + 6 * 4 + 4 + 624 * 4 + 20ull * n_layer;
    uint64_t floats = 1;
    std::memcpy(&floats, v1.data() + fields + 4, 8);
    REQUIRE(floats == 0);
    v1.erase(v1.begin() + static_cast<ptrdiff_t>(fields), v1.begin() + static_cast<ptrdiff_t>(fields + 12));
    reseal(v1);
    llm_session *a = session(m, sp), *b = session(m, sp);
    REQUIRE(load_mem(a, v2) == LLM_OK);
    INFO(llm_last_error());
    REQUIRE(load_mem(b, v1) == LLM_OK);
    CHECK(context(a) == context(b));
    CHECK(generate(a, 10) == generate(b, 10));
    CHECK(logits(a) == logits(b));
    llm_session_free(a);
    llm_session_free(b);
    llm_model_free(m);
}

TEST_CASE("a failing writer fails the save with its status; a failed file save leaves the old file", "[state]") {
    llm_model *m = load_model(fixture("llama.f32"));
    const llm_session_params sp = params(0.8f, 64);
    Target t(m, sp);
    const std::vector<uint8_t> state = save_mem(t.s);
    MemWriter probe;
    const llm_writer pw = probe.writer();
    REQUIRE(llm_session_save_io(t.s, &pw) == LLM_OK);
    const int n_calls = probe.calls;
    REQUIRE(n_calls > 3);
    for (int k = 1; k <= n_calls; ++k) {
        MemWriter w;
        w.fail_at = k;
        w.status = k % 2 ? LLM_ERR_IO : LLM_ERR_OUT_OF_MEMORY;
        const llm_writer lw = w.writer();
        CHECK(llm_session_save_io(t.s, &lw) == w.status);
        CHECK(w.calls == k);  // nothing written after the failure
    }
    // A host returning a positive non-OK value is an I/O error, never success.
    MemWriter odd;
    odd.fail_at = 1;
    odd.status = 7;
    const llm_writer ow = odd.writer();
    CHECK(llm_session_save_io(t.s, &ow) == LLM_ERR_IO);
    llm_writer bad{};
    CHECK(llm_session_save_io(t.s, &bad) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(llm_session_save_io(t.s, nullptr) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(llm_session_save_io(nullptr, &pw) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(t.unchanged());

    // The file path: the old state survives a save that fails mid-write (a file size limit makes
    // write(2) fail with EFBIG), and no temporary file is left beside it.
    const fs::path dir = temp_dir();
    const std::string file = (dir / "old.llmstate").string();
    {
        std::ofstream f(file, std::ios::binary);
        f << "the old state";
    }
    struct sigaction ign {}, old_sa {};
    ign.sa_handler = SIG_IGN;
    sigaction(SIGXFSZ, &ign, &old_sa);
    rlimit old_lim{};
    getrlimit(RLIMIT_FSIZE, &old_lim);
    rlimit lim = old_lim;
    lim.rlim_cur = 4096;
    REQUIRE(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    const int32_t st = llm_session_save(t.s, file.c_str());
    setrlimit(RLIMIT_FSIZE, &old_lim);
    sigaction(SIGXFSZ, &old_sa, nullptr);
    CHECK(st == LLM_ERR_IO);
    {
        std::ifstream f(file, std::ios::binary);
        std::string content((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        CHECK(content == "the old state");
    }
    CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 1);
    CHECK(llm_session_save(t.s, (dir / "no" / "such" / "dir").string().c_str()) == LLM_ERR_IO);
    // And a save that succeeds replaces it with the state.
    REQUIRE(llm_session_save(t.s, file.c_str()) == LLM_OK);
    {
        std::ifstream f(file, std::ios::binary);
        const std::vector<uint8_t> got((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        CHECK(got == state);
    }
    fs::remove_all(dir);
    t.goes_on();
    llm_model_free(m);
}

TEST_CASE("a failing reader fails the load with LLM_ERR_IO, closes once and changes nothing", "[state]") {
    llm_model *m = load_model(fixture("llama.f32"));
    const llm_session_params sp = params(0.8f, 64);
    const std::vector<uint8_t> state = good_state(m, sp);
    Target t(m, sp);
    MemReader probe{&state};
    const llm_io pio = probe.io();
    REQUIRE(llm_session_load_io(t.s, &pio) == LLM_OK);
    REQUIRE(probe.closes == 1);
    const int n_calls = probe.calls;
    Target u(m, sp);
    for (int k = 1; k <= n_calls; ++k) {
        CHECK(load_mem(u.s, state, k) == LLM_ERR_IO);  // load_mem checks the single close
        CHECK(u.unchanged());
    }
    // Bad structs: refused, and close still called once when it can be found.
    MemReader r{&state};
    llm_io io = r.io();
    io.read_at = nullptr;
    CHECK(llm_session_load_io(u.s, &io) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(r.closes == 1);
    io = r.io();
    io.version = LLM_IO_VERSION + 1;
    CHECK(llm_session_load_io(u.s, &io) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(llm_session_load_io(u.s, nullptr) == LLM_ERR_INVALID_ARGUMENT);
    io = r.io();
    CHECK(llm_session_load_io(nullptr, &io) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(r.closes == 3);  // an unknown version's close is at the same place in every version
    u.goes_on();
    // Flags only say where the callbacks may run: ignored here, the load runs on this thread.
    io = r.io();
    io.flags = LLM_IO_THREAD_BOUND;
    CHECK(llm_session_load_io(u.s, &io) == LLM_OK);
    CHECK(r.closes == 4);
    llm_model_free(m);
}

TEST_CASE("the sampler's MT19937 gives std::mt19937's numbers and resumes from its state", "[state]") {
    for (uint32_t seed : {5489u, 0u, 1234u, 0xFFFFFFFFu}) {
        llm::Mt19937 ours;
        ours.seed(seed);
        std::mt19937 ref(seed);
        for (int i = 0; i < 2000; ++i) REQUIRE(ours() == ref());
        const llm::Mt19937::State st = ours.state();
        llm::Mt19937 resumed;
        resumed.set_state(st);
        for (int i = 0; i < 2000; ++i) REQUIRE(resumed() == ref());
    }
    llm::Mt19937 d;
    d.seed(5489u);
    for (int i = 1; i < 10000; ++i) d();
    CHECK(d() == 4123659995u);  // the C++ standard's check value for mt19937's 10000th number
}

// ---- context shift ---------------------------------------------------------------------------------

TEST_CASE("rope_shift turns a key rotated for p into the key rotated for p - d", "[state][shift]") {
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const int hd = 64, heads = 2;
    std::vector<float> ff(hd / 2);
    for (float &f : ff) f = 1.0f + 3.0f * (u(rng) + 1.0f);
    struct Case {
        const char *name;
        llm::RopeParams p;
        bool factors;
        llm::RopeKind kind;
    };
    llm::RopeParams yarn;
    yarn.base = 1e6f;
    yarn.freq_scale = 0.25f;
    yarn.ext_factor = 1.0f;
    yarn.attn_factor = 1.0f;
    yarn.corr_low = 5.0f;
    yarn.corr_high = 20.0f;
    llm::RopeParams linear;
    linear.freq_scale = 0.5f;
    linear.attn_factor = 1.2f;
    const Case cases[] = {{"norm", {}, false, llm::RopeKind::NORM},
                          {"neox", {}, false, llm::RopeKind::NEOX},
                          {"linear with attn_factor", linear, false, llm::RopeKind::NORM},
                          {"yarn", yarn, false, llm::RopeKind::NEOX},
                          {"frequency factors", {}, true, llm::RopeKind::NORM}};
    for (const Case &c : cases) {
        for (int n_rot : {hd, hd / 2}) {
            for (int32_t pos : {1, 37, 300, 4000}) {
                for (int32_t d : {1, 17, pos}) {
                    INFO(c.name << " n_rot " << n_rot << " pos " << pos << " delta " << d);
                    std::vector<float> x(heads * hd);
                    for (float &v : x) v = u(rng);
                    std::vector<float> shifted = x, fresh = x, unshifted = x;
                    const float *f = c.factors ? ff.data() : nullptr;
                    llm::rope(shifted.data(), heads, hd, n_rot, pos, c.p, f, c.kind);
                    unshifted = shifted;
                    llm::rope_shift(shifted.data(), 1, heads * hd, heads, hd, n_rot, -d, c.p, f, c.kind);
                    llm::rope(fresh.data(), heads, hd, n_rot, pos - d, c.p, f, c.kind);
                    float err = 0, moved = 0;
                    for (size_t i = 0; i < x.size(); ++i) {
                        err = std::max(err, std::abs(shifted[i] - fresh[i]));
                        moved = std::max(moved, std::abs(unshifted[i] - fresh[i]));
                    }
                    // f32 angles of positions up to 4000: a few ulps of the angle, times |x| <= ~1.5.
                    CHECK(err < 2e-3f);
                    if (d > 1) CHECK(moved > 50 * err);  // the check would see a missing rotation
                }
            }
        }
    }
}

namespace {

// The KV rows of a saved state (F32 or F16 KV, decoded to f32): keys[layer] and values[layer],
// n_past rows of n_kv each, read with the format's layout (runtime/session_state.cpp).
struct StateRows {
    int32_t n_past = 0;
    std::vector<std::vector<float>> keys, values;
};

StateRows state_rows(const std::vector<uint8_t> &b) {
    size_t at = 12;
    auto u32 = [&] {
        uint32_t v;
        std::memcpy(&v, b.data() + at, 4);
        at += 4;
        return v;
    };
    auto u64 = [&] {
        uint64_t v;
        std::memcpy(&v, b.data() + at, 8);
        at += 8;
        return v;
    };
    at += u32();  // architecture
    const uint32_t n_layer = u32();
    at += 5 * 4;
    at += 8 * u32();  // tensor types
    at += 8;          // fingerprint
    const uint32_t type = u32();
    REQUIRE((type == LLM_KV_F32 || type == LLM_KV_F16));
    REQUIRE(u32() == type);
    const size_t esize = type == LLM_KV_F32 ? 4 : 2;
    u32();  // n_ctx
    StateRows r;
    r.n_past = static_cast<int32_t>(u32());
    const uint32_t n_logits = u32(), n_history = u32();
    at += 4 + 624 * 4;  // RNG
    std::vector<uint64_t> rbk(n_layer), rbv(n_layer);
    for (uint32_t l = 0; l < n_layer; ++l) {
        REQUIRE(u32() == 0);  // every position stored
        rbk[l] = u64();
        rbv[l] = u64();
    }
    u32();                // recurrent_pos (format version 2)
    REQUIRE(u64() == 0);  // recurrent_floats: an attention-only model has none
    at += 4ull * (r.n_past + n_logits + n_history);
    for (uint32_t l = 0; l < n_layer; ++l) {
        for (auto *rows : {&r.keys, &r.values}) {
            const size_t n = r.n_past * (rows == &r.keys ? rbk[l] : rbv[l]);
            rows->emplace_back(n / esize);
            if (esize == 4) {
                std::memcpy(rows->back().data(), b.data() + at, n);
            } else {
                for (size_t i = 0; i < n / 2; ++i) {
                    uint16_t h;
                    std::memcpy(&h, b.data() + at + 2 * i, 2);
                    rows->back()[i] = llm::fp16_to_f32(h);
                }
            }
            at += n;
        }
    }
    REQUIRE(at + 8 == b.size());
    return r;
}

float max_abs(const float *a, size_t n) {
    float m = 0;
    for (size_t i = 0; i < n; ++i) m = std::max(m, std::abs(a[i]));
    return m;
}

float max_diff(const float *a, const float *b, size_t n) {
    float m = 0;
    for (size_t i = 0; i < n; ++i) m = std::max(m, std::abs(a[i] - b[i]));
    return m;
}

}  // namespace

// Layer 0's keys and values depend only on each token and its position, so there a shifted cache
// must equal a fresh session's over the kept tokens (deeper layers carry what the dropped tokens
// contributed, and differ by design). Values and unmoved keys bit for bit; moved keys up to the f32
// rounding of the rotation.
TEST_CASE("after a context shift, layer 0's cached keys are a fresh session's at the new positions", "[state][shift]") {
    // RoPE styles and scalings across the fixtures: normal pairs, NeoX, llama 3 frequency factors,
    // YaRN, LongRoPE, a sliding layer with its own base, q/k norms, partial rotary dims, experts.
    // With an F16 cache the moved keys are decoded, re-rotated and rounded to f16 again: they may
    // differ from the fresh keys by about one f16 rounding; the rest still match bit for bit.
    for (const int32_t kv_type : {LLM_KV_F32, LLM_KV_F16})
    for (const char *stem : {"llama.f32", "qwen2.f32", "llama3.f32", "qwen2yarn.f32", "phi3longrope.f32",
                             "gemma3.f32", "gemma2.f32", "smollm3.f32", "phi2.f32", "mixtral.f32"}) {
        INFO(stem << ", KV type " << kv_type);
        llm_model *m = load_model(fixture(stem));
        llm_session_params sp = params(0.0f, 40);
        sp.kv_type_k = sp.kv_type_v = kv_type;
        sp.context_shift = true;
        sp.n_keep = 5;
        llm_session *s = session(m, sp);
        std::mt19937 rng(9);
        std::vector<int32_t> toks(40);
        for (int32_t &t : toks) t = 3 + static_cast<int32_t>(rng() % 500);
        REQUIRE(llm_session_prefill(s, toks.data(), toks.size()) == LLM_OK);
        const StateRows before = state_rows(save_mem(s));
        // The context is full: the next token shifts it, dropping (40 - 5) / 2 = 17 positions.
        REQUIRE(llm_session_accept(s, 77) == LLM_OK);
        const std::vector<int32_t> kept = context(s);
        std::vector<int32_t> expect(toks.begin(), toks.begin() + 5);
        expect.insert(expect.end(), toks.begin() + 22, toks.end());
        expect.push_back(77);
        CHECK(kept == expect);
        REQUIRE(llm_session_n_past(s) == 24);
        CHECK(nlohmann::json::parse(llm_session_stats_json(s))["context_shifts"] == 1);
        const StateRows shifted = state_rows(save_mem(s));

        llm_session_params plain = sp;
        plain.context_shift = false;
        llm_session *fresh = session(m, plain);
        REQUIRE(llm_session_prefill(fresh, kept.data(), kept.size()) == LLM_OK);
        const StateRows ref = state_rows(save_mem(fresh));

        const size_t row = shifted.keys[0].size() / 24;
        const float *k = shifted.keys[0].data(), *kr = ref.keys[0].data();
        CHECK(shifted.values[0] == ref.values[0]);
        CHECK(std::memcmp(k, kr, 5 * row * 4) == 0);                          // kept in place
        CHECK(std::memcmp(k + 23 * row, kr + 23 * row, row * 4) == 0);        // the new token
        const float err = max_diff(k + 5 * row, kr + 5 * row, 18 * row);     // moved by 17
        const float scale = max_abs(kr, 24 * row);
        // Not re-rotated, the moved rows would be the keys at their old positions.
        const float unrotated = max_diff(before.keys[0].data() + 22 * row, kr + 5 * row, 18 * row);
        INFO("moved keys: max |shifted - fresh| " << err << ", max |key| " << scale << ", without re-rotation "
                                                  << unrotated);
        if (kv_type == LLM_KV_F32) {
            CHECK(err <= 1e-5f * scale);
            CHECK(unrotated > 1000 * err);
        } else {
            CHECK(err <= 1e-3f * scale);  // f16 keeps 11 significant bits: half an ulp is 2^-11 relative
            CHECK(unrotated > 20 * err);
        }
        llm_session_free(fresh);
        llm_session_free(s);
        llm_model_free(m);
    }
}

// With one layer the logits see nothing but layer 0's cache, so the whole next step after a shift
// equals a fresh session's over the kept tokens, up to the rotation's rounding.
TEST_CASE("a one-layer model's logits after a shift equal a fresh session's over the kept tokens", "[state][shift]") {
    const fs::path dir = temp_dir();
    const std::string path = (dir / "one-layer.gguf").string();
    tools::write_synth_model(tools::SynthShape{"one-layer", 64, 1, 4, 2, 128, 300, 256}, "f32", path, 4);
    llm_model *m = load_model(path);
    llm_session_params sp = params(0.0f, 64);
    sp.kv_type_k = sp.kv_type_v = LLM_KV_F32;
    sp.repeat_penalty = 1.0f;
    sp.context_shift = true;
    sp.n_keep = 3;
    llm_session *s = session(m, sp);
    std::mt19937 rng(2);
    int shifts = 0;
    for (int i = 0; i < 200; ++i) {
        const int32_t t = static_cast<int32_t>(rng() % 300);
        const bool full = llm_session_n_past(s) == 64;
        REQUIRE(llm_session_accept(s, t) == LLM_OK);
        if (!full) continue;
        ++shifts;
        const std::vector<int32_t> kept = context(s);
        llm_session_params plain = sp;
        plain.context_shift = false;
        llm_session *fresh = session(m, plain);
        REQUIRE(llm_session_prefill(fresh, kept.data(), kept.size()) == LLM_OK);
        const std::vector<float> a = logits(s), b = logits(fresh);
        const float err = max_diff(a.data(), b.data(), a.size()), scale = max_abs(b.data(), b.size());
        INFO("shift " << shifts << ": max |shifted - fresh| " << err << ", max |logit| " << scale);
        CHECK(err <= 1e-4f * std::max(1.0f, scale));
        llm_session_free(fresh);
    }
    CHECK(shifts == 5);  // at the 65th token, then every (64 - 3) / 2 + 1 = 31st
    llm_session_free(s);
    llm_model_free(m);
    fs::remove_all(dir);
}

TEST_CASE("context shift in prefill and generation; refused for learned positions", "[state][shift]") {
    llm_model *m = load_model(kStories);
    llm_session_params sp = params(0.8f, 48);
    sp.context_shift = true;
    sp.n_keep = 4;
    llm_session *s = session(m, sp);
    const std::vector<int32_t> p = tokenize(m, "Once upon a time, there was a little girl named Lily.");
    REQUIRE(p.size() < 40);
    REQUIRE(llm_session_prefill(s, p.data(), p.size()) == LLM_OK);
    // A prompt that does not fit: one shift drops what it needs (more than half here).
    std::vector<int32_t> more(40, p[3]);
    REQUIRE(llm_session_prefill(s, more.data(), more.size()) == LLM_OK);
    CHECK(llm_session_n_past(s) <= 48);
    std::vector<int32_t> ctx = context(s);
    CHECK(std::equal(p.begin(), p.begin() + 4, ctx.begin()));
    CHECK(std::equal(more.begin(), more.end(), ctx.end() - 40));
    // n_keep + the new tokens cannot fit at all: LLM_ERR_CONTEXT_FULL, nothing changed.
    std::vector<int32_t> huge(45, p[3]);
    CHECK(llm_session_prefill(s, huge.data(), huge.size()) == LLM_ERR_CONTEXT_FULL);
    CHECK(context(s) == ctx);

    // Generation far past n_ctx never fails.
    for (int i = 0; i < 300; ++i) {
        int32_t t = -1;
        REQUIRE(llm_session_sample(s, &t) == LLM_OK);
        REQUIRE(llm_session_accept(s, t) == LLM_OK);
    }
    int32_t total = 0;
    for (int i = 0; i < 10; ++i) {
        const int32_t st = llm_session_generate(s, nullptr, 50, nullptr, nullptr);
        REQUIRE(st >= LLM_OK);
        if (st == LLM_DONE) REQUIRE(llm_session_accept(s, p[3]) == LLM_OK);
        ++total;
    }
    CHECK(llm_session_n_past(s) <= 48);
    const auto stats = nlohmann::json::parse(llm_session_stats_json(s));
    CHECK(stats["context_shifts"].get<int>() > 10);
    // A shifted session saves and resumes like any other.
    const std::vector<uint8_t> state = save_mem(s);
    const std::vector<int32_t> ref = generate(s, 60);
    llm_session *r = session(m, sp);
    REQUIRE(load_mem(r, state) == LLM_OK);
    CHECK(generate(r, 60) == ref);
    llm_session_free(r);
    llm_session_free(s);

    llm_session_params bad = sp;
    bad.n_keep = 48;
    llm_session *x = nullptr;
    CHECK(llm_session_create(m, &bad, &x) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(x == nullptr);
    llm_model_free(m);

    llm_model *gpt2 = load_model(fixture("gpt2.f32"));
    CHECK(llm_session_create(gpt2, &sp, &x) == LLM_ERR_UNSUPPORTED);
    CHECK(mentions("learned absolute positions"));
    sp.context_shift = false;
    REQUIRE(llm_session_create(gpt2, &sp, &x) == LLM_OK);
    llm_session_free(x);
    llm_model_free(gpt2);
}
