// Split GGUF models (llama.cpp's gguf-split): the fixture's three shards load from the first one's
// path and through an llm_io per shard, with the unsplit file's logits bit for bit; shards written
// here with GgufWriter, each wrong in one way, fail with LLM_ERR_FORMAT naming the shard; every host
// llm_io is closed exactly once.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <unistd.h>

#include "gguf/byte_source.h"
#include "gguf_writer.h"
#include "gguf/weight_source.h"
#include "llm.h"

using namespace llm;
namespace fs = std::filesystem;

namespace {

const std::string kFixtures = std::string(LLM_SHARED_DIR) + "/fixtures/";
const std::string kUnsplit = kFixtures + "models/llama.q8_0.gguf";

std::string shard_path(const std::string &prefix, int k, int n) {
    char tail[32];
    std::snprintf(tail, sizeof tail, "-%05d-of-%05d.gguf", k, n);
    return prefix + tail;
}
const std::string kSplitPrefix = kFixtures + "split/llama.q8_0";

// A scratch directory removed when the test ends.
struct TempDir {
    fs::path path;
    TempDir() {
        static int n = 0;
        path = fs::temp_directory_path() / ("llm-split-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
        fs::create_directories(path);
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    std::string prefix() const { return (path / "m").string(); }
};

struct Loaded {
    llm_model *m = nullptr;
    ~Loaded() { llm_model_free(m); }
};

llm_model_params params(int32_t residency) {
    llm_model_params mp;
    llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
    mp.n_threads = 2;
    mp.residency = residency;
    return mp;
}

// Status and message of a load by path.
std::pair<int32_t, std::string> load_status(const std::string &path) {
    llm_model_params mp = params(LLM_RESIDENCY_RESIDENT);
    Loaded l;
    int32_t st = llm_model_load(path.c_str(), &mp, &l.m);
    return {st, st == LLM_OK ? std::string() : std::string(llm_last_error())};
}

// Every position's logits for a fixed prompt, teacher-forced in one batch.
std::vector<float> logits_of(llm_model *m) {
    llm_session_params sp;
    llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
    sp.n_ctx = 64;
    sp.logits_all = true;
    llm_session *s = nullptr;
    REQUIRE(llm_session_create(m, &sp, &s) == LLM_OK);
    const std::string text = "The quick brown fox jumps over the lazy dog";
    std::vector<int32_t> toks(64);
    int32_t n = 0;
    REQUIRE(llm_tokenize(m, text.data(), text.size(), true, false, toks.data(), 64, &n) == LLM_OK);
    REQUIRE(n > 4);
    REQUIRE(llm_session_prefill(s, toks.data(), static_cast<size_t>(n)) == LLM_OK);
    std::vector<float> out;
    for (int32_t i = 0; i < n; ++i) {
        const float *lg;
        int32_t nv;
        REQUIRE(llm_session_logits_ith(s, i, &lg, &nv) == LLM_OK);
        out.insert(out.end(), lg, lg + nv);
    }
    llm_session_free(s);
    return out;
}

std::vector<float> logits_of_path(const std::string &path, int32_t residency) {
    llm_model_params mp = params(residency);
    Loaded l;
    INFO(path);
    REQUIRE(llm_model_load(path.c_str(), &mp, &l.m) == LLM_OK);
    return logits_of(l.m);
}

bool has(const std::string &msg, const std::string &part) { return msg.find(part) != std::string::npos; }

bool same_bits(const std::vector<float> &a, const std::vector<float> &b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<uint8_t> read_file(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    REQUIRE(f.good());
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

// One host "file" per shard, in memory. All of a model's shards share one in-flight counter, to
// see that read_at calls never overlap across them.
struct HostShard {
    std::vector<uint8_t> bytes;
    int closes = 0;
    std::atomic<int> *in_flight = nullptr;
    std::atomic<int> *max_in_flight = nullptr;

    llm_io io() {
        llm_io io{};
        io.version = LLM_IO_VERSION;
        io.user = this;
        io.size = [](void *u) -> uint64_t { return static_cast<HostShard *>(u)->bytes.size(); };
        io.read_at = [](void *u, uint64_t offset, void *dst, uint64_t n) -> int32_t {
            auto *h = static_cast<HostShard *>(u);
            const int now = ++*h->in_flight;
            int seen = h->max_in_flight->load();
            while (now > seen && !h->max_in_flight->compare_exchange_weak(seen, now)) {}
            int32_t st = LLM_OK;
            if (offset > h->bytes.size() || n > h->bytes.size() - offset) {
                st = LLM_ERR_IO;
            } else {
                std::memcpy(dst, h->bytes.data() + offset, n);
            }
            --*h->in_flight;
            return st;
        };
        io.close = [](void *u) { ++static_cast<HostShard *>(u)->closes; };
        return io;
    }
};

struct HostSplit {
    std::vector<HostShard> shards;
    std::atomic<int> in_flight{0}, max_in_flight{0};
    explicit HostSplit(const std::vector<std::string> &paths) : shards(paths.size()) {
        for (size_t k = 0; k < paths.size(); ++k) {
            shards[k].bytes = read_file(paths[k]);
            shards[k].in_flight = &in_flight;
            shards[k].max_in_flight = &max_in_flight;
        }
    }
    std::vector<llm_io> ios() {
        std::vector<llm_io> v;
        for (HostShard &s : shards) v.push_back(s.io());
        return v;
    }
    std::vector<int> closes() const {
        std::vector<int> v;
        for (const HostShard &s : shards) v.push_back(s.closes);
        return v;
    }
};

std::vector<std::string> fixture_shards() {
    return {shard_path(kSplitPrefix, 1, 3), shard_path(kSplitPrefix, 2, 3), shard_path(kSplitPrefix, 3, 3)};
}

// ---- writing split sets from the unsplit fixture -----------------------------------------------

// What one shard says about itself, and what it holds; a test edits these to break the set.
struct ShardPlan {
    int no = 0, count = 0, tensors_count = 0;
    bool count_as_u32 = false;  // split.count with the wrong type
    std::vector<std::string> tensors;
};

// Writes the unsplit fixture as shards <prefix>-0000k-of-0000n.gguf: metadata in the first, tensors
// in file order, `per_shard` to a shard (the fixture's own split uses 8). edit may change the plans.
void write_split(const std::string &prefix, int n, size_t per_shard,
                 const std::function<void(std::vector<ShardPlan> &)> &edit = nullptr) {
    auto ws = WeightSource::open(open_file_source(kUnsplit));
    const auto &all = ws->tensors();
    std::vector<ShardPlan> plans(n);
    for (int k = 0; k < n; ++k) {
        plans[k].no = k;
        plans[k].count = n;
        plans[k].tensors_count = static_cast<int>(all.size());
    }
    for (size_t i = 0; i < all.size(); ++i) {
        plans[std::min<size_t>(i / per_shard, n - 1)].tensors.push_back(all[i].name);
    }
    if (edit) edit(plans);
    for (int k = 0; k < n; ++k) {
        const ShardPlan &p = plans[k];
        GgufWriter w;
        if (k == 0) {
            for (const auto &[key, v] : ws->meta().all())
                w.add_kv_raw(key, static_cast<uint32_t>(v.type), GgufWriter::encode_value(v));
        }
        w.add_u16("split.no", static_cast<uint16_t>(p.no));
        if (p.count_as_u32) {
            w.add_u32("split.count", static_cast<uint32_t>(p.count));
        } else {
            w.add_u16("split.count", static_cast<uint16_t>(p.count));
        }
        w.add_i32("split.tensors.count", p.tensors_count);
        for (const std::string &name : p.tensors) {
            const TensorInfo *t = ws->find(name);
            REQUIRE(t);
            std::vector<uint8_t> data(t->nbytes);
            ws->read(*t, 0, data.data(), t->nbytes);
            w.add_tensor(name, std::vector<uint64_t>(t->ne, t->ne + t->n_dims), t->type, std::move(data));
        }
        w.write_file(shard_path(prefix, k + 1, n));
    }
}

}  // namespace

TEST_CASE("a split model loads from its first shard with the unsplit file's logits", "[model][split]") {
    const std::string first = shard_path(kSplitPrefix, 1, 3);
    for (int32_t residency : {LLM_RESIDENCY_RESIDENT, LLM_RESIDENCY_STREAMED}) {
        INFO("residency " << residency);
        CHECK(same_bits(logits_of_path(first, residency), logits_of_path(kUnsplit, residency)));
    }

    // Page-cache policies apply to every shard; a budget keeps part of the model resident.
    llm_model_params mp = params(LLM_RESIDENCY_STREAMED);
    mp.page_cache = LLM_PAGE_CACHE_DIRECT;
    {
        Loaded l;
        REQUIRE(llm_model_load(first.c_str(), &mp, &l.m) == LLM_OK);
        CHECK(same_bits(logits_of(l.m), logits_of_path(kUnsplit, LLM_RESIDENCY_STREAMED)));
    }
    mp.page_cache = LLM_PAGE_CACHE_MAP;  // each shard's pieces mapped from their own file
    {
        Loaded l;
        REQUIRE(llm_model_load(first.c_str(), &mp, &l.m) == LLM_OK);
        CHECK(has(llm_model_info_json(l.m), "\"page_cache\":\"map\""));
        CHECK(same_bits(logits_of(l.m), logits_of_path(kUnsplit, LLM_RESIDENCY_STREAMED)));
    }
    mp.page_cache = LLM_PAGE_CACHE_DROP;
    mp.residency = LLM_RESIDENCY_BUDGET;
    {
        Loaded l;
        mp.ram_budget_bytes = 1;
        REQUIRE(llm_model_load(first.c_str(), &mp, &l.m) == LLM_ERR_OUT_OF_MEMORY);
        llm_model_params sp = params(LLM_RESIDENCY_STREAMED);
        REQUIRE(llm_model_load(first.c_str(), &sp, &l.m) == LLM_OK);
        llm_memory_plan plan{};
        llm_memory_plan_init(&plan, LLM_MEMORY_PLAN_VERSION);
        REQUIRE(llm_model_memory_plan(l.m, 0, &plan) == LLM_OK);
        mp.ram_budget_bytes = plan.minimum_weight_bytes + 300000;  // a block or so resident, the rest streamed
        llm_model_free(l.m);
        l.m = nullptr;
        REQUIRE(llm_model_load(first.c_str(), &mp, &l.m) == LLM_OK);
        CHECK(has(llm_model_info_json(l.m), "\"residency\":\"budget\""));
        CHECK(has(llm_model_info_json(l.m), "\"n_shards\":3"));
        CHECK(same_bits(logits_of(l.m), logits_of_path(kUnsplit, LLM_RESIDENCY_STREAMED)));
    }

    auto ws = WeightSource::open_file(first);
    CHECK(ws->n_shards() == 3);
    CHECK(ws->tensors().size() == 21);
    uint64_t bytes = 0;
    for (const std::string &p : fixture_shards()) bytes += fs::file_size(p);
    CHECK(ws->file_size() == bytes);
    // Tensors keep the shard they came from: the fixture splits after every 8 tensors.
    CHECK(ws->find("output.weight")->shard == 0);
    CHECK(ws->find("blk.1.attn_q.weight")->shard == 1);
    CHECK(ws->find("blk.1.attn_v.weight")->shard == 2);
}

TEST_CASE("a split model through one llm_io per shard matches the load by path", "[model][split]") {
    const std::vector<float> want = logits_of_path(shard_path(kSplitPrefix, 1, 3), LLM_RESIDENCY_STREAMED);
    for (int32_t residency : {LLM_RESIDENCY_RESIDENT, LLM_RESIDENCY_STREAMED}) {
        INFO("residency " << residency);
        HostSplit h(fixture_shards());
        std::vector<llm_io> ios = h.ios();
        llm_model_params mp = params(residency);
        {
            Loaded l;
            INFO(llm_last_error());
            REQUIRE(llm_model_load_io_split(ios.data(), ios.size(), &mp, &l.m) == LLM_OK);
            CHECK(same_bits(logits_of(l.m), want));
            CHECK(h.closes() == std::vector<int>{0, 0, 0});
        }
        CHECK(h.closes() == std::vector<int>{1, 1, 1});
        CHECK(h.max_in_flight.load() == 1);
    }

    SECTION("one llm_io is a plain file") {
        HostSplit h({kUnsplit});
        std::vector<llm_io> ios = h.ios();
        llm_model_params mp = params(LLM_RESIDENCY_STREAMED);
        {
            Loaded l;
            REQUIRE(llm_model_load_io_split(ios.data(), 1, &mp, &l.m) == LLM_OK);
            CHECK(same_bits(logits_of(l.m), want));
        }
        CHECK(h.closes() == std::vector<int>{1});
    }
}

TEST_CASE("shards written by GgufWriter load like the fixture's", "[model][split]") {
    // The writer that breaks shards below must first make a set that works.
    TempDir d;
    write_split(d.prefix(), 4, 6);
    CHECK(same_bits(logits_of_path(shard_path(d.prefix(), 1, 4), LLM_RESIDENCY_STREAMED),
                    logits_of_path(kUnsplit, LLM_RESIDENCY_STREAMED)));
}

TEST_CASE("a missing or mismatched shard is LLM_ERR_FORMAT naming it", "[gguf][split]") {
    TempDir d;
    const std::string first = shard_path(d.prefix(), 1, 3);
    const std::string second = shard_path(d.prefix(), 2, 3);
    const std::string third = shard_path(d.prefix(), 3, 3);
    auto expect = [&](std::initializer_list<std::string> parts) {
        auto [st, msg] = load_status(first);
        INFO(msg);
        CHECK(st == LLM_ERR_FORMAT);
        for (const std::string &p : parts) CHECK(has(msg, p));
    };

    SECTION("a shard is missing") {
        write_split(d.prefix(), 3, 8);
        fs::remove(second);
        expect({"shard 2 of 3", second, "missing"});
    }
    SECTION("a shard says another count") {
        write_split(d.prefix(), 3, 8, [](auto &p) { p[2].count = 4; });
        expect({third, "split.count is 4"});
    }
    SECTION("split.count has the wrong type") {
        write_split(d.prefix(), 3, 8, [](auto &p) { p[1].count_as_u32 = true; });
        expect({second, "split.count must be u16"});
    }
    SECTION("a shard is in the wrong place") {
        write_split(d.prefix(), 3, 8);
        fs::rename(second, d.path / "tmp.gguf");
        fs::rename(third, second);
        fs::rename(d.path / "tmp.gguf", third);
        expect({second, "split.no is 2, expected 1"});
    }
    SECTION("a shard of another split set") {
        write_split(d.prefix(), 3, 8, [](auto &p) { p[1].tensors_count = 30; });
        expect({second, "another split set"});
    }
    SECTION("a tensor in none of the shards") {
        write_split(d.prefix(), 3, 8, [](auto &p) { p[2].tensors.pop_back(); });
        expect({"hold 20 tensors", "split.tensors.count is 21", first});
    }
    SECTION("a tensor in none of the shards, the count agreeing") {
        std::string dropped;
        write_split(d.prefix(), 3, 8, [&](auto &p) {
            dropped = p[2].tensors.back();
            p[2].tensors.pop_back();
            for (auto &s : p) s.tensors_count = 20;
        });
        expect({"'" + dropped + "'", "missing"});
    }
    SECTION("a tensor in two shards") {
        std::string twice;
        write_split(d.prefix(), 3, 8, [&](auto &p) {
            twice = p[0].tensors.back();
            p[2].tensors.push_back(twice);
            for (auto &s : p) s.tensors_count = 22;
        });
        expect({"'" + twice + "' is in shard 1", first, "again in shard 3", third});
    }
    SECTION("a shard that is not a GGUF file") {
        write_split(d.prefix(), 3, 8);
        std::ofstream(third, std::ios::binary | std::ios::trunc) << "not a gguf file at all";
        expect({"shard 3 of 3", third, "bad magic"});
    }
    SECTION("loading a later shard") {
        write_split(d.prefix(), 3, 8);
        auto [st, msg] = load_status(second);
        INFO(msg);
        CHECK(st == LLM_ERR_FORMAT);
        CHECK(has(msg, second));
        CHECK(has(msg, "is shard 2 of 3"));
    }
    SECTION("a first shard whose name does not say where the others are") {
        write_split(d.prefix(), 3, 8);
        const std::string renamed = (d.path / "model.gguf").string();
        fs::rename(first, renamed);
        auto [st, msg] = load_status(renamed);
        INFO(msg);
        CHECK(st == LLM_ERR_FORMAT);
        CHECK(has(msg, renamed));
        CHECK(has(msg, "-00001-of-00003.gguf"));
    }
}

TEST_CASE("llm_io shards that do not fit are LLM_ERR_FORMAT naming their index and are each closed once",
          "[gguf][split]") {
    HostSplit h(fixture_shards());
    std::vector<llm_io> ios = h.ios();
    llm_model_params mp = params(LLM_RESIDENCY_RESIDENT);
    llm_model *m = nullptr;
    std::string msg;
    std::vector<int> closes = {1, 1, 1};  // what each host file should have seen
    auto load = [&](const llm_io *v, size_t n) {
        int32_t st = llm_model_load_io_split(v, n, &mp, &m);
        msg = llm_last_error();
        return st;
    };

    SECTION("out of order") {
        std::swap(ios[1], ios[2]);
        CHECK(load(ios.data(), 3) == LLM_ERR_FORMAT);
        CHECK(has(msg, "ios[1]"));
        CHECK(has(msg, "split.no is 2, expected 1"));
    }
    SECTION("too few") {
        CHECK(load(ios.data(), 2) == LLM_ERR_FORMAT);
        CHECK(has(msg, "ios[0]"));
        CHECK(has(msg, "2 were given"));
        closes = {1, 1, 0};  // ios[2] was never handed over
    }
    SECTION("the first shard alone, through llm_model_load_io") {
        CHECK(llm_model_load_io(&ios[0], &mp, &m) == LLM_ERR_FORMAT);
        msg = llm_last_error();
        CHECK(has(msg, "first of 3 shards"));
        closes = {1, 0, 0};
    }
    SECTION("a later shard first") {
        CHECK(load(ios.data() + 1, 2) == LLM_ERR_FORMAT);
        CHECK(has(msg, "ios[0]"));
        CHECK(has(msg, "is shard 2 of 3"));
        closes = {0, 1, 1};
    }
    SECTION("an llm_io of an unknown version is refused and still closed (close never moves)") {
        ios[1].version = 99;
        CHECK(load(ios.data(), 3) == LLM_ERR_INVALID_ARGUMENT);
        CHECK(has(msg, "ios[1].version 99"));
    }
    SECTION("an array of an unknown version: its stride is unknown, so only ios[0] can be closed") {
        for (llm_io &io : ios) io.version = 99;
        CHECK(load(ios.data(), 3) == LLM_ERR_INVALID_ARGUMENT);
        CHECK(has(msg, "ios[0].version 99"));
        closes = {1, 0, 0};
    }
    SECTION("an llm_io without read_at") {
        ios[2].read_at = nullptr;
        CHECK(load(ios.data(), 3) == LLM_ERR_INVALID_ARGUMENT);
        CHECK(has(msg, "ios[2]"));
    }
    SECTION("no ios") {
        CHECK(load(nullptr, 3) == LLM_ERR_INVALID_ARGUMENT);
        CHECK(load(ios.data(), 0) == LLM_ERR_INVALID_ARGUMENT);
        closes = {0, 0, 0};
    }
    INFO(msg);
    CHECK(m == nullptr);
    CHECK(h.closes() == closes);
}
