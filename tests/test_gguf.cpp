// GGUF reader tests: files written by GgufWriter round-trip through WeightSource; a table of
// malformed files each fails with LLM_ERR_FORMAT and a message naming the bad field; a host llm_io
// that fails on any read yields LLM_ERR_IO and is closed exactly once.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "core/error.h"
#include "gguf/byte_source.h"
#include "gguf_writer.h"
#include "gguf/weight_source.h"
#include "llm.h"

using namespace llm;

namespace {

class MemorySource final : public ByteSource {
public:
    explicit MemorySource(std::vector<uint8_t> d) : d_(std::move(d)) {}
    uint64_t size() const override { return d_.size(); }
    std::string describe() const override { return "memory"; }

protected:
    void do_read(uint64_t offset, void *dst, uint64_t n) override { std::memcpy(dst, d_.data() + offset, n); }

private:
    std::vector<uint8_t> d_;
};

std::unique_ptr<WeightSource> open_bytes(std::vector<uint8_t> b) {
    return WeightSource::open(std::make_unique<MemorySource>(std::move(b)));
}

// A temp file removed when the test ends, also on failure.
struct TempFile {
    std::filesystem::path path;
    explicit TempFile(const std::string &stem) {
        path = std::filesystem::temp_directory_path() /
               (stem + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++) + ".gguf");
    }
    ~TempFile() {
        std::error_code ec;
        std::filesystem::remove(path, ec);
    }
    static int &counter() {
        static int n = 0;
        return n;
    }
};

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> b(n);
    for (auto &x : b) x = static_cast<uint8_t>(rng());
    return b;
}

std::vector<uint8_t> cut(std::vector<uint8_t> b, uint64_t n) {
    REQUIRE(n <= b.size());
    b.resize(n);
    return b;
}

template <typename T>
T load(const std::vector<uint8_t> &raw, size_t i = 0) {
    T v;
    std::memcpy(&v, raw.data() + i * sizeof(T), sizeof(T));
    return v;
}

// The file every round-trip test writes: each KV type, arrays of each element type, tensors of
// several types with sizes that need padding.
struct Sample {
    std::vector<std::vector<uint8_t>> data;
    std::vector<std::string> names{"token_embd.weight", "blk.0.attn_norm.weight", "blk.0.ffn_up.weight",
                                   "blk.0.ffn_down.weight", "odd.bytes"};
    std::vector<std::vector<uint64_t>> shapes{{8, 3}, {32}, {64, 2}, {256, 1, 2}, {5, 1, 1, 1}};
    std::vector<TensorType> types{TensorType::F32, TensorType::F16, TensorType::Q8_0, TensorType::Q4_K, TensorType::I8};

    GgufWriter make(uint32_t alignment, bool streamed) {
        GgufWriter w;
        w.add_string("general.architecture", "llama");
        w.add_u8("t.u8", 200);
        w.add_i8("t.i8", -100);
        w.add_u16("t.u16", 60000);
        w.add_i16("t.i16", -30000);
        w.add_u32("t.u32", 4000000000u);
        w.add_i32("t.i32", -2000000000);
        w.add_f32("t.f32", 1.25f);
        w.add_bool("t.bool", true);
        w.add_bool("t.bool0", false);
        w.add_string("t.str", "h\xC3\xA9llo");
        w.add_string("t.empty", "");
        w.add_u64("t.u64", 1ull << 40);
        w.add_i64("t.i64", -(1ll << 40));
        w.add_f64("t.f64", -0.125);
        w.add_array("a.u8", std::vector<uint8_t>{1, 2, 255});
        w.add_array("a.i8", std::vector<int8_t>{-1, 2});
        w.add_array("a.u16", std::vector<uint16_t>{1, 65535});
        w.add_array("a.i16", std::vector<int16_t>{-2});
        w.add_array("a.u32", std::vector<uint32_t>{7, 8, 9});
        w.add_array("a.i32", std::vector<int32_t>{-1, 0, 1, 2});
        w.add_array("a.f32", std::vector<float>{0.5f, -1.5f});
        w.add_array("a.u64", std::vector<uint64_t>{1ull << 50});
        w.add_array("a.i64", std::vector<int64_t>{-5, 5});
        w.add_array("a.f64", std::vector<double>{3.5});
        w.add_array("a.empty", std::vector<uint32_t>{});
        const uint8_t bools[3] = {1, 0, 1};
        w.add_array("a.bool", MetaType::BOOL, bools, 3);
        w.add_string_array("a.str", {"a", "", "\xE2\x96\x81the", std::string(300, 'z')});
        if (alignment) w.set_alignment(alignment);
        data.clear();
        data.reserve(names.size());  // the streamed callbacks keep pointers into it
        for (size_t i = 0; i < names.size(); ++i) {
            data.push_back(random_bytes(GgufWriter::tensor_nbytes(shapes[i], types[i]), 100 + i));
            if (streamed) {
                // Hand the bytes out in small uneven pieces, as a generator of a big model would.
                const std::vector<uint8_t> *d = &data.back();
                w.add_tensor(names[i], shapes[i], types[i], [d](GgufSink &out) {
                    for (size_t p = 0; p < d->size(); p += 7)
                        out.write(d->data() + p, std::min<size_t>(7, d->size() - p));
                });
            } else {
                w.add_tensor(names[i], shapes[i], types[i], data.back());
            }
        }
        return w;
    }
};

void check_sample(const WeightSource &ws, const Sample &s, const GgufLayout &lay, uint32_t alignment) {
    const Metadata &m = ws.meta();
    CHECK(m.all().size() == 28 + (alignment ? 1 : 0));
    CHECK(m.str("general.architecture") == "llama");
    CHECK(m.find("t.u8")->type == MetaType::U8);
    CHECK(m.find("t.u8")->raw == std::vector<uint8_t>{200});
    CHECK(load<int8_t>(m.find("t.i8")->raw) == -100);
    CHECK(load<uint16_t>(m.find("t.u16")->raw) == 60000);
    CHECK(load<int16_t>(m.find("t.i16")->raw) == -30000);
    CHECK(m.u32("t.u32") == 4000000000u);
    CHECK(load<int32_t>(m.find("t.i32")->raw) == -2000000000);
    CHECK(m.f32("t.f32") == 1.25f);
    CHECK(m.boolean("t.bool") == true);
    CHECK(m.boolean("t.bool0") == false);
    CHECK(m.str("t.str") == "h\xC3\xA9llo");
    CHECK(m.str("t.empty") == "");
    CHECK(load<uint64_t>(m.find("t.u64")->raw) == (1ull << 40));
    CHECK(load<int64_t>(m.find("t.i64")->raw) == -(1ll << 40));
    CHECK(load<double>(m.find("t.f64")->raw) == -0.125);
    CHECK(m.find("t.i64")->type == MetaType::I64);
    CHECK(m.find("t.f64")->type == MetaType::F64);
    // A wrong-type getter names the key.
    CHECK_THROWS_WITH(m.u32("t.i32"), Catch::Contains("t.i32"));

    const MetaValue *a = m.find("a.u8");
    CHECK((a->type == MetaType::ARRAY && a->elem_type == MetaType::U8 && a->count == 3));
    CHECK(a->raw == std::vector<uint8_t>{1, 2, 255});
    CHECK(load<int8_t>(m.find("a.i8")->raw, 0) == -1);
    CHECK(load<uint16_t>(m.find("a.u16")->raw, 1) == 65535);
    CHECK(load<int16_t>(m.find("a.i16")->raw, 0) == -2);
    CHECK(m.i32_array("a.u32") == std::vector<int32_t>{7, 8, 9});
    CHECK(m.i32_array("a.i32") == std::vector<int32_t>{-1, 0, 1, 2});
    CHECK(m.f32_array("a.f32") == std::vector<float>{0.5f, -1.5f});
    CHECK(load<uint64_t>(m.find("a.u64")->raw) == (1ull << 50));
    CHECK(load<int64_t>(m.find("a.i64")->raw, 1) == 5);
    CHECK(load<double>(m.find("a.f64")->raw) == 3.5);
    CHECK(m.find("a.empty")->count == 0);
    CHECK(m.find("a.bool")->elem_type == MetaType::BOOL);
    CHECK(m.find("a.bool")->raw == std::vector<uint8_t>{1, 0, 1});
    REQUIRE(m.str_array("a.str"));
    CHECK(*m.str_array("a.str") == std::vector<std::string>{"a", "", "\xE2\x96\x81the", std::string(300, 'z')});
    CHECK(m.u32("general.alignment") == (alignment ? std::optional<uint32_t>(alignment) : std::nullopt));

    const uint32_t al = alignment ? alignment : 32;
    CHECK(ws.version() == 3);
    CHECK(ws.alignment() == al);
    CHECK(ws.data_offset() == lay.data_offset);
    CHECK(ws.data_offset() % al == 0);
    CHECK(ws.data_offset() >= lay.infos_end);
    CHECK(ws.data_offset() - lay.infos_end < al);
    CHECK(ws.file_size() == lay.file_size);
    REQUIRE(ws.tensors().size() == s.names.size());
    for (size_t i = 0; i < s.names.size(); ++i) {
        const TensorInfo &t = ws.tensors()[i];
        INFO("tensor " << s.names[i]);
        CHECK(t.name == s.names[i]);
        CHECK(ws.find(s.names[i]) == &t);
        CHECK(t.n_dims == s.shapes[i].size());
        for (size_t d = 0; d < 4; ++d) CHECK(t.ne[d] == (d < s.shapes[i].size() ? s.shapes[i][d] : 1));
        CHECK(t.type == s.types[i]);
        CHECK(t.offset == lay.data_offset + lay.tensor_offsets[i]);
        CHECK((t.offset - ws.data_offset()) % al == 0);
        CHECK(t.nbytes == s.data[i].size());
        std::vector<uint8_t> got(t.nbytes);
        ws.read(t, 0, got.data(), t.nbytes);
        CHECK(got == s.data[i]);
        // A partial read from inside the tensor.
        std::vector<uint8_t> part(2);
        ws.read(t, t.nbytes - 2, part.data(), 2);
        CHECK(part == std::vector<uint8_t>(s.data[i].end() - 2, s.data[i].end()));
    }
    CHECK(ws.find("missing") == nullptr);
    const TensorInfo &t0 = ws.tensors()[0];
    std::vector<uint8_t> dummy(8);
    CHECK_THROWS_AS(ws.read(t0, t0.nbytes - 4, dummy.data(), 8), Error);
}

}  // namespace

TEST_CASE("GgufWriter output round-trips through WeightSource", "[gguf]") {
    const uint32_t alignment = GENERATE(0u, 1u, 8u, 64u, 4096u);
    const bool streamed = GENERATE(false, true);
    INFO("alignment " << alignment << (streamed ? " streamed" : " buffered"));
    Sample s;
    GgufWriter w = s.make(alignment, streamed);
    const GgufLayout lay = w.layout();

    SECTION("in memory") {
        std::vector<uint8_t> bytes = w.to_bytes();
        CHECK(bytes.size() == lay.file_size);
        CHECK(std::memcmp(bytes.data(), "GGUF", 4) == 0);
        // Padding between the infos and the data, and after each tensor, is zeros.
        for (uint64_t p = lay.infos_end; p < lay.data_offset; ++p) CHECK(bytes[p] == 0);
        auto ws = open_bytes(bytes);
        check_sample(*ws, s, lay, alignment);
    }
    SECTION("through a file") {
        TempFile f("roundtrip");
        w.write_file(f.path.string());
        CHECK(std::filesystem::file_size(f.path) == lay.file_size);
        auto ws = WeightSource::open(open_file_source(f.path.string()));
        check_sample(*ws, s, lay, alignment);
        CHECK(w.to_bytes().size() == lay.file_size);
    }
}

TEST_CASE("GGUF edge cases that are valid", "[gguf]") {
    SECTION("header only, no KV, no tensors") {
        GgufWriter w;
        auto b = w.to_bytes();
        CHECK(b.size() == 24);
        auto ws = open_bytes(b);
        CHECK(ws->tensors().empty());
        CHECK(ws->meta().all().empty());
        CHECK(ws->data_offset() == 24);
    }
    SECTION("version 2 reads like version 3") {
        GgufWriter w;
        w.set_version(2);
        w.add_u32("x", 5);
        w.add_tensor("w", {32}, TensorType::F32, std::vector<uint8_t>(128, 1));
        auto ws = open_bytes(w.to_bytes());
        CHECK(ws->version() == 2);
        CHECK(ws->meta().u32("x") == 5u);
        CHECK(ws->tensors().at(0).nbytes == 128);
    }
    SECTION("n_dims 0 is a single element, like llama.cpp") {
        GgufWriter w;
        GgufTensorSpec s;
        s.name = "scalar";
        s.type = static_cast<uint32_t>(TensorType::F32);
        s.nbytes = 4;
        w.add_tensor_spec(s);
        auto ws = open_bytes(w.to_bytes());
        const TensorInfo &t = ws->tensors().at(0);
        CHECK(t.n_dims == 0);
        CHECK(t.n_elements() == 1);
        CHECK(t.nbytes == 4);
        CHECK(t.shape_string() == "[1]");
    }
    SECTION("trailing bytes after the last tensor are ignored") {
        GgufWriter w;
        w.add_tensor("w", {32}, TensorType::Q8_0, std::vector<uint8_t>(34, 3));
        auto b = w.to_bytes();
        b.resize(b.size() + 1000, 0xEE);
        CHECK(open_bytes(b)->tensors().size() == 1);
    }
    SECTION("an unpadded last tensor still fits") {
        GgufWriter w;
        w.add_tensor("w", {3}, TensorType::F32, std::vector<uint8_t>(12, 3));
        auto b = w.to_bytes();
        const GgufLayout lay = w.layout();
        b.resize(lay.data_offset + 12);
        CHECK(open_bytes(b)->tensors().at(0).nbytes == 12);
    }
}

TEST_CASE("GgufWriter rejects inconsistent tensors", "[gguf]") {
    GgufWriter w;
    auto status = [](const std::function<void()> &f) {
        try {
            f();
        } catch (const Error &e) {
            return e.status();
        }
        return LLM_OK;
    };
    CHECK(status([&] { w.add_tensor("a", {33}, TensorType::Q8_0, std::vector<uint8_t>(34)); }) == LLM_ERR_INTERNAL);
    CHECK(status([&] { w.add_tensor("a", {4}, TensorType::F32, std::vector<uint8_t>(15)); }) == LLM_ERR_INTERNAL);
    CHECK(status([&] { w.add_array("a", MetaType::STRING, nullptr, 0); }) == LLM_ERR_INTERNAL);
    GgufWriter w2;
    w2.add_tensor("short", {4}, TensorType::F32, [](GgufSink &out) { out.write("abc", 3); });
    CHECK(status([&] { w2.to_bytes(); }) == LLM_ERR_INTERNAL);
    TempFile partial("partial");
    CHECK(status([&] { w2.write_file(partial.path.string()); }) == LLM_ERR_INTERNAL);
    CHECK_FALSE(std::filesystem::exists(partial.path));  // no half-written file is left behind
    GgufWriter w3;
    w3.add_u32("x", 1);
    TempFile f("unwritable");
    CHECK(status([&] { w3.write_file((f.path / "no" / "such" / "dir.gguf").string()); }) == LLM_ERR_IO);
}

// ---- malformed files ------------------------------------------------------------------------------

namespace {

// The fixed 24-byte header with arbitrary values.
std::vector<uint8_t> header(const char *magic, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    GgufBytes b;
    b.put(magic, 4).u32(version).u64(n_tensors).u64(n_kv);
    return b.bytes;
}

// Padding KV so the count bounds (remaining bytes / minimum entry size) do not fire before the
// check a case is about.
void pad(GgufWriter &w) { w.add_string("general.name", std::string(200, 'p')); }

// A writer with padding, one tensor 'w' (written through a spec so a case can break any field).
std::vector<uint8_t> one_tensor(const std::function<void(GgufTensorSpec &)> &edit,
                                const std::function<void(GgufWriter &)> &before = {}) {
    GgufWriter w;
    pad(w);
    if (before) before(w);
    GgufTensorSpec s;
    s.name = "w";
    s.ne = {32, 2};
    s.type = static_cast<uint32_t>(TensorType::F32);
    s.nbytes = 256;
    edit(s);
    w.add_tensor_spec(s);
    return w.to_bytes();
}

// A writer with padding and then a KV 'target' added by kv(); cut(lay, bytes) may truncate.
std::vector<uint8_t> target_kv(const std::function<void(GgufWriter &)> &kv,
                               const std::function<uint64_t(const GgufLayout &)> &cut_at = {}) {
    GgufWriter w;
    pad(w);
    w.add_u32("a.b", 1);
    kv(w);
    w.add_tensor("w", {32}, TensorType::F32, std::vector<uint8_t>(128, 0));
    auto b = w.to_bytes();
    if (cut_at) b = cut(std::move(b), cut_at(w.layout()));
    return b;
}

uint64_t last_kv(const GgufLayout &l) { return l.kv_offsets.back(); }

struct BadFile {
    std::string what;
    std::function<std::vector<uint8_t>()> make;
    std::string expect;  // substring of the error message
};

std::vector<BadFile> bad_files() {
    std::vector<BadFile> v;
    auto add = [&](std::string what, std::string expect, std::function<std::vector<uint8_t>()> make) {
        v.push_back({std::move(what), std::move(make), std::move(expect)});
    };
    const uint64_t huge = 1ull << 62;

    // -- header
    add("empty file", "not a GGUF file", [] { return std::vector<uint8_t>{}; });
    add("three bytes", "not a GGUF file", [] { return std::vector<uint8_t>{'G', 'G', 'U'}; });
    add("bad magic", "bad magic", [] { return header("GGUX", 3, 0, 0); });
    add("lowercase magic", "bad magic", [] { return header("gguf", 3, 0, 0); });
    add("version 0", "version 0", [] { return header("GGUF", 0, 0, 0); });
    add("version 1", "version 1 is no longer supported", [] { return header("GGUF", 1, 0, 0); });
    add("version 4", "version 4", [] { return header("GGUF", 4, 0, 0); });
    add("version 0xFFFF", "version 65535", [] { return header("GGUF", 0xFFFF, 0, 0); });
    add("byte-swapped version 3", "wrong byte order", [] { return header("GGUF", 0x03000000, 0, 0); });
    add("byte-swapped version 2", "wrong byte order", [] { return header("GGUF", 0x02000000, 0, 0); });
    add("truncated in the version", "version needs 4 bytes", [] { return cut(header("GGUF", 3, 0, 0), 6); });
    add("truncated in the tensor count", "tensor count needs 8", [] { return cut(header("GGUF", 3, 0, 0), 12); });
    add("truncated in the metadata count", "metadata count needs 8", [] { return cut(header("GGUF", 3, 0, 0), 20); });
    add("n_kv absurdly large", "metadata count 4611686018427387904", [] { return header("GGUF", 3, 0, huge); });
    add("n_kv negative", "metadata count -1", [] { return header("GGUF", 3, 0, ~0ull); });
    add("n_kv one more than fits", "metadata count 1 is impossible", [] {
        auto b = header("GGUF", 3, 0, 1);
        b.resize(b.size() + 13);  // one KV needs at least 14 bytes
        return b;
    });
    add("n_tensors absurdly large", "tensor count 4611686018427387904", [] { return header("GGUF", 3, huge, 0); });
    add("n_tensors negative", "tensor count -9223372036854775808", [] { return header("GGUF", 3, 1ull << 63, 0); });
    add("n_kv larger than the KVs present", "metadata key #2", [] {
        GgufWriter w;
        pad(w);
        w.add_u32("x", 1);
        w.set_n_kv(3);
        return w.to_bytes();
    });

    // -- truncated KV section
    add("truncated inside a KV key length", "metadata key #2 length", [] {
        return target_kv([](GgufWriter &w) { w.add_u32("target", 7); },
                         [](const GgufLayout &l) { return last_kv(l) + 3; });
    });
    add("truncated inside a KV key", "metadata key #2 needs 6 bytes", [] {
        return target_kv([](GgufWriter &w) { w.add_u32("target", 7); },
                         [](const GgufLayout &l) { return last_kv(l) + 8 + 3; });
    });
    add("truncated inside a KV type", "type of 'target'", [] {
        return target_kv([](GgufWriter &w) { w.add_u32("target", 7); },
                         [](const GgufLayout &l) { return last_kv(l) + 8 + 6 + 2; });
    });
    add("truncated inside a KV u32 value", "value of 'target' needs 4 bytes", [] {
        return target_kv([](GgufWriter &w) { w.add_u32("target", 7); },
                         [](const GgufLayout &l) { return last_kv(l) + 8 + 6 + 4 + 3; });
    });
    add("truncated inside a KV f64 value", "value of 'target' needs 8 bytes", [] {
        return target_kv([](GgufWriter &w) { w.add_f64("target", 7); },
                         [](const GgufLayout &l) { return last_kv(l) + 8 + 6 + 4 + 5; });
    });
    add("truncated inside a string value length", "value of 'target' length", [] {
        return target_kv([](GgufWriter &w) { w.add_string("target", "hello"); },
                         [](const GgufLayout &l) { return last_kv(l) + 8 + 6 + 4 + 4; });
    });
    add("truncated inside a string value", "value of 'target' needs 5 bytes", [] {
        return target_kv([](GgufWriter &w) { w.add_string("target", "hello"); },
                         [](const GgufLayout &l) { return last_kv(l) + 8 + 6 + 4 + 8 + 2; });
    });
    add("truncated inside an array header", "array length of 'target'", [] {
        return target_kv(
            [](GgufWriter &w) {
                w.add_array("target", std::vector<uint32_t>{1, 2, 3});
            },
            [](const GgufLayout &l) { return last_kv(l) + 8 + 6 + 4 + 4 + 3; });
    });
    add("truncated inside a u32 array", "key 'target': array of 12 bytes does not fit", [] {
        return target_kv(
            [](GgufWriter &w) {
                w.add_array("target", std::vector<uint32_t>{1, 2, 3});
            },
            [](const GgufLayout &l) { return last_kv(l) + 8 + 6 + 4 + 4 + 8 + 5; });
    });
    add("truncated inside a string array", "element of 'target'", [] {
        return target_kv(
            [](GgufWriter &w) {
                w.add_string_array("target", {"one", "two", "three"});
            },
            [](const GgufLayout &l) { return last_kv(l) + 8 + 6 + 4 + 4 + 8 + 11 + 11 + 3; });
    });

    // -- bad KV contents
    add("absurd key length 2^62", "metadata key #1: string length 4611686018427387904 exceeds 1 GiB", [] {
        GgufWriter w;
        pad(w);
        w.add_kv_bytes(GgufBytes().u64(1ull << 62).put("abc", 3).u32(4).u32(0).bytes);
        return w.to_bytes();
    });
    add("key length past the end", "metadata key #1 needs 5000 bytes", [] {
        GgufWriter w;
        pad(w);
        w.add_kv_bytes(GgufBytes().u64(5000).put("abcdefgh", 8).u32(4).u32(0).bytes);
        return w.to_bytes();
    });
    add("absurd string value length 2^62", "value of 'target': string length 4611686018427387904 exceeds", [] {
        return target_kv([](GgufWriter &w) { w.add_kv_raw("target", 8, GgufBytes().u64(1ull << 62).u32(0).bytes); });
    });
    add("string value length past the end", "value of 'target' needs 1048576 bytes", [] {
        return target_kv([](GgufWriter &w) { w.add_kv_raw("target", 8, GgufBytes().u64(1 << 20).u32(0).bytes); });
    });
    add("absurd array length 2^62", "key 'target': array length 4611686018427387904 exceeds 2^30", [] {
        return target_kv([](GgufWriter &w) { w.add_kv_raw("target", 9, GgufBytes().u32(4).u64(1ull << 62).bytes); });
    });
    add("array length 2^30 + 1", "key 'target': array length 1073741825 exceeds", [] {
        return target_kv(
            [](GgufWriter &w) { w.add_kv_raw("target", 9, GgufBytes().u32(0).u64((1ull << 30) + 1).bytes); });
    });
    add("u64 array length past the end", "key 'target': array of 8388608 bytes does not fit", [] {
        return target_kv([](GgufWriter &w) { w.add_kv_raw("target", 9, GgufBytes().u32(10).u64(1 << 20).bytes); });
    });
    add("string array count past the end", "key 'target': array of 536870912 strings does not fit", [] {
        return target_kv([](GgufWriter &w) { w.add_kv_raw("target", 9, GgufBytes().u32(8).u64(1 << 29).bytes); });
    });
    add("array element string too long", "element of 'target': string length 1099511627776 exceeds", [] {
        return target_kv([](GgufWriter &w) {
            w.add_kv_raw("target", 9, GgufBytes().u32(8).u64(2).str("ok").u64(1ull << 40).bytes);
        });
    });
    add("invalid KV type 13", "'target' has invalid type 13", [] {
        return target_kv([](GgufWriter &w) { w.add_kv_raw("target", 13, {0, 0, 0, 0}); });
    });
    add("invalid KV type 0xFFFFFFFF", "'target' has invalid type 4294967295", [] {
        return target_kv([](GgufWriter &w) { w.add_kv_raw("target", 0xFFFFFFFF, {0, 0, 0, 0}); });
    });
    add("nested array", "key 'target': nested arrays", [] {
        return target_kv(
            [](GgufWriter &w) { w.add_kv_raw("target", 9, GgufBytes().u32(9).u64(1).u32(4).u64(1).u32(5).bytes); });
    });
    add("invalid array element type 13", "key 'target': invalid array element type 13", [] {
        return target_kv([](GgufWriter &w) { w.add_kv_raw("target", 9, GgufBytes().u32(13).u64(1).u32(0).bytes); });
    });
    add("empty key", "metadata key #2 is empty", [] { return target_kv([](GgufWriter &w) { w.add_u32("", 1); }); });
    add("duplicate key", "duplicate metadata key 'a.b'",
        [] { return target_kv([](GgufWriter &w) { w.add_u32("a.b", 2); }); });
    add("duplicate key with another type", "duplicate metadata key 'general.name'",
        [] { return target_kv([](GgufWriter &w) { w.add_string("general.name", "x"); }); });
    add("general.alignment as u64", "general.alignment must be u32, got u64",
        [] { return target_kv([](GgufWriter &w) { w.add_u64("general.alignment", 32); }); });
    add("general.alignment as i32", "general.alignment must be u32, got i32",
        [] { return target_kv([](GgufWriter &w) { w.add_i32("general.alignment", 32); }); });
    add("general.alignment as string", "general.alignment must be u32, got string",
        [] { return target_kv([](GgufWriter &w) { w.add_string("general.alignment", "32"); }); });
    add("general.alignment not a power of two", "general.alignment 48 is not a power of two",
        [] { return target_kv([](GgufWriter &w) { w.add_u32("general.alignment", 48); }); });
    add("general.alignment zero", "general.alignment 0 is not",
        [] { return target_kv([](GgufWriter &w) { w.add_u32("general.alignment", 0); }); });

    // -- tensor infos
    add("n_tensors larger than the infos present", "name of tensor #1", [] {
        GgufWriter w;
        pad(w);
        w.set_n_tensors(2);
        w.add_tensor("w", {4}, TensorType::F32, std::vector<uint8_t>(16));
        auto b = w.to_bytes();
        return cut(std::move(b), w.layout().infos_end);  // second info would start here
    });
    add("truncated inside a tensor name", "name of tensor #0 needs 6 bytes", [] {
        GgufWriter w;
        pad(w);
        w.add_tensor("weight", {32}, TensorType::F32, std::vector<uint8_t>(128));
        return cut(w.to_bytes(), w.layout().tensor_info_offsets[0] + 8 + 2);
    });
    add("truncated inside a tensor shape", "tensor 'w' shape", [] {
        GgufWriter w;
        pad(w);
        w.add_tensor("w", {32, 4}, TensorType::F32, std::vector<uint8_t>(512));
        return cut(w.to_bytes(), w.layout().tensor_info_offsets[0] + 8 + 1 + 4 + 8 + 3);
    });
    add("truncated inside a tensor n_dims", "tensor 'w' n_dims", [] {
        GgufWriter w;
        pad(w);
        w.add_tensor("w", {32, 4}, TensorType::F32, std::vector<uint8_t>(512));
        return cut(w.to_bytes(), w.layout().tensor_info_offsets[0] + 8 + 1 + 2);
    });
    add("truncated inside a tensor type", "tensor 'w' type", [] {
        GgufWriter w;
        pad(w);
        w.add_tensor("w", {32}, TensorType::F32, std::vector<uint8_t>(128));
        return cut(w.to_bytes(), w.layout().tensor_info_offsets[0] + 8 + 1 + 4 + 8 + 1);
    });
    add("truncated inside a tensor offset", "tensor 'w' offset", [] {
        GgufWriter w;
        pad(w);
        w.add_tensor("w", {32}, TensorType::F32, std::vector<uint8_t>(128));
        return cut(w.to_bytes(), w.layout().infos_end - 1);
    });
    add("absurd tensor name length", "name of tensor #0: string length 4611686018427387904", [] {
        GgufWriter w;
        pad(w);
        w.add_tensor_info_bytes(GgufBytes().u64(1ull << 62).put("w", 1).u32(1).u64(4).u32(0).u64(0).bytes);
        return w.to_bytes();
    });
    add("tensor name 64 bytes", "tensor #0 name is 64 bytes long",
        [] { return one_tensor([](GgufTensorSpec &s) { s.name = std::string(64, 'n'); }); });
    add("tensor name 1000 bytes", "tensor #0 name is 1000 bytes long",
        [] { return one_tensor([](GgufTensorSpec &s) { s.name = std::string(1000, 'n'); }); });
    add("duplicate tensor names", "duplicate tensor name 'w'", [] {
        GgufWriter w;
        pad(w);
        w.add_tensor("w", {8}, TensorType::F32, std::vector<uint8_t>(32));
        w.add_tensor("w", {8}, TensorType::F32, std::vector<uint8_t>(32));
        return w.to_bytes();
    });
    add("n_dims 5", "tensor 'w' has 5 dimensions", [] {
        return one_tensor([](GgufTensorSpec &s) { s.ne = {32, 2, 1, 1, 1}; });
    });
    add("n_dims 2^32-1", "tensor 'w' has 4294967295 dimensions",
        [] { return one_tensor([](GgufTensorSpec &s) { s.n_dims = 0xFFFFFFFF; }); });
    add("negative dimension", "tensor 'w' dimension 1 is -3", [] {
        return one_tensor([](GgufTensorSpec &s) { s.ne = {32, static_cast<uint64_t>(-3)}; });
    });
    add("zero dimension", "tensor 'w' dimension 0 is 0", [] {
        return one_tensor([](GgufTensorSpec &s) { s.ne = {0, 2}; });
    });
    add("element count overflow 2^40 x 2^40", "tensor 'w' element count overflows", [] {
        return one_tensor([](GgufTensorSpec &s) { s.ne = {1ull << 40, 1ull << 40}; });
    });
    add("element count 2^63", "tensor 'w' element count overflows", [] {
        return one_tensor([](GgufTensorSpec &s) { s.ne = {1ull << 32, 1ull << 31}; });
    });
    add("byte size overflow", "tensor 'w' byte size overflows", [] {
        return one_tensor([](GgufTensorSpec &s) {
            s.ne = {1ull << 61, 2};
            s.type = static_cast<uint32_t>(TensorType::F64);
        });
    });
    add("row length not a multiple of the Q8_0 block",
        "tensor 'w' row length 48 is not a multiple of the Q8_0 block size 32", [] {
            return one_tensor([](GgufTensorSpec &s) {
                s.ne = {48, 2};
                s.type = static_cast<uint32_t>(TensorType::Q8_0);
            });
        });
    add("row length not a multiple of the Q4_K block",
        "tensor 'w' row length 128 is not a multiple of the Q4_K block size 256", [] {
            return one_tensor([](GgufTensorSpec &s) {
                s.ne = {128, 2};
                s.type = static_cast<uint32_t>(TensorType::Q4_K);
            });
        });
    add("misaligned offset", "tensor 'w' offset 1 is not a multiple of the alignment 32",
        [] { return one_tensor([](GgufTensorSpec &s) { s.offset = 1; }); });
    add("offset aligned to 32 but not to general.alignment 64",
        "tensor 'w' offset 32 is not a multiple of the alignment 64", [] {
            return one_tensor([](GgufTensorSpec &s) { s.offset = 32; }, [](GgufWriter &w) { w.set_alignment(64); });
        });
    add("first tensor not at offset 0", "tensor 'w' has offset 256, expected 0",
        [] { return one_tensor([](GgufTensorSpec &s) { s.offset = 256; }); });
    add("non-contiguous offset (gap)", "tensor 'b' has offset 64, expected 32", [] {
        GgufWriter w;
        pad(w);
        w.add_tensor("a", {8}, TensorType::F32, std::vector<uint8_t>(32));
        GgufTensorSpec s;
        s.name = "b";
        s.ne = {8};
        s.nbytes = 32;
        s.offset = 64;
        w.add_tensor_spec(s);
        return w.to_bytes();
    });
    add("overlapping offsets", "tensor 'b' has offset 0, expected 32", [] {
        GgufWriter w;
        pad(w);
        w.add_tensor("a", {8}, TensorType::F32, std::vector<uint8_t>(32));
        GgufTensorSpec s;
        s.name = "b";
        s.ne = {8};
        s.nbytes = 32;
        s.offset = 0;
        w.add_tensor_spec(s);
        return w.to_bytes();
    });
    add("absurd offset", "tensor 'w' has offset 9223372036854775808",
        [] { return one_tensor([](GgufTensorSpec &s) { s.offset = 1ull << 63; }); });

    // -- data section
    add("file ends at the tensor infos", "tensor data would start at", [] {
        GgufWriter w;
        pad(w);
        w.add_tensor("w", {32}, TensorType::F32, std::vector<uint8_t>(128));
        const GgufLayout lay = w.layout();
        REQUIRE(lay.infos_end % 32 != 0);  // so the data would start past the end
        return cut(w.to_bytes(), lay.infos_end);
    });
    add("tensor data past end of file", "tensor 'w' data", [] {
        GgufWriter w;
        pad(w);
        w.add_tensor("w", {32}, TensorType::F32, std::vector<uint8_t>(128));
        return cut(w.to_bytes(), w.layout().data_offset + 100);
    });
    add("second tensor's data past end of file", "tensor 'b' data", [] {
        GgufWriter w;
        pad(w);
        w.add_tensor("a", {32}, TensorType::F32, std::vector<uint8_t>(128));
        w.add_tensor("b", {32}, TensorType::Q8_0, std::vector<uint8_t>(34));
        const GgufLayout lay = w.layout();
        return cut(w.to_bytes(), lay.data_offset + lay.tensor_offsets[1] + 33);
    });
    add("huge tensor in a small file", "tensor 'w' data", [] {
        return one_tensor([](GgufTensorSpec &s) {
            s.ne = {1ull << 20, 1ull << 20};
            s.nbytes = 0;  // the writer puts no data; the info claims 4 TiB
        });
    });
    return v;
}

}  // namespace

TEST_CASE("malformed GGUF files fail with LLM_ERR_FORMAT naming the field", "[gguf]") {
    const std::vector<BadFile> cases = bad_files();
    REQUIRE(cases.size() >= 20);
    for (const BadFile &c : cases) {
        INFO("case: " << c.what);
        std::vector<uint8_t> bytes = c.make();
        int32_t status = LLM_OK;
        std::string msg;
        try {
            auto ws = open_bytes(bytes);
        } catch (const Error &e) {
            status = e.status();
            msg = e.what();
        }
        INFO("message: " << msg);
        CHECK(status == LLM_ERR_FORMAT);
        CHECK_THAT(msg, Catch::Contains(c.expect));
    }
}

TEST_CASE("a tensor type id the library does not know is LLM_ERR_UNSUPPORTED naming tensor and id", "[gguf]") {
    // Removed ids (4, 5, 31, 36), the first id after the last known type (43), and beyond.
    for (uint32_t id : {4u, 5u, 31u, 36u, 43u, 44u, 99u, 0xFFFFFFFFu}) {
        INFO("type id " << id);
        const std::vector<uint8_t> bytes = one_tensor([id](GgufTensorSpec &s) { s.type = id; });
        int32_t status = LLM_OK;
        std::string msg;
        try {
            auto ws = open_bytes(bytes);
        } catch (const Error &e) {
            status = e.status();
            msg = e.what();
        }
        CHECK(status == LLM_ERR_UNSUPPORTED);
        CHECK_THAT(msg, Catch::Contains("tensor 'w' has unknown type id " + std::to_string(id) + ","));
    }
    // Through the C API too: the model load reports it with the same status and message.
    const std::vector<uint8_t> bytes = one_tensor([](GgufTensorSpec &s) { s.type = 43; });
    char path[] = "/tmp/llm_type43_XXXXXX";
    const int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    REQUIRE(write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
    close(fd);
    llm_model_params mp;
    llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
    llm_model *m = nullptr;
    const int32_t st = llm_model_load(path, &mp, &m);
    const std::string err = st == LLM_OK ? "" : llm_last_error();
    llm_model_free(m);
    std::remove(path);
    CHECK(st == LLM_ERR_UNSUPPORTED);
    CHECK_THAT(err, Catch::Contains("tensor 'w' has unknown type id 43"));
}

TEST_CASE("every truncation of a valid file is LLM_ERR_FORMAT", "[gguf]") {
    Sample s;
    GgufWriter w = s.make(64, false);
    const std::vector<uint8_t> full = w.to_bytes();
    const GgufLayout lay = w.layout();
    // The last tensor ends exactly here; any shorter file must be rejected, never read past its end.
    const uint64_t last_end = lay.data_offset + lay.tensor_offsets.back() + s.data.back().size();
    for (uint64_t n = 0; n < last_end; ++n) {
        int32_t status = LLM_OK;
        try {
            open_bytes(cut(full, n));
        } catch (const Error &e) {
            status = e.status();
        }
        if (status != LLM_ERR_FORMAT) FAIL("truncated to " << n << " bytes: status " << status);
    }
    CHECK(open_bytes(cut(full, last_end))->tensors().size() == s.names.size());
}

// ---- the host's llm_io --------------------------------------------------------------------------

namespace {

struct HostFile {
    std::vector<uint8_t> bytes;
    int calls = 0;
    int fail_at = 0;  // 1-based read_at call that fails; 0: none
    int32_t fail_status = LLM_ERR_IO;
    int closes = 0;

    llm_io io() {
        llm_io io{};
        io.version = LLM_IO_VERSION;
        io.user = this;
        io.size = [](void *u) -> uint64_t { return static_cast<HostFile *>(u)->bytes.size(); };
        io.read_at = [](void *u, uint64_t offset, void *dst, uint64_t n) -> int32_t {
            auto *h = static_cast<HostFile *>(u);
            if (++h->calls == h->fail_at) return h->fail_status;
            if (offset > h->bytes.size() || n > h->bytes.size() - offset) return LLM_ERR_IO;
            std::memcpy(dst, h->bytes.data() + offset, n);
            return LLM_OK;
        };
        io.close = [](void *u) { ++static_cast<HostFile *>(u)->closes; };
        return io;
    }
};

// Opens the file through the host's callbacks and reads every tensor; the status of the first error.
int32_t load_all(HostFile &h) {
    try {
        auto ws = WeightSource::open(make_io_source(h.io()));
        for (const TensorInfo &t : ws->tensors()) {
            std::vector<uint8_t> buf(t.nbytes);
            ws->read(t, 0, buf.data(), t.nbytes);
        }
    } catch (const Error &e) {
        return e.status();
    }
    return LLM_OK;
}

}  // namespace

TEST_CASE("a failing llm_io read gives LLM_ERR_IO and closes once", "[gguf]") {
    // A header larger than the reader's window, so parsing it takes several read_at calls.
    GgufWriter w;
    w.add_string("general.name", std::string(150000, 'x'));
    w.add_string_array("tokenizer.ggml.tokens", std::vector<std::string>(3000, "token"));
    w.add_tensor("a", {64, 4}, TensorType::F32, random_bytes(1024, 1));
    w.add_tensor("b", {32, 2}, TensorType::Q8_0, random_bytes(68, 2));
    w.add_tensor("c", {16}, TensorType::F16, random_bytes(32, 3));

    HostFile ok;
    ok.bytes = w.to_bytes();
    REQUIRE(load_all(ok) == LLM_OK);
    CHECK(ok.closes == 1);
    const int total = ok.calls;
    REQUIRE(total >= 6);  // >= 3 header windows + 3 tensors

    const int32_t status = GENERATE(LLM_ERR_IO, LLM_ERR_INTERNAL, -1000, 1);
    for (int n = 1; n <= total; ++n) {
        INFO("read_at call " << n << " of " << total << " fails with " << status);
        HostFile h;
        h.bytes = ok.bytes;
        h.fail_at = n;
        h.fail_status = status;
        CHECK(load_all(h) == LLM_ERR_IO);
        CHECK(h.calls == n);  // nothing is retried or read after the failure
        CHECK(h.closes == 1);
    }
}

TEST_CASE("llm_io edge cases", "[gguf]") {
    SECTION("a malformed file through llm_io is still closed once") {
        HostFile h;
        h.bytes = header("GGUF", 7, 0, 0);
        CHECK(load_all(h) == LLM_ERR_FORMAT);
        CHECK(h.closes == 1);
    }
    SECTION("an empty host file") {
        HostFile h;
        CHECK(load_all(h) == LLM_ERR_FORMAT);
        CHECK(h.calls == 0);
        CHECK(h.closes == 1);
    }
    SECTION("close may be NULL") {
        HostFile h;
        GgufWriter w;
        w.add_tensor("w", {4}, TensorType::F32, std::vector<uint8_t>(16, 9));
        h.bytes = w.to_bytes();
        llm_io io = h.io();
        io.close = nullptr;
        auto ws = WeightSource::open(make_io_source(io));
        CHECK(ws->tensors().size() == 1);
        ws.reset();
        CHECK(h.closes == 0);
    }
    SECTION("a host that reports a size larger than its data") {
        HostFile h;
        GgufWriter w;
        w.add_tensor("w", {4}, TensorType::F32, std::vector<uint8_t>(16, 9));
        h.bytes = w.to_bytes();
        llm_io io = h.io();
        io.size = [](void *u) -> uint64_t { return static_cast<HostFile *>(u)->bytes.size() + 100; };
        int32_t st = LLM_OK;
        try {
            auto ws = WeightSource::open(make_io_source(io));
        } catch (const Error &e) {
            st = e.status();
        }
        CHECK(st == LLM_ERR_IO);  // its read_at refuses the read past its data
        CHECK(h.closes == 1);
    }
}

TEST_CASE("file source errors are LLM_ERR_IO", "[gguf]") {
    auto status_of = [](const std::string &path) {
        try {
            open_file_source(path);
        } catch (const Error &e) {
            return e.status();
        }
        return LLM_OK;
    };
    const auto dir = std::filesystem::temp_directory_path();
    CHECK(status_of((dir / "libllm-no-such-file-7d1c.gguf").string()) == LLM_ERR_IO);
    CHECK(status_of("") == LLM_ERR_IO);
    CHECK(status_of(dir.string()) == LLM_ERR_IO);  // a directory

    // An empty file opens as a source but is not a GGUF file.
    TempFile f("empty");
    {
        std::FILE *fp = std::fopen(f.path.c_str(), "wb");
        REQUIRE(fp);
        std::fclose(fp);
    }
    int32_t st = LLM_OK;
    try {
        WeightSource::open(open_file_source(f.path.string()));
    } catch (const Error &e) {
        st = e.status();
    }
    CHECK(st == LLM_ERR_FORMAT);
}
