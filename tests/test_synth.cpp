// The synthetic model writer's --from-type: a q4_0 file made from the q8_0 file's values holds, row
// by row, the q4_0 quantization of exactly those values (checked against the q8_0 file's dequantized
// rows with q4_0's error bound), while a q4_0 file of the same seed alone holds other weights.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include "gguf/weight_source.h"
#include "kernels/dequant.h"
#include "kernels/fp16.h"
#include "synth_model.h"

using namespace llm;
namespace fs = std::filesystem;

namespace {

struct TempDir {
    fs::path path = fs::temp_directory_path() / ("llm-synth-" + std::to_string(::getpid()));
    TempDir() { fs::create_directories(path); }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

std::vector<float> dequant_row(const WeightSource &w, const TensorInfo &t, uint64_t row) {
    std::vector<uint8_t> bytes(t.row_bytes());
    w.read(t, row * t.row_bytes(), bytes.data(), bytes.size());
    std::vector<float> f(t.ne[0]);
    dequantize_row(t.type, bytes.data(), f.data(), static_cast<int64_t>(t.ne[0]));
    return f;
}

// Elements of q4 (a q4_0 row as read back) off the q4_0 quantization of ref by more than its bound:
// half a step, a whole step where q4_0 clamps (+8 steps is not representable, +7 is the most), plus
// the scale's f16 rounding. The block scale is recomputed from ref, independently of the file.
int64_t off_q4_0(const std::vector<float> &ref, const std::vector<float> &q4) {
    int64_t bad = 0;
    for (size_t b = 0; b < ref.size(); b += 32) {
        float amax = 0;
        for (size_t j = b; j < b + 32; ++j) amax = std::max(amax, std::fabs(ref[j]));
        const float step = amax / 8.0f;
        for (size_t j = b; j < b + 32; ++j) {
            const float err = std::fabs(ref[j] - q4[j]);
            const float bound = (std::fabs(ref[j]) > 7.5f * step ? 1.0f : 0.5f) * step + amax * 2e-3f + 1e-9f;
            if (err > bound) ++bad;
        }
    }
    return bad;
}

}  // namespace

TEST_CASE("the synthetic writer's from_type writes the same weights at another precision", "[synth]") {
    TempDir d;
    const tools::SynthShape *sh = tools::find_shape("tiny-deep");
    REQUIRE(sh);
    const std::string q8 = (d.path / "q8_0.gguf").string(), q4 = (d.path / "q4_0-from-q8_0.gguf").string(),
                      q4_plain = (d.path / "q4_0.gguf").string();
    tools::write_synth_model(*sh, "q8_0", q8);
    tools::write_synth_model(*sh, "q4_0", q4, 1, "q8_0");
    tools::write_synth_model(*sh, "q4_0", q4_plain);
    auto w8 = WeightSource::open_file(q8), w4 = WeightSource::open_file(q4), wp = WeightSource::open_file(q4_plain);
    REQUIRE(w8->tensors().size() == w4->tensors().size());

    int checked = 0;
    for (const char *name : {"token_embd.weight", "blk.0.attn_q.weight", "blk.11.attn_v.weight",
                             "blk.23.ffn_down.weight", "output.weight"}) {
        CAPTURE(name);
        const TensorInfo *t8 = w8->find(name), *t4 = w4->find(name), *tp = wp->find(name);
        REQUIRE(t8);
        REQUIRE(t4);
        REQUIRE(tp);
        CHECK(t8->type == TensorType::Q8_0);
        CHECK(t4->type == TensorType::Q4_0);
        REQUIRE(t4->ne[0] == t8->ne[0]);
        REQUIRE(t4->ne[1] == t8->ne[1]);
        for (uint64_t row : {uint64_t{0}, t8->ne[1] / 2, t8->ne[1] - 1}) {
            CAPTURE(row);
            const std::vector<float> a = dequant_row(*w8, *t8, row), b = dequant_row(*w4, *t4, row);
            CHECK(off_q4_0(a, b) == 0);
            // Not a bound any row meets: the plain q4_0 file of the same seed has other values.
            CHECK(off_q4_0(a, dequant_row(*wp, *tp, row)) > static_cast<int64_t>(a.size() / 2));
            ++checked;
        }
    }
    CHECK(checked == 15);
    // The norms (f32 ones) are the same tensors in both.
    CHECK(w4->find("output_norm.weight")->type == TensorType::F32);
}

TEST_CASE("quantize_row_q4_0_ref maps a block's extreme to -8 and rounds the rest", "[synth]") {
    std::vector<float> x(32);
    for (int j = 0; j < 32; ++j) x[j] = 0.1f * static_cast<float>(j - 10);  // extreme 2.1 at j = 31
    uint8_t blk[18];
    tools::quantize_row_q4_0_ref(x.data(), blk, 32);
    std::vector<float> y(32);
    dequantize_row(TensorType::Q4_0, blk, y.data(), 32);
    const float step = 2.1f / 8.0f;
    CHECK(y[31] == Approx(2.1f).epsilon(1e-3));  // -8 * (2.1 / -8)
    for (int j = 0; j < 32; ++j) CHECK(std::fabs(y[j] - x[j]) <= 0.5f * step + 1e-3f);
    // An all-zero block has scale 0 and decodes to zeros.
    std::vector<float> z(32, 0.0f);
    tools::quantize_row_q4_0_ref(z.data(), blk, 32);
    dequantize_row(TensorType::Q4_0, blk, y.data(), 32);
    for (float v : y) CHECK(v == 0.0f);
}
