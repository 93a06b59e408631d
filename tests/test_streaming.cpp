// Residency policies must not change a single bit of output, and streaming must read each block
// once per forward pass. Compared against the RESIDENT run of the same model.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "gguf/weight_source.h"
#include "kernels/repack.h"
#include "loader/layer_store.h"
#include "llm.h"
#include "model/model.h"
#include "runtime/session.h"
#include "synth_model.h"
#include "test_files.h"

namespace {

const std::string kShared = LLM_SHARED_DIR;

struct Run {
    std::vector<float> logits;    // teacher-forced rows of the whole sequence, one batch
    std::vector<float> stepwise;  // the same positions fed one token at a time
    std::string info;
};

llm_model_params load_params(int32_t residency, uint64_t budget, int32_t depth, int32_t page_cache) {
    llm_model_params mp;
    llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
    mp.n_threads = 2;
    mp.residency = residency;
    mp.ram_budget_bytes = budget;
    mp.prefetch_depth = depth;
    mp.page_cache = page_cache;
    return mp;
}

Run run(const std::string &model, int32_t residency, uint64_t budget, int32_t depth, const std::vector<int32_t> &seq,
        int32_t page_cache = LLM_PAGE_CACHE_KEEP) {
    llm_model_params mp = load_params(residency, budget, depth, page_cache);
    llm_model *m = nullptr;
    INFO(model << " residency " << residency << " budget " << budget << " depth " << depth << " page cache "
               << page_cache);
    REQUIRE(llm_model_load(model.c_str(), &mp, &m) == LLM_OK);
    Run r;
    r.info = llm_model_info_json(m);
    llm_session_params sp;
    llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
    sp.temperature = 0;
    sp.logits_all = true;
    llm_session *s = nullptr;
    REQUIRE(llm_session_create(m, &sp, &s) == LLM_OK);
    REQUIRE(llm_session_prefill(s, seq.data(), seq.size()) == LLM_OK);
    for (size_t i = 0; i < seq.size(); ++i) {
        const float *lg;
        int32_t nv;
        REQUIRE(llm_session_logits_ith(s, static_cast<int32_t>(i), &lg, &nv) == LLM_OK);
        r.logits.insert(r.logits.end(), lg, lg + nv);
    }
    REQUIRE(llm_session_reset(s) == LLM_OK);
    for (size_t i = 0; i < seq.size(); ++i) {
        REQUIRE(llm_session_accept(s, seq[i]) == LLM_OK);
        const float *lg;
        int32_t nv;
        REQUIRE(llm_session_logits(s, &lg, &nv) == LLM_OK);
        r.stepwise.insert(r.stepwise.end(), lg, lg + nv);
    }
    llm_session_free(s);
    llm_model_free(m);
    return r;
}

bool bitwise_equal(const std::vector<float> &a, const std::vector<float> &b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Both lists are computed once: the cases loop over SECTIONs, and Catch2 enters a case once per section.
const std::vector<std::string> &fixture_models() {
    static const std::vector<std::string> list = [] {
        std::ifstream f(kShared + "/fixtures/index.json");
        nlohmann::json idx = nlohmann::json::parse(f);
        std::vector<std::string> out;
        for (const auto &g : idx["goldens"]) {
            std::string m = g["model"];
            if (m.find("stories260K") == std::string::npos) out.push_back(kShared + "/fixtures/" + m);
        }
        out.push_back(kShared + "/models/stories260K.gguf");
        return out;
    }();
    return list;
}

// The fixtures a slow build (sanitizers, qemu) runs the residency and page-cache matrices over: each
// architecture once (its Q8_0 file where it has one, so quantized expert slabs are mapped too) and each
// file type once ("llama.q4_k_m", "split/llama.q8_0-00001-of-00003"), so every block recipe and every
// weight layout is still streamed, mapped and dropped. About half the list; the native build takes all.
const std::vector<std::string> &streaming_models() {
    static const std::vector<std::string> list = [] {
        const std::vector<std::string> &all = fixture_models();
        if (!test::kSlowBuild) return all;
        std::map<std::string, std::string> pick;  // arch -> its one file
        for (const std::string &path : all) {
            const auto [arch, type] = test::fixture_arch_type(path);
            if (!pick.count(arch) || type == "q8_0.gguf") pick[arch] = path;
        }
        std::set<std::string> types;
        std::vector<std::string> out;
        for (const std::string &path : all) {
            const auto [arch, type] = test::fixture_arch_type(path);
            if (types.insert(type).second || pick[arch] == path) out.push_back(path);
        }
        return out;
    }();
    return list;
}

// Bytes of the file the OS page cache holds (mincore over an untouched mapping).
uint64_t cached_bytes(const std::string &path) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    struct stat st {};
    REQUIRE(fstat(fd, &st) == 0);
    const size_t len = static_cast<size_t>(st.st_size);
    void *p = mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, 0);
    REQUIRE(p != MAP_FAILED);
    const long page = sysconf(_SC_PAGESIZE);
    std::vector<unsigned char> v((len + page - 1) / page);
    REQUIRE(mincore(p, len, v.data()) == 0);
    uint64_t n = 0;
    for (unsigned char c : v) n += (c & 1) ? static_cast<uint64_t>(page) : 0;
    munmap(p, len);
    ::close(fd);
    return n;
}

}  // namespace

TEST_CASE("every residency and prefetch depth gives bitwise identical logits", "[loader][streaming]") {
    const std::vector<int32_t> seq = {1, 403, 407, 261, 378, 383, 286, 356, 420, 169, 391, 310};
    REQUIRE(fixture_models().size() >= 50);
    const std::vector<std::string> &models = streaming_models();
    for (const std::string &model : models) {
        SECTION(model) {
            const Run ref = run(model, LLM_RESIDENCY_RESIDENT, 0, 1, seq);
            // Prefill-then-read equals token-by-token decode, bit for bit.
            CHECK(bitwise_equal(ref.logits, ref.stepwise));
            const auto info = nlohmann::json::parse(ref.info);
            const uint64_t total = info["memory"]["resident_block_bytes"].get<uint64_t>() +
                                   info["memory"]["lm_head_bytes"].get<uint64_t>();
            const uint64_t min = info["memory"]["minimum_weight_bytes"];
            struct Mode {
                int32_t residency;
                uint64_t budget;
                int32_t depth;
            };
            std::vector<Mode> modes = {
                {LLM_RESIDENCY_STREAMED, 0, 2},
                {LLM_RESIDENCY_BUDGET, (min + total) / 2, 1},
            };
            // The prefetch depths and the budget's two ends change only which reads happen when, not
            // a kernel: emulated runs take the two modes above (streamed tiles, a resident/streamed mix).
            if (!test::kEmulated) {
                modes.push_back({LLM_RESIDENCY_STREAMED, 0, 0});
                modes.push_back({LLM_RESIDENCY_STREAMED, 0, 1});
                modes.push_back({LLM_RESIDENCY_BUDGET, min, 1});
                modes.push_back({LLM_RESIDENCY_BUDGET, total + min, 0});
            }
            for (const Mode &md : modes) {
                INFO("residency " << md.residency << " budget " << md.budget << " depth " << md.depth);
                const Run r = run(model, md.residency, md.budget, md.depth, seq);
                CHECK(bitwise_equal(ref.logits, r.logits));
                CHECK(bitwise_equal(ref.logits, r.stepwise));
            }
        }
    }
}

TEST_CASE("page cache policies change no bit of output", "[loader][streaming][cache][cpu-neutral]") {
    const std::vector<int32_t> seq = {1, 403, 407, 261, 378, 383, 286, 356, 420, 169, 391, 310};
    for (const std::string &model : streaming_models()) {
        SECTION(model) {
            const Run ref = run(model, LLM_RESIDENCY_RESIDENT, 0, 1, seq);
            const uint64_t min = nlohmann::json::parse(ref.info)["memory"]["minimum_weight_bytes"];
            struct Mode {
                int32_t residency;
                uint64_t budget;
                int32_t depth, cache;
            };
            for (const Mode &md : {Mode{LLM_RESIDENCY_STREAMED, 0, 1, LLM_PAGE_CACHE_DROP},
                                   Mode{LLM_RESIDENCY_STREAMED, 0, 0, LLM_PAGE_CACHE_DIRECT},
                                   Mode{LLM_RESIDENCY_STREAMED, 0, 2, LLM_PAGE_CACHE_DIRECT},
                                   Mode{LLM_RESIDENCY_BUDGET, min + min / 2, 1, LLM_PAGE_CACHE_DIRECT},
                                   Mode{LLM_RESIDENCY_RESIDENT, 0, 1, LLM_PAGE_CACHE_DIRECT},
                                   // Mapped pieces (and expert slabs) are the copies' bytes: same bits.
                                   Mode{LLM_RESIDENCY_STREAMED, 0, 0, LLM_PAGE_CACHE_MAP},
                                   Mode{LLM_RESIDENCY_STREAMED, 0, 1, LLM_PAGE_CACHE_MAP},
                                   Mode{LLM_RESIDENCY_STREAMED, 0, 2, LLM_PAGE_CACHE_MAP},
                                   Mode{LLM_RESIDENCY_BUDGET, min + min / 2, 1, LLM_PAGE_CACHE_MAP},
                                   Mode{LLM_RESIDENCY_RESIDENT, 0, 1, LLM_PAGE_CACHE_MAP}}) {
                const Run r = run(model, md.residency, md.budget, md.depth, seq, md.cache);
                CHECK(bitwise_equal(ref.logits, r.logits));
                CHECK(bitwise_equal(ref.logits, r.stepwise));
                if (md.cache == LLM_PAGE_CACHE_MAP) CHECK(nlohmann::json::parse(r.info)["memory"]["page_cache"] == "map");
            }
        }
    }
}

TEST_CASE("DROP and DIRECT streaming leave the model file out of the page cache", "[loader][streaming][cache]") {
    const std::string path =
        (std::filesystem::temp_directory_path() / ("llm-test-cache-" + std::to_string(::getpid()) + ".gguf")).string();
    tools::write_synth_model(*tools::find_shape("tiny-deep"), "q8_0", path, 5);
    {
        // Written pages are dirty and the kernel will not drop those: write them back first.
        const int fd = ::open(path.c_str(), O_RDONLY);
        REQUIRE(fd >= 0);
        REQUIRE(::fsync(fd) == 0);
        ::close(fd);
    }
    const uint64_t size = std::filesystem::file_size(path);
    const std::vector<int32_t> seq = {1, 300, 301, 302};
    const Run ref = run(path, LLM_RESIDENCY_STREAMED, 0, 1, seq);  // KEEP: the whole file gets cached
    const uint64_t kept = cached_bytes(path);
    INFO("file " << size << " bytes; cached after KEEP " << kept);
    CHECK(kept > size * 9 / 10);

    const Run drop = run(path, LLM_RESIDENCY_STREAMED, 0, 1, seq, LLM_PAGE_CACHE_DROP);
    const uint64_t dropped = cached_bytes(path);
    INFO("cached after DROP " << dropped);
    CHECK(dropped < size / 20);
    CHECK(bitwise_equal(ref.logits, drop.logits));

    const Run direct = run(path, LLM_RESIDENCY_STREAMED, 1, 1, seq, LLM_PAGE_CACHE_DIRECT);
    const auto info = nlohmann::json::parse(direct.info);
    const uint64_t after_direct = cached_bytes(path);
    INFO("cached after DIRECT " << after_direct << " (policy in force: " << info["memory"]["page_cache"] << ")");
    CHECK(after_direct < size / 20);
    CHECK(bitwise_equal(ref.logits, direct.logits));
    std::filesystem::remove(path);
}

namespace {

// Mappings of `path` in this process: how many, and the bytes of theirs that are resident.
struct Mapped {
    int n = 0;
    uint64_t rss = 0;
};
Mapped mapped_of(const std::string &path) {
    std::ifstream f("/proc/self/smaps");
    Mapped m;
    bool in = false;
    for (std::string line; std::getline(f, line);) {
        // A mapping's header line ("start-end perms offset dev inode path") has no ':' before its
        // first space but one inside "dev"; its fields ("Rss:   12 kB") start with a name and ':'.
        const size_t sp = line.find(' ');
        const bool header = sp != std::string::npos && line.find(':') > sp;
        if (header) {
            in = line.size() >= path.size() && line.compare(line.size() - path.size(), path.size(), path) == 0;
            m.n += in ? 1 : 0;
        } else if (in && line.rfind("Rss:", 0) == 0) {
            m.rss += std::stoull(line.substr(4)) * 1024;
        }
    }
    return m;
}

std::string synth_path(const char *tag) {
    return (std::filesystem::temp_directory_path() /
            ("llm-test-" + std::string(tag) + "-" + std::to_string(::getpid()) + ".gguf"))
        .string();
}

}  // namespace

TEST_CASE("MAP streaming maps the pieces, at most the ring's worth at a time", "[loader][streaming][cache]") {
    const std::string path = synth_path("map");
    tools::write_synth_model(*tools::find_shape("tiny-deep"), "q8_0", path, 5);
    const std::vector<int32_t> seq = {1, 300, 301, 302};
    const Run ref = run(path, LLM_RESIDENCY_STREAMED, 0, 1, seq);
    for (int32_t depth : {0, 1, 2}) {
        INFO("depth " << depth);
        llm_model_params mp = load_params(LLM_RESIDENCY_STREAMED, 0, depth, LLM_PAGE_CACHE_MAP);
        llm_model *m = nullptr;
        REQUIRE(llm_model_load(path.c_str(), &mp, &m) == LLM_OK);
        const auto mem = nlohmann::json::parse(llm_model_info_json(m))["memory"];
        CHECK(mem["page_cache"] == "map");
        const uint64_t slots = mem["stream_slot_bytes"];
        llm_session_params sp;
        llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
        sp.temperature = 0;
        llm_session *s = nullptr;
        REQUIRE(llm_session_create(m, &sp, &s) == LLM_OK);
        REQUIRE(llm_session_prefill(s, seq.data(), seq.size()) == LLM_OK);
        const float *lg;
        int32_t nv;
        REQUIRE(llm_session_logits(s, &lg, &nv) == LLM_OK);
        CHECK(std::memcmp(lg, ref.logits.data() + (seq.size() - 1) * nv, nv * sizeof(float)) == 0);
        // Between calls the ring's slots still hold their last pieces: mapped, and no more of them
        // (nor more bytes) than the slots the memory plan counts.
        const Mapped mm = mapped_of(path);
        INFO("mappings " << mm.n << " resident " << mm.rss << " slots " << slots);
        CHECK(mm.n >= 1);
        CHECK(mm.n <= 1 + depth);
        CHECK(mm.rss <= slots);
        llm_session_free(s);
        llm_model_free(m);
        CHECK(mapped_of(path).n == 0);  // the slots went with the session
    }
    std::filesystem::remove(path);
}

TEST_CASE("MAP streaming of a file truncated after load fails with a status, not SIGBUS", "[loader][streaming][cache]") {
    const std::string path = synth_path("map-trunc");
    tools::write_synth_model(*tools::find_shape("tiny-deep"), "q8_0", path, 5);
    const uint64_t size = std::filesystem::file_size(path);
    const std::vector<int32_t> seq = {1, 300, 301, 302};
    for (int32_t depth : {0, 1}) {
        INFO("depth " << depth);
        llm_model_params mp = load_params(LLM_RESIDENCY_STREAMED, 0, depth, LLM_PAGE_CACHE_MAP);
        llm_model *m = nullptr;
        REQUIRE(llm_model_load(path.c_str(), &mp, &m) == LLM_OK);
        std::filesystem::resize_file(path, size / 2);
        llm_session_params sp;
        llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
        llm_session *s = nullptr;
        REQUIRE(llm_session_create(m, &sp, &s) == LLM_OK);
        CHECK(llm_session_prefill(s, seq.data(), seq.size()) == LLM_ERR_IO);
        INFO(llm_last_error());
        CHECK(std::string(llm_last_error()).find("changed") != std::string::npos);
        llm_session_free(s);
        llm_model_free(m);
        // Loading the truncated file is refused at load, before anything is mapped.
        CHECK(llm_model_load(path.c_str(), &mp, &m) == LLM_ERR_FORMAT);
        tools::write_synth_model(*tools::find_shape("tiny-deep"), "q8_0", path, 5);
    }
    std::filesystem::remove(path);
}

TEST_CASE("a budget below the minimum fails before reading weights, naming the minimum", "[loader]") {
    llm_model_params mp;
    llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
    mp.residency = LLM_RESIDENCY_BUDGET;
    mp.ram_budget_bytes = 1000;
    llm_model *m = nullptr;
    REQUIRE(llm_model_load((kShared + "/models/stories260K.gguf").c_str(), &mp, &m) == LLM_ERR_OUT_OF_MEMORY);
    CHECK(m == nullptr);
    CHECK(std::string(llm_last_error()).find("minimum of") != std::string::npos);
}

TEST_CASE("a P-token prefill in STREAMED mode reads each block's bytes exactly once", "[loader][streaming]") {
    using namespace llm;
    for (int32_t depth : {0, 1, 2, 10, 11}) {  // 10, 11: depth 0, 1 mapped
        LoadOptions opt;
        opt.store.residency = Residency::STREAMED;
        opt.store.prefetch_depth = depth % 10;
        if (depth >= 10) opt.store.cache = CachePolicy::MAP;
        auto model =
            Model::load(WeightSource::open(open_file_source(kShared + "/fixtures/models/llama.q4_k_m.gguf")), opt);
        const LayerStore &ls = model->layers();
        // Streamed: every piece's matrices (the vectors were read at load).
        uint64_t blocks = 0, block_reads = 0;
        for (uint32_t i = 0; i < ls.n_pieces(); ++i)
            for (const auto &r : ls.piece(i).layout.runs) {
                blocks += r.file_end - r.file_begin;
                ++block_reads;
            }
        const TensorInfo *embd = model->source().find("token_embd.weight");
        const TensorInfo *head = model->source().find("output.weight");
        REQUIRE((embd && head));

        SessionOptions so;
        so.n_threads = 1;
        Session s(*model, so);
        const std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 383, 286, 356, 420, 169, 391, 310, 78, 210, 479, 5};
        s.prefill(prompt.data(), prompt.size());
        const SessionStats st = s.stats();
        const uint64_t expected = blocks + prompt.size() * embd->row_bytes() + head->nbytes;
        INFO("depth " << depth << " blocks " << blocks << " read " << st.bytes_read << " expected " << expected);
        if (depth % 10 == 0) {
            CHECK(st.bytes_read == expected);
        } else {
            // The I/O thread may already be reading the next token's first pieces: at most `depth` more.
            CHECK(st.bytes_read >= expected);
            CHECK(st.bytes_read <= expected + static_cast<uint64_t>(depth % 10) * ls.max_piece_bytes());
        }
        (void)block_reads;
    }
}

TEST_CASE("the RAM dial releases and admits blocks at run time with unchanged output", "[loader]") {
    const std::string model = kShared + "/models/stories260K.gguf";
    llm_model_params mp;
    llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
    llm_model *m = nullptr;
    REQUIRE(llm_model_load(model.c_str(), &mp, &m) == LLM_OK);
    llm_memory_plan plan;
    llm_memory_plan_init(&plan, LLM_MEMORY_PLAN_VERSION);
    REQUIRE(llm_model_memory_plan(m, 256, &plan) == LLM_OK);
    CHECK(plan.n_resident_layers == plan.n_layer);
    CHECK(plan.kv_cache_bytes > 0);
    CHECK(plan.total_bytes >= plan.resident_block_bytes + plan.kv_cache_bytes);

    llm_session_params sp;
    llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
    sp.temperature = 0;
    auto generate = [&]() { return test::generated_text(m, sp, "Once upon a time", 24); };
    const std::string ref = generate();

    CHECK(llm_model_set_ram_budget(m, 10) == LLM_ERR_OUT_OF_MEMORY);
    REQUIRE(llm_model_set_ram_budget(m, plan.minimum_weight_bytes) == LLM_OK);
    REQUIRE(llm_model_memory_plan(m, 256, &plan) == LLM_OK);
    CHECK(plan.n_resident_layers < plan.n_layer);
    CHECK(generate() == ref);

    REQUIRE(llm_model_set_ram_budget(m, UINT64_MAX / 2) == LLM_OK);
    REQUIRE(llm_model_memory_plan(m, 256, &plan) == LLM_OK);
    CHECK(plan.n_resident_layers == plan.n_layer);
    CHECK(generate() == ref);
    llm_model_free(m);
}

TEST_CASE("choose_residency keeps the leading units that fit, slots once one streams, the head when all fit",
          "[loader]") {
    using llm::choose_residency;
    const std::vector<uint64_t> units = {10, 20, 30, 40};  // 100 bytes in all
    const uint64_t head = 50, slots = 25;
    struct Case {
        uint64_t budget;
        uint32_t n_units;
        bool head;
    };
    for (const Case &k : {Case{150, 4, true},   // all units and the head, exactly
                          Case{149, 4, false},  // every unit fits, so no slots are needed; the head streams
                          Case{100, 4, false}, Case{99, 3, false},  // 99 - 25 slots = 74: 10 + 20 + 30
                          Case{59, 2, false},                       // 34: 10 + 20
                          Case{35, 1, false},                       // 10
                          Case{34, 0, false},                       // 9
                          Case{20, 0, false},                       // below the slots
                          Case{0, 0, false}}) {
        INFO("budget " << k.budget);
        const llm::ResidencyChoice c = choose_residency(k.budget, units, head, slots);
        CHECK(c.n_units() == k.n_units);
        for (uint32_t u = 0; u < units.size(); ++u) CHECK(c.units[u] == (u < k.n_units));  // leading ones
        CHECK(c.head_resident == k.head);
    }
}

TEST_CASE("choose_residency keeps a MoE model's attention halves and head before its expert halves", "[loader]") {
    using llm::choose_residency;
    // Two layers: attention halves of 10 read whole per token, expert halves of 100 of which a token
    // reads 15 (a router of 5 and a tenth of the experts), a head of 30, slots of 20.
    const std::vector<uint64_t> units = {10, 100, 10, 100}, decode = {10, 15, 10, 15};
    const uint64_t head = 30, slots = 20;
    struct Case {
        uint64_t budget;
        std::vector<bool> units;
        bool head;
    };
    for (const Case &k : {Case{250, {true, true, true, true}, true},    // everything
                          Case{220, {true, true, true, true}, false},   // every unit, no slots: the head streams
                          Case{219, {true, true, true, false}, true},   // 199: 10 + 10 + 30 + 100
                          Case{169, {true, false, true, false}, true},  // 149: the second expert half does not fit
                          Case{69, {true, false, true, false}, false},  // 49: the attention halves, not the head
                          Case{39, {true, false, false, false}, false}, // 19: one attention half
                          Case{20, {false, false, false, false}, false}}) {
        INFO("budget " << k.budget);
        const llm::ResidencyChoice c = choose_residency(k.budget, units, head, slots, decode);
        CHECK(c.units == k.units);
        CHECK(c.head_resident == k.head);
    }
    // Without per-token figures the same sizes keep the leading units, as a dense model's.
    CHECK(choose_residency(149, units, head, slots).units == std::vector<bool>{true, true, true, false});
}

TEST_CASE("the RAM dial keeps resident what a load with the same budget keeps", "[loader]") {
    const std::string model = kShared + "/models/stories260K.gguf";
    auto memory = [](llm_model *m) { return nlohmann::json::parse(llm_model_info_json(m))["memory"]; };
    llm_model_params mp;
    llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
    llm_model *resident = nullptr;
    REQUIRE(llm_model_load(model.c_str(), &mp, &resident) == LLM_OK);
    const auto all = memory(resident);
    const uint64_t total = all["resident_block_bytes"].get<uint64_t>() + all["lm_head_bytes"].get<uint64_t>();
    const uint64_t min = all["minimum_weight_bytes"];
    // Every unit fits without the head (the edge where the dial once reserved the head as well),
    // half way, and the minimum.
    for (uint64_t budget : {total - 1, (min + total) / 2, min}) {
        INFO("budget " << budget << " of " << total);
        mp.residency = LLM_RESIDENCY_BUDGET;
        mp.ram_budget_bytes = budget;
        llm_model *loaded = nullptr;
        REQUIRE(llm_model_load(model.c_str(), &mp, &loaded) == LLM_OK);
        REQUIRE(llm_model_set_ram_budget(resident, budget) == LLM_OK);
        const auto a = memory(loaded), b = memory(resident);
        CHECK(a["n_resident_half_blocks"] == b["n_resident_half_blocks"]);
        CHECK(a["lm_head_resident"] == b["lm_head_resident"]);
        CHECK(a["resident_block_bytes"] == b["resident_block_bytes"]);
        llm_model_free(loaded);
    }
    llm_model_free(resident);
}

TEST_CASE("a RAM budget of a tenth of a deep model gives the same output", "[loader][streaming]") {
    const std::string path = (std::filesystem::temp_directory_path() / "llm-test-tiny-deep-q8_0.gguf").string();
    tools::write_synth_model(*tools::find_shape("tiny-deep"), "q8_0", path, 7);
    const std::vector<int32_t> seq = {1, 300, 301, 302, 303, 304, 305, 306};
    const Run ref = run(path, LLM_RESIDENCY_RESIDENT, 0, 1, seq);
    const auto info = nlohmann::json::parse(ref.info);
    const uint64_t size = info["file_bytes"];
    for (int32_t depth : {0, 1}) {
        const Run r = run(path, LLM_RESIDENCY_BUDGET, size / 10, depth, seq);
        const auto ri = nlohmann::json::parse(r.info);
        INFO(r.info);
        CHECK(ri["memory"]["n_resident_layers"].get<int>() < 24);
        CHECK(bitwise_equal(ref.logits, r.logits));
        CHECK(bitwise_equal(ref.logits, r.stepwise));
    }
    std::filesystem::remove(path);
}

TEST_CASE("long prompts: sub-batches and prompt chunks do not change a bit", "[loader][streaming]") {
    // 700 positions cross the 128-position sub-batches inside a block and the 512-token prompt chunks.
    std::vector<int32_t> seq = {1};
    for (int i = 1; i < 700; ++i) seq.push_back(3 + (i * 37) % 509);
    const std::string model = kShared + "/models/stories260K.gguf";
    const Run ref = run(model, LLM_RESIDENCY_RESIDENT, 0, 1, seq);
    CHECK(bitwise_equal(ref.logits, ref.stepwise));
    // Streamed equals resident is the residency case's check on every fixture; emulated runs keep the
    // resident half here, where prefill crosses the 128-position sub-batches and 512-token chunks.
    if (test::kEmulated) return;
    const Run streamed = run(model, LLM_RESIDENCY_STREAMED, 0, 2, seq);
    CHECK(bitwise_equal(ref.logits, streamed.logits));
    CHECK(bitwise_equal(ref.logits, streamed.stepwise));
}

TEST_CASE("streamed MoE blocks read only the experts a token chose", "[loader][streaming]") {
    using namespace llm;
    LoadOptions opt;
    opt.store.residency = Residency::STREAMED;
    opt.store.prefetch_depth = 0;
    auto model = Model::load(WeightSource::open(open_file_source(kShared + "/fixtures/models/mixtral.q8_0.gguf")), opt);
    const LayerStore &ls = model->layers();
    const ModelConfig &c = model->config();
    REQUIRE(c.n_expert == 4);
    REQUIRE(c.n_expert_used == 2);
    uint64_t units = 0, slabs = 0;
    for (uint32_t i = 0; i < ls.n_pieces(); ++i)
        for (const auto &r : ls.piece(i).layout.runs) units += r.file_end - r.file_begin;
    for (uint32_t l = 0; l < c.n_layer; ++l)
        for (TensorRole s : {FFN_GATE_EXPS, FFN_UP_EXPS, FFN_DOWN_EXPS}) {
            const TensorInfo *t = ls.tensors(2 * l + 1).t[s];
            REQUIRE(t);
            slabs += t->ne[1] * t->row_bytes();  // one expert's slab
        }
    SessionOptions so;
    so.n_threads = 1;
    Session s(*model, so);
    const int32_t bos = 1;
    s.prefill(&bos, 1);
    const TensorInfo *embd = model->source().find("token_embd.weight");
    const TensorInfo *head = model->source().find("output.weight");
    // One token: every non-expert byte once, plus n_expert_used slabs of each expert tensor per layer.
    CHECK(s.stats().bytes_read == units + slabs * c.n_expert_used + embd->row_bytes() + head->nbytes);
}

TEST_CASE("a streaming slot holds the largest matrix: pieces cover each streamed matrix once, in recipe order",
          "[loader][streaming]") {
    using namespace llm;
    for (const std::string &path : fixture_models()) {
        SECTION(path) {
            for (int32_t depth : {0, 2}) {
                LoadOptions opt;
                opt.store.residency = Residency::STREAMED;
                opt.store.prefetch_depth = depth;
                auto model = Model::load(WeightSource::open_file(path), opt);
                const LayerStore &ls = model->layers();
                uint64_t largest = 0, slab = 0, vectors = 0;
                int64_t last = -1;
                for (uint32_t u = 0; u < ls.n_units(); ++u) {
                    const BlockTensors &bt = ls.tensors(u);
                    for (int s = 0; s < ROLE_COUNT; ++s) {
                        const TensorInfo *t = bt.t[s];
                        if (!t || kRoleTraits[s].part != u % kUnitsPerBlock) continue;
                        INFO("unit " << u << " tensor " << t->name);
                        if (!kRoleTraits[s].matrix) {
                            // Norms and biases stay resident, read at load.
                            const BlockData &v = ls.vectors(u / kUnitsPerBlock);
                            CHECK(v.ptr[s] != nullptr);
                            vectors += t->nbytes;
                            continue;
                        }
                        if (kRoleTraits[s].expert) {
                            slab = std::max<uint64_t>(slab, t->ne[1] * t->row_bytes());
                            CHECK(ls.piece_of(u, static_cast<TensorRole>(s)) == UINT32_MAX);
                            continue;
                        }
                        largest = std::max(largest, t->nbytes);
                        const uint32_t p = ls.piece_of(u, static_cast<TensorRole>(s));
                        REQUIRE(p < ls.n_pieces());
                        CHECK(ls.piece(p).unit == u);
                        CHECK(ls.piece(p).layout.used[s]);
                        CHECK(static_cast<int64_t>(p) >= last);  // the order the recipe leases them in
                        last = p;
                    }
                }
                uint64_t in_pieces = 0;
                for (uint32_t p = 0; p < ls.n_pieces(); ++p) {
                    CHECK(ls.piece(p).layout.total <= largest);
                    for (int s = 0; s < ROLE_COUNT; ++s) in_pieces += ls.piece(p).layout.used[s] ? 1 : 0;
                }
                uint64_t matrices = 0;
                for (uint32_t u = 0; u < ls.n_units(); ++u)
                    for (int s = 0; s < ROLE_COUNT; ++s)
                        matrices += ls.tensors(u).t[s] && kRoleTraits[s].matrix && !kRoleTraits[s].expert &&
                                    kRoleTraits[s].part == u % kUnitsPerBlock;
                CHECK(in_pieces == matrices);  // each in exactly one piece
                CHECK(ls.max_piece_bytes() == largest);
                CHECK(ls.stream_slot_bytes() == (1 + depth) * (largest + 3 * slab));
                CHECK(ls.vector_bytes() >= vectors);
                CHECK(ls.vector_bytes() <= vectors + 64 * 2 * ROLE_COUNT * ls.n_layer());  // alignment padding at most
            }
        }
    }
}

// A synthetic model of shape sh in `type` (seed), run resident and streamed on seq; the file is removed.
std::pair<Run, Run> resident_and_streamed(const tools::SynthShape &sh, const std::string &type, uint64_t seed,
                                          const std::vector<int32_t> &seq) {
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("llm-test-" + sh.name + "-" + type + "-" + std::to_string(::getpid()) + ".gguf"))
                                 .string();
    tools::write_synth_model(sh, type, path, seed);
    Run res = run(path, LLM_RESIDENCY_RESIDENT, 0, 1, seq);
    Run str = run(path, LLM_RESIDENCY_STREAMED, 0, 1, seq);
    std::remove(path.c_str());
    return {std::move(res), std::move(str)};
}

TEST_CASE("the synthetic writer's qwen35 shape is a hybrid the library runs, resident and streamed alike",
          "[synth][hybrid][streaming]") {
    // qwen3.5-4b's layout at toy size: three delta-net layers, then one full-attention layer.
    const tools::SynthShape sh{"toy-qwen35", 256, 4, 4, 2, 512, 512, 256, "qwen35", 64, 0, 0, 2, 4, 32};
    const auto [res, str] = resident_and_streamed(sh, "q8_0", 3, {1, 300, 301, 302, 303, 40});
    const auto info = nlohmann::json::parse(res.info);
    INFO(res.info);
    REQUIRE(info.contains("layer_kinds"));
    CHECK(info["layer_kinds"] ==
          nlohmann::json::array({"gated_delta_net", "gated_delta_net", "gated_delta_net", "attention"}));
    CHECK(bitwise_equal(res.logits, str.logits));
    CHECK(bitwise_equal(res.logits, res.stepwise));
    bool finite = true;
    for (float v : res.logits) finite = finite && std::isfinite(v);
    CHECK(finite);
}

TEST_CASE("a resident LM head is packed, and a tied token table reads its rows back out of it",
          "[synth][streaming]") {
    // Tied embeddings (the qwen35 toy writes no output.weight) in Q4_0, a packed type: resident, the head
    // is packed in place and Model::embed unpacks each token's row from it; streamed, both come from
    // the file. Any byte out of place changes the embeddings and so the logits.
    const tools::SynthShape sh{"toy-qwen35", 256, 4, 4, 2, 512, 512, 256, "qwen35", 64, 0, 0, 2, 4, 32};
    const auto [res, str] = resident_and_streamed(sh, "q4_0", 9, {1, 17, 300, 301, 511, 40, 255, 0});
    const auto ri = nlohmann::json::parse(res.info), si = nlohmann::json::parse(str.info);
    INFO(res.info);
    CHECK(ri["memory"]["lm_head_resident"] == true);
    CHECK(si["memory"]["lm_head_resident"] == false);
    CHECK(si["memory"]["lm_head_packed"] == false);
    // Packed only where the kernels have packed Q4_0 tiles (AVX-512 VNNI); elsewhere both runs read rows.
    if (llm::packable(llm::TensorType::Q4_0, sh.n_embd, sh.n_vocab)) CHECK(ri["memory"]["lm_head_packed"] == true);
    CHECK(bitwise_equal(res.logits, str.logits));
    CHECK(bitwise_equal(res.logits, res.stepwise));
}

TEST_CASE("the synthetic writer's gpt-oss shape runs with MXFP4 experts, resident and streamed alike",
          "[synth][moe][streaming]") {
    // gpt-oss-20b's layout at toy size (the benchmark's file): biased attention with sinks, four experts
    // in MXFP4 with the rest Q8_0.
    const tools::SynthShape *sh = tools::find_shape("gpt-oss-toy");
    REQUIRE(sh != nullptr);
    const auto [res, str] = resident_and_streamed(*sh, "mxfp4_moe", 5, {1, 200, 201, 202, 203, 40, 41, 42});
    const auto info = nlohmann::json::parse(res.info);
    INFO(res.info);
    CHECK(info["arch"] == "gpt-oss");
    CHECK(res.info.find("MXFP4") != std::string::npos);
    CHECK(bitwise_equal(res.logits, str.logits));
    CHECK(bitwise_equal(res.logits, res.stepwise));
    bool finite = true;
    for (float v : res.logits) finite = finite && std::isfinite(v);
    CHECK(finite);
}
