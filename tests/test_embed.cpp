// llm_session_embed: every embedding golden of shared/embeddings (llama.cpp's pooled vectors) holds
// in RESIDENT and STREAMED mode, the file's pooling is used when none is given, inputs batched in one
// call equal each alone bit for bit, the session's context is left alone, and bad input gets a clear
// status.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "gguf/byte_source.h"
#include "gguf/weight_source.h"
#include "gguf_writer.h"
#include "llm.h"
#include "test_files.h"

namespace {

const std::string kShared = LLM_SHARED_DIR;
const std::string kEmbed = kShared + "/embeddings/";
const std::string kQwen3 = kShared + "/fixtures/models/qwen3.f32.gguf";
constexpr double kMaxAbs = 1e-4;     // fixtures/README.md's f32 class
constexpr double kCosine = 0.99999;  // the bound on normalised vectors

// The two derived copies of qwen3.f32.gguf that shared/embeddings/README.md describes, written once
// per test run into the temporary directory.
// Removes the copies when the test process ends (ctest may run several processes at once: each has
// its own names).
struct TempFiles {
    std::vector<std::string> paths;
    ~TempFiles() {
        for (const std::string &p : paths) std::remove(p.c_str());
    }
};

std::string derived(const std::string &name) {
    static TempFiles files;
    const std::string path =
        std::string(P_tmpdir) + "/libllm_test_" + name + "." + std::to_string(::getpid()) + ".gguf";
    for (const std::string &p : files.paths)
        if (p == path) return path;
    auto src = llm::WeightSource::open_file(kQwen3);
    llm::GgufWriter w;
    w.add_all_from(*src);
    if (name == "qwen3-embedding-like.f32") {
        w.add_u32("qwen3.pooling_type", 3);
    } else {
        w.add_u32("qwen3.pooling_type", 4);
        w.add_string_array("qwen3.classifier.output_labels", {"yes", "no"});
        const llm::TensorInfo *te = src->find("token_embd.weight");
        REQUIRE(te);
        REQUIRE(te->type == llm::TensorType::F32);
        std::vector<uint8_t> rows(2 * te->row_bytes());
        src->read(*te, 300 * te->row_bytes(), rows.data(), rows.size());
        w.add_tensor("cls.output.weight", {te->ne[0], 2}, llm::TensorType::F32, rows);
    }
    w.write_file(path);
    files.paths.push_back(path);
    return path;
}

std::string model_path(const nlohmann::json &g) {
    const std::string m = g["model"].get<std::string>();
    if (m.rfind("derived/", 0) == 0) return derived(m.substr(8, m.size() - 8 - 5));
    return kShared + "/" + m.substr(std::string("shared/").size());
}

std::vector<float> read_f32(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    REQUIRE(f.good());
    std::vector<char> b((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::vector<float> v(b.size() / 4);
    std::memcpy(v.data(), b.data(), v.size() * 4);
    return v;
}

// BUDGET: halfway between the model's minimum and everything resident (so some blocks stream).
uint64_t half_budget(const std::string &path) {
    llm_model_params mp;
    llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
    llm_model *m = nullptr;
    REQUIRE(llm_model_load(path.c_str(), &mp, &m) == LLM_OK);
    llm_memory_plan plan;
    llm_memory_plan_init(&plan, LLM_MEMORY_PLAN_VERSION);
    REQUIRE(llm_model_memory_plan(m, 256, &plan) == LLM_OK);
    llm_model_free(m);
    return (plan.minimum_weight_bytes + plan.resident_block_bytes + plan.lm_head_bytes) / 2;
}

llm_model *load(const std::string &path, int32_t residency, const llm_io *io = nullptr, bool no_prefetch = false) {
    llm_model_params mp;
    llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
    mp.n_threads = 2;
    mp.residency = residency;
    if (residency == LLM_RESIDENCY_BUDGET) mp.ram_budget_bytes = half_budget(path);
    if (io || no_prefetch) mp.prefetch_depth = 0;  // reads on the calling thread, in order
    llm_model *m = nullptr;
    INFO(llm_last_error());
    REQUIRE((io ? llm_model_load_io(io, &mp, &m) : llm_model_load(path.c_str(), &mp, &m)) == LLM_OK);
    return m;
}

llm_session *session(llm_model *m, int32_t n_ctx = 256) {
    llm_session_params sp;
    llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
    sp.n_ctx = n_ctx;
    sp.kv_type_k = LLM_KV_F32;  // the goldens' setting
    sp.kv_type_v = LLM_KV_F32;
    llm_session *s = nullptr;
    REQUIRE(llm_session_create(m, &sp, &s) == LLM_OK);
    return s;
}

int32_t pooling_value(const std::string &name) {
    if (name == "unspecified") return LLM_POOLING_UNSPECIFIED;
    if (name == "none") return LLM_POOLING_NONE;
    if (name == "mean") return LLM_POOLING_MEAN;
    if (name == "cls") return LLM_POOLING_CLS;
    if (name == "last") return LLM_POOLING_LAST;
    if (name == "rank") return LLM_POOLING_RANK;
    FAIL("unknown pooling " << name);
    return -2;
}

struct Result {
    int32_t status = 0;
    std::vector<float> v;
    int32_t dim = 0;
    std::vector<int32_t> rows;
};

Result embed(llm_session *s, const std::vector<std::string> &texts, int32_t pooling, bool normalize) {
    std::vector<const char *> ptrs;
    for (const std::string &t : texts) ptrs.push_back(t.c_str());
    llm_embed_params p;
    REQUIRE(llm_embed_params_init(&p, LLM_EMBED_PARAMS_VERSION) == LLM_OK);
    p.pooling = pooling;
    p.normalize = normalize;
    Result r;
    size_t n = 0;
    r.rows.resize(texts.size());
    r.status = llm_session_embed(s, ptrs.data(), ptrs.size(), &p, nullptr, 0, &n, &r.dim, r.rows.data());
    if (r.status != LLM_ERR_BUFFER_TOO_SMALL) return r;
    r.v.resize(n);
    size_t n2 = 0;
    r.status = llm_session_embed(s, ptrs.data(), ptrs.size(), &p, r.v.data(), r.v.size(), &n2, &r.dim, r.rows.data());
    CHECK(n2 == n);
    return r;
}

double cosine(const float *a, const float *b, size_t n) {
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < n; ++i) {
        ab += static_cast<double>(a[i]) * b[i];
        aa += static_cast<double>(a[i]) * a[i];
        bb += static_cast<double>(b[i]) * b[i];
    }
    return ab / std::sqrt(aa * bb);
}

struct Mode {
    const char *name;
    int32_t residency;
};
constexpr Mode kModes[] = {
    {"resident", LLM_RESIDENCY_RESIDENT}, {"streamed", LLM_RESIDENCY_STREAMED}, {"budget", LLM_RESIDENCY_BUDGET}};

using test::CancellingFile;

// Which checks golden i (in index.json's order) gets. Emulated runs take each model's first golden only (its rows pass
// the same kernels whatever the pooling: the first of the plain models is "none", every row) and check
// the streamed and budget modes and the normalised vectors (a division after the raw ones) on the first
// golden alone. Other slow builds (sanitizers) check the streamed and budget modes on every third
// golden, resident on all (the three give the same bits: "embedding inputs batched ...").
struct Checks {
    bool run, all_modes, normalised;
};
Checks checks_for(size_t i, bool first_of_its_model) {
    if (test::kEmulated) return {first_of_its_model, i == 0, i == 0};
    return {true, !test::kSlowBuild || i % 3 == 0, true};
}

}  // namespace

TEST_CASE("embedding goldens hold, raw and normalised, resident and streamed", "[embed][golden]") {
    std::ifstream f(kEmbed + "index.json");
    REQUIRE(f.good());
    const nlohmann::json index = nlohmann::json::parse(f);
    REQUIRE(index.size() >= 11);
    std::set<std::string> models;
    for (size_t e = 0; e < index.size(); ++e) {
        const nlohmann::json &entry = index[e];
        std::ifstream gf(kEmbed + entry["golden"].get<std::string>());
        const nlohmann::json g = nlohmann::json::parse(gf);
        const std::string path = model_path(g);
        const Checks checks = checks_for(e, models.insert(path).second);
        if (!checks.run) continue;
        const int32_t requested = pooling_value(g["pooling_requested"].get<std::string>());
        const int32_t used = pooling_value(g["pooling"].get<std::string>());
        const int64_t n_out = g["n_out"].get<int64_t>();
        std::vector<std::string> texts;
        for (const auto &p : g["prompts"]) texts.push_back(p["text"].get<std::string>());
        const std::vector<float> raw = read_f32(kEmbed + g["files"]["raw"].get<std::string>());
        const std::vector<float> l2 = read_f32(kEmbed + g["files"]["l2"].get<std::string>());
        for (const Mode &md : kModes) {
            if (!checks.all_modes && md.residency != LLM_RESIDENCY_RESIDENT) continue;
            INFO(entry["golden"].get<std::string>() << " " << md.name);
            llm_model *m = load(path, md.residency);
            llm_session *s = session(m);
            // The tokens are llama.cpp's (BOS first, special text parsed).
            for (const auto &p : g["prompts"]) {
                const std::string t = p["text"].get<std::string>();
                std::vector<int32_t> ids(512);
                int32_t n = 0;
                REQUIRE(llm_tokenize(m, t.c_str(), t.size(), true, true, ids.data(), 512, &n) == LLM_OK);
                ids.resize(n);
                CHECK(ids == p["token_ids"].get<std::vector<int32_t>>());
            }
            const Result r = embed(s, texts, requested, false);
            REQUIRE(r.status == LLM_OK);
            CHECK(r.dim == n_out);
            for (size_t i = 0; i < texts.size(); ++i)
                CHECK(r.rows[i] == (used == LLM_POOLING_NONE ? g["prompts"][i]["n_tokens"].get<int32_t>() : 1));
            REQUIRE(r.v.size() == raw.size());
            double worst = 0;
            for (size_t i = 0; i < raw.size(); ++i) worst = std::max(worst, std::fabs(double(r.v[i]) - raw[i]));
            CHECK(worst <= kMaxAbs);
            if (checks.normalised) {
                const Result n = embed(s, texts, requested, true);
                REQUIRE(n.status == LLM_OK);
                REQUIRE(n.v.size() == l2.size());
                double least = 1;
                for (size_t row = 0; row < l2.size() / n_out; ++row)
                    least = std::min(least, cosine(&n.v[row * n_out], &l2[row * n_out], n_out));
                CHECK(least >= kCosine);
            }
            llm_session_free(s);
            llm_model_free(m);
        }
    }
}

TEST_CASE("embedding pooling: the file's key decides when none is given, else none", "[embed]") {
    llm_model *plain = load(kQwen3, LLM_RESIDENCY_RESIDENT);
    llm_session *s = session(plain);
    const Result r = embed(s, {"Hello world"}, LLM_POOLING_UNSPECIFIED, false);
    REQUIRE(r.status == LLM_OK);
    CHECK(r.rows[0] > 1);  // none: one row per token
    CHECK(r.v.size() == static_cast<size_t>(r.rows[0]) * 256);
    // RANK needs a classifier head: refused by name.
    const Result k = embed(s, {"Hello world"}, LLM_POOLING_RANK, false);
    CHECK(k.status == LLM_ERR_UNSUPPORTED);
    CHECK(std::string(llm_last_error()).find("rank") != std::string::npos);
    llm_session_free(s);
    llm_model_free(plain);

    llm_model *like = load(derived("qwen3-embedding-like.f32"), LLM_RESIDENCY_RESIDENT);
    s = session(like);
    const Result u = embed(s, {"Hello world"}, LLM_POOLING_UNSPECIFIED, false);
    const Result last = embed(s, {"Hello world"}, LLM_POOLING_LAST, false);
    REQUIRE(u.status == LLM_OK);
    CHECK(u.rows[0] == 1);
    CHECK(u.v == last.v);
    llm_session_free(s);
    llm_model_free(like);
}

TEST_CASE("embedding inputs batched in one call equal each alone, bit for bit", "[embed][cpu-neutral]") {
    std::vector<std::string> texts;
    {
        std::ifstream f(kEmbed + "prompts.txt");
        for (std::string line; std::getline(f, line);)
            if (!line.empty()) texts.push_back(line);
    }
    REQUIRE(texts.size() == 4);
    // Repeated so that the batch spans several passes, splitting some inputs between two.
    std::vector<std::string> many = texts;
    many.insert(many.end(), texts.rbegin(), texts.rend());
    std::vector<std::vector<float>> resident;  // per pooling: every residency gives the same bits
    for (const Mode &md : kModes) {
        size_t k = 0;
        for (int32_t pooling : {LLM_POOLING_NONE, LLM_POOLING_MEAN, LLM_POOLING_LAST, LLM_POOLING_CLS}) {
            // Slow builds (sanitizers, qemu): the streamed and budget modes take pooling none only (every
            // token's row).
            if (test::kSlowBuild && md.residency != LLM_RESIDENCY_RESIDENT && pooling != LLM_POOLING_NONE) {
                ++k;
                continue;
            }
            INFO(md.name << " pooling " << pooling);
            llm_model *m = load(kShared + "/fixtures/models/llama.f32.gguf", md.residency);
            llm_session *s = session(m);
            const Result all = embed(s, many, pooling, true);
            REQUIRE(all.status == LLM_OK);
            if (md.residency == LLM_RESIDENCY_RESIDENT) resident.push_back(all.v);
            CHECK(all.v == resident.at(k++));
            size_t at = 0;
            for (const std::string &t : many) {
                const Result one = embed(s, {t}, pooling, true);
                REQUIRE(one.status == LLM_OK);
                REQUIRE(at + one.v.size() <= all.v.size());
                CHECK(std::memcmp(one.v.data(), &all.v[at], one.v.size() * sizeof(float)) == 0);
                at += one.v.size();
            }
            CHECK(at == all.v.size());
            llm_session_free(s);
            llm_model_free(m);
        }
    }
}

TEST_CASE("embedding leaves the session's context, logits and generation as they were", "[embed]") {
    llm_model *m = load(kQwen3, LLM_RESIDENCY_STREAMED);
    llm_session *a = session(m), *b = session(m);
    const int32_t prompt[] = {1, 20, 30, 40, 50};
    REQUIRE(llm_session_prefill(a, prompt, 5) == LLM_OK);
    REQUIRE(llm_session_prefill(b, prompt, 5) == LLM_OK);
    llm_stats before, after;
    llm_stats_init(&before, LLM_STATS_VERSION);
    llm_stats_init(&after, LLM_STATS_VERSION);
    REQUIRE(llm_session_stats(a, &before, nullptr) == LLM_OK);
    const Result r = embed(a, {"Some text to embed", "and another"}, LLM_POOLING_MEAN, true);
    REQUIRE(r.status == LLM_OK);
    REQUIRE(llm_session_stats(a, &after, nullptr) == LLM_OK);
    CHECK(after.passes == before.passes + 1);  // two short texts, one pass
    CHECK(after.prompt_tokens == before.prompt_tokens);
    CHECK(llm_session_n_past(a) == 5);
    const float *la = nullptr, *lb = nullptr;
    int32_t nv = 0;
    REQUIRE(llm_session_logits(a, &la, &nv) == LLM_OK);
    REQUIRE(llm_session_logits(b, &lb, &nv) == LLM_OK);
    CHECK(std::memcmp(la, lb, nv * sizeof(float)) == 0);
    for (int i = 0; i < 6; ++i) {
        int32_t ta = -1, tb = -1;
        size_t len = 0;
        llm_session_next(a, &ta, nullptr, 0, &len);
        llm_session_next(b, &tb, nullptr, 0, &len);
        CHECK(ta == tb);
    }
    llm_session_free(a);
    llm_session_free(b);
    llm_model_free(m);
}

TEST_CASE("embedding: bad input gets a clear status and writes nothing", "[embed][api]") {
    llm_model *m = load(kQwen3, LLM_RESIDENCY_RESIDENT);
    llm_session *s = session(m, 16);
    const char *texts[] = {"Hello", "world"};
    float out[1024];
    size_t n = 0;
    int32_t dim = 0;
    llm_embed_params p;
    llm_embed_params_init(&p, LLM_EMBED_PARAMS_VERSION);
    CHECK(p.pooling == LLM_POOLING_UNSPECIFIED);
    CHECK(p.add_bos);
    CHECK(p.parse_special);
    CHECK_FALSE(p.normalize);
    CHECK(llm_embed_params_init(nullptr, LLM_EMBED_PARAMS_VERSION) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(llm_embed_params_init(&p, 0) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(llm_embed_params_init(&p, LLM_EMBED_PARAMS_VERSION + 1) == LLM_ERR_INVALID_ARGUMENT);
    p.pooling = LLM_POOLING_MEAN;

    CHECK(llm_session_embed(nullptr, texts, 2, &p, out, 1024, &n, &dim, nullptr) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(llm_session_embed(s, nullptr, 2, &p, out, 1024, &n, &dim, nullptr) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(llm_session_embed(s, texts, 0, &p, out, 1024, &n, &dim, nullptr) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(llm_session_embed(s, texts, 2, &p, out, 1024, nullptr, &dim, nullptr) == LLM_ERR_INVALID_ARGUMENT);
    const char *with_null[] = {"Hello", nullptr};
    CHECK(llm_session_embed(s, with_null, 2, &p, out, 1024, &n, &dim, nullptr) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(std::string(llm_last_error()).find("texts[1]") != std::string::npos);
    const char *with_empty[] = {"Hello", ""};
    CHECK(llm_session_embed(s, with_empty, 2, &p, out, 1024, &n, &dim, nullptr) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(std::string(llm_session_last_error(s)).find("empty") != std::string::npos);
    for (int32_t bad : {-2, 5, 1000, INT32_MIN}) {
        p.pooling = bad;
        CHECK(llm_session_embed(s, texts, 2, &p, out, 1024, &n, &dim, nullptr) == LLM_ERR_INVALID_ARGUMENT);
        CHECK(std::string(llm_last_error()).find("pooling") != std::string::npos);
    }
    p.pooling = LLM_POOLING_MEAN;
    llm_embed_params bad_version = p;
    bad_version.version = 99;
    CHECK(llm_session_embed(s, texts, 2, &bad_version, out, 1024, &n, &dim, nullptr) == LLM_ERR_INVALID_ARGUMENT);

    // The size query: nothing evaluated, the size given.
    n = 0;
    CHECK(llm_session_embed(s, texts, 2, &p, nullptr, 0, &n, &dim, nullptr) == LLM_ERR_BUFFER_TOO_SMALL);
    CHECK(n == 512);
    CHECK(dim == 256);
    CHECK(llm_session_embed(s, texts, 2, &p, out, 511, &n, &dim, nullptr) == LLM_ERR_BUFFER_TOO_SMALL);
    CHECK(llm_session_embed(s, texts, 2, &p, out, 1024, &n, &dim, nullptr) == LLM_OK);

    // Longer than the session's n_ctx (16).
    const std::string long_text(200, 'a');
    const char *too_long[] = {"Hello", long_text.c_str()};
    float big[4096];
    CHECK(llm_session_embed(s, too_long, 2, &p, big, 4096, &n, &dim, nullptr) == LLM_ERR_CONTEXT_FULL);
    CHECK(std::string(llm_last_error()).find("input 1") != std::string::npos);

    // Token inputs: NULL, empty, out of range.
    const int32_t ok[] = {1, 5, 9};
    const int32_t oob[] = {1, 5, 100000};
    const int32_t neg[] = {1, -3};
    const int32_t *inputs[] = {ok, oob};
    size_t lens[] = {3, 3};
    CHECK(llm_session_embed_tokens(s, inputs, lens, 2, &p, out, 1024, &n, &dim, nullptr) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(std::string(llm_last_error()).find("100000") != std::string::npos);
    inputs[1] = neg;
    lens[1] = 2;
    CHECK(llm_session_embed_tokens(s, inputs, lens, 2, &p, out, 1024, &n, &dim, nullptr) == LLM_ERR_INVALID_ARGUMENT);
    inputs[1] = ok;
    lens[1] = 0;
    CHECK(llm_session_embed_tokens(s, inputs, lens, 2, &p, out, 1024, &n, &dim, nullptr) == LLM_ERR_INVALID_ARGUMENT);
    inputs[1] = nullptr;
    lens[1] = 3;
    CHECK(llm_session_embed_tokens(s, inputs, lens, 2, &p, out, 1024, &n, &dim, nullptr) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(llm_session_embed_tokens(s, nullptr, lens, 2, &p, out, 1024, &n, &dim, nullptr) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(llm_session_embed_tokens(s, inputs, nullptr, 2, &p, out, 1024, &n, &dim, nullptr) ==
          LLM_ERR_INVALID_ARGUMENT);
    inputs[1] = ok;
    int32_t rows[2] = {0, 0};
    p.pooling = LLM_POOLING_NONE;
    CHECK(llm_session_embed_tokens(s, inputs, lens, 2, &p, out, 1024, &n, &dim, rows) == LLM_ERR_BUFFER_TOO_SMALL);
    CHECK(n == 6 * 256);
    CHECK(rows[0] == 3);
    CHECK(rows[1] == 3);
    CHECK(llm_session_embed_tokens(s, inputs, lens, 2, &p, big, 4096, &n, &dim, rows) == LLM_OK);
    llm_session_free(s);
    llm_model_free(m);
}

TEST_CASE("embedding: random inputs never crash and agree with one-at-a-time", "[embed][hardening]") {
    llm_model *m = load(kShared + "/fixtures/models/llama.f32.gguf", LLM_RESIDENCY_STREAMED);
    llm_session *s = session(m, 64);
    std::mt19937 rng(31);
    const int32_t n_vocab = llm_model_n_vocab(m);
    for (int round = 0; round < 12; ++round) {
        const size_t n_inputs = 1 + rng() % 5;
        std::vector<std::vector<int32_t>> in(n_inputs);
        std::vector<const int32_t *> ptrs;
        std::vector<size_t> lens;
        bool valid = true;
        for (auto &v : in) {
            const size_t len = rng() % 80;  // 0 and > n_ctx (64) included
            for (size_t i = 0; i < len; ++i) {
                int32_t t = static_cast<int32_t>(rng() % n_vocab);
                if (rng() % 97 == 0) t = (rng() % 2) ? -1 - t : n_vocab + t;
                valid = valid && t >= 0 && t < n_vocab;
                v.push_back(t);
            }
            valid = valid && len >= 1 && len <= 64;
            ptrs.push_back(v.empty() ? nullptr : v.data());
            lens.push_back(v.size());
        }
        llm_embed_params p;
        llm_embed_params_init(&p, LLM_EMBED_PARAMS_VERSION);
        p.pooling = static_cast<int32_t>(rng() % 7) - 1;  // -1..5, 5 invalid
        p.normalize = rng() % 2;
        if (p.pooling == LLM_POOLING_RANK || p.pooling == 5) valid = false;  // no head here; 5: no pooling
        std::vector<float> out(80 * 5 * 256);
        size_t n = 0;
        const int32_t st = llm_session_embed_tokens(s, ptrs.data(), lens.data(), n_inputs, &p, out.data(), out.size(),
                                                    &n, nullptr, nullptr);
        INFO("round " << round);
        if (!valid) {
            CHECK(st < 0);
            CHECK(std::string(llm_last_error()).size() > 0);
            continue;
        }
        REQUIRE(st == LLM_OK);
        size_t at = 0;
        for (size_t i = 0; i < n_inputs; ++i) {
            std::vector<float> one(80 * 256);
            size_t n1 = 0;
            REQUIRE(llm_session_embed_tokens(s, &ptrs[i], &lens[i], 1, &p, one.data(), one.size(), &n1, nullptr,
                                             nullptr) == LLM_OK);
            CHECK(std::memcmp(one.data(), &out[at], n1 * sizeof(float)) == 0);
            at += n1;
        }
        CHECK(at == n);
    }
    llm_session_free(s);
    llm_model_free(m);
}

TEST_CASE("embedding: a cancel in flight returns CANCELLED, writes nothing, and the session goes on", "[embed]") {
    CancellingFile file(kQwen3);
    const llm_io io = file.io();
    llm_model *m = load(kQwen3, LLM_RESIDENCY_STREAMED, &io);
    llm_session *s = session(m);
    const int32_t prompt[] = {1, 20, 30, 40};
    REQUIRE(llm_session_prefill(s, prompt, 4) == LLM_OK);
    const Result ref = embed(s, {"Hello", "The quick brown fox"}, LLM_POOLING_MEAN, false);
    REQUIRE(ref.status == LLM_OK);

    const char *texts[] = {"Hello", "The quick brown fox"};
    llm_embed_params p;
    llm_embed_params_init(&p, LLM_EMBED_PARAMS_VERSION);
    p.pooling = LLM_POOLING_MEAN;
    std::vector<float> out(512, -7.0f);
    size_t n = 0;
    file.victim = s;
    file.cancel_in = 3;  // inside the pass, between two blocks' reads
    CHECK(llm_session_embed(s, texts, 2, &p, out.data(), out.size(), &n, nullptr, nullptr) == LLM_ERR_CANCELLED);
    CHECK(file.cancel_in == 0);
    // Mean vectors are written when an input finishes: nothing of this cancelled call (pooling none
    // may leave the rows of passes already run; the header says out may hold some rows).
    CHECK(std::count(out.begin(), out.end(), -7.0f) == 512);
    CHECK(llm_session_n_past(s) == 4);
    // No cancel left pending, and the next call gives the same vectors.
    CHECK(llm_session_embed(s, texts, 2, &p, out.data(), out.size(), &n, nullptr, nullptr) == LLM_OK);
    CHECK(out == ref.v);
    llm_session_free(s);
    llm_model_free(m);
}

TEST_CASE("embedding: the RoPE table follows the session's context, not the text's length", "[embed]") {
    // phi3longrope picks LongRoPE's long table when the context exceeds 256 (fixtures/README.md):
    // a short text in a session of 512 must get the long table, as its prefill would.
    const std::string path = kShared + "/fixtures/models/phi3longrope.f32.gguf";
    llm_model *m = load(path, LLM_RESIDENCY_RESIDENT);
    llm_session *s512 = session(m, 512), *s256 = session(m, 256);
    const Result a = embed(s512, {"Hello world, a short text"}, LLM_POOLING_NONE, false);
    const Result b = embed(s256, {"Hello world, a short text"}, LLM_POOLING_NONE, false);
    REQUIRE(a.status == LLM_OK);
    REQUIRE(b.status == LLM_OK);
    REQUIRE(a.v.size() == b.v.size());
    CHECK(a.v != b.v);
    llm_session_free(s512);
    llm_session_free(s256);
    llm_model_free(m);
}

TEST_CASE("embedding: texts in one call share each streamed block's read", "[embed]") {
    // Without prefetch: the I/O thread reads ahead into the next call's pieces (wrapping to the next
    // token) as far as it gets before the call returns, so a call's byte count would depend on timing.
    llm_model *m = load(kQwen3, LLM_RESIDENCY_STREAMED, nullptr, true);
    llm_session *s = session(m);
    auto last_call = [&] {
        llm_stats st;
        llm_stats_init(&st, LLM_STATS_VERSION);
        REQUIRE(llm_session_stats(s, nullptr, &st) == LLM_OK);
        return st;
    };
    REQUIRE(embed(s, {"Hello"}, LLM_POOLING_MEAN, false).status == LLM_OK);
    const llm_stats one = last_call();
    REQUIRE(embed(s, {"Hello", "The quick brown fox", "jumps over", "the lazy dog"}, LLM_POOLING_MEAN, false).status ==
            LLM_OK);
    const llm_stats four = last_call();
    CHECK(one.passes == 1);
    CHECK(four.passes == 1);
    REQUIRE(one.bytes_read > 0);
    // The blocks are read once for the four; only their token_embd rows add to it.
    CHECK(four.bytes_read < one.bytes_read + one.bytes_read / 10);
    llm_session_free(s);
    llm_model_free(m);
}
