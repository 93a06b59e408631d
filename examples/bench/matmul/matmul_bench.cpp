// matmul-bench: GFLOP/s of one weight matrix times P activation rows through llm::matmul (the path a
// model's prefill and decode take: activation conversion, the chosen tiles, the thread split), for
// the matrix shapes of a model. A benchmark, not a test: run it on a quiet machine and compare
// variants as ratios within one run.
//
// It isolates the matrix product from the rest of a forward pass, so a change to the tiles can be
// judged per shape (llm-bench gives the whole model). A matrix that fits the caches (a 2048 x 5632
// F16 matrix is 23 MB) stays there from one product to the next, unlike a model's layers, which come
// from RAM once per sub-batch; --cold cycles through copies of it totalling at least 512 MB, so each
// product reads its weights from RAM as a model's does.
//
// Weights are random: F16/F32 values in [-1, 1), Q8_0 rows quantized from such values by the
// library's own activation quantizer (the same block format), IQ4_XS blocks of random bytes with a
// small scale (the kernels' time does not depend on the values; the library has no IQ4_XS
// quantizer). A type the active kernels pack into row groups (kernels/repack.h) is packed, as a
// resident model's is; --file-layout leaves it as a streamed block is, so both decode paths are timed.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../../tools/common.h"
#include "core/thread_pool.h"
#include "gguf/types.h"
#include "kernels/fp16.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul.h"
#include "kernels/repack.h"

namespace {

const char *kUsage =
    "usage: matmul-bench [options]\n"
    "  --type T        f16 | f32 | q8_0 | q4_0 | q4_k | iq4_xs (default f16); a type the\n"
    "                  active kernels pack into row groups is packed, as a resident model's is\n"
    "  --file-layout   leave such a type's rows in the file's layout, as a streamed block's are\n"
    "  --shape I,O     one matrix, I inputs x O outputs (repeatable; default: tinyllama-1.1B's\n"
    "                  2048,2048 2048,256 2048,5632 5632,2048)\n"
    "  -P N[,N..]      activation rows (positions) per product (default 1,64: decode and one\n"
    "                  prefill sub-batch)\n"
    "  -t N            threads (default 2)\n"
    "  -r N            products timed per configuration (default 30); best and median reported\n"
    "  --cold          each product on another copy of the matrix (copies >= 512 MB in all), so\n"
    "                  the weights come from RAM, not from the caches\n"
    "One JSON object per (shape, P) on stdout.\n";

struct Shape {
    int64_t n_in, n_out;
};

}  // namespace

int main(int argc, char **argv) {
    using namespace llm;
    std::string type_name = "f16";
    std::vector<Shape> shapes;
    std::vector<int32_t> positions{1, 64};
    int threads = 2, reps = 30;
    bool cold = false, file_layout = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const bool has = i + 1 < argc;
        if (a == "--type" && has) {
            type_name = argv[++i];
        } else if (a == "--shape" && has) {
            const auto v = tools::parse_int_list("--shape", argv[++i]);
            if (v.size() != 2 || v[0] <= 0 || v[1] <= 0) {
                std::fprintf(stderr, "--shape wants I,O\n");
                return 2;
            }
            shapes.push_back({v[0], v[1]});
        } else if (a == "-P" && has) {
            positions = tools::parse_int_list("-P", argv[++i]);
        } else if (a == "-t" && has) {
            threads = std::atoi(argv[++i]);
        } else if (a == "--cold") {
            cold = true;
        } else if (a == "--file-layout") {
            file_layout = true;
        } else if (a == "-r" && has) {
            reps = std::atoi(argv[++i]);
        } else {
            std::fputs(kUsage, a == "-h" || a == "--help" ? stdout : stderr);
            return a == "-h" || a == "--help" ? 0 : 2;
        }
    }
    TensorType type;
    if (type_name == "f16") type = TensorType::F16;
    else if (type_name == "f32") type = TensorType::F32;
    else if (type_name == "q8_0") type = TensorType::Q8_0;
    else if (type_name == "q4_0") type = TensorType::Q4_0;
    else if (type_name == "q4_k") type = TensorType::Q4_K;
    else if (type_name == "iq4_xs") type = TensorType::IQ4_XS;
    else {
        std::fprintf(stderr, "unknown --type %s\n%s", type_name.c_str(), kUsage);
        return 2;
    }
    if (shapes.empty()) shapes = {{2048, 2048}, {2048, 256}, {2048, 5632}, {5632, 2048}};
    if (positions.empty() || threads < 1 || reps < 1 ||
        std::any_of(positions.begin(), positions.end(), [](int32_t p) { return p < 1; })) {
        std::fputs(kUsage, stderr);
        return 2;
    }
    for (const Shape &s : shapes)
        if (s.n_in % llm::type_info(type).block) {
            std::fprintf(stderr, "%s wants inputs in multiples of %u\n", type_name.c_str(), llm::type_info(type).block);
            return 2;
        }

    ThreadPool pool(threads);
    std::mt19937 g(1);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (const Shape &s : shapes) {
        // w: [n_out][row_bytes]
        const uint64_t row_bytes = llm::row_bytes(type, s.n_in);
        const uint64_t bytes = row_bytes * s.n_out;
        const uint64_t copies = cold ? std::max<uint64_t>(2, ((512ull << 20) + bytes - 1) / bytes) : 1;
        std::vector<uint8_t> w(bytes * copies);  // [copies][n_out][row_bytes]
        std::vector<float> row(s.n_in);
        for (int64_t r = 0; r < s.n_out; ++r) {
            for (float &v : row) v = u(g);
            uint8_t *dst = w.data() + r * row_bytes;
            if (type == TensorType::F32) {
                std::copy(row.begin(), row.end(), reinterpret_cast<float *>(dst));
            } else if (type == TensorType::IQ4_XS || type == TensorType::Q4_0 || type == TensorType::Q4_K) {
                // Blocks of random scales and values, each led by its f16 d = 0.01 (and Q4_K's dmin).
                const uint64_t block = llm::type_info(type).bytes;
                const uint16_t d = llm::f32_to_fp16(0.01f);
                for (uint64_t b = 0; b < row_bytes; ++b) dst[b] = static_cast<uint8_t>(g());
                for (uint64_t b = 0; b < row_bytes; b += block) {
                    std::memcpy(dst + b, &d, sizeof d);
                    if (type == TensorType::Q4_K) std::memcpy(dst + b + 2, &d, sizeof d);
                }
            } else {
                quantize_act_row(type, row.data(), dst, s.n_in);
            }
        }
        const bool packed = !file_layout && llm::pack_weights(type, w.data(), s.n_in, s.n_out);
        for (uint64_t c = 1; c < copies; ++c) std::copy(w.begin(), w.begin() + bytes, w.begin() + c * bytes);
        for (const int64_t P : positions) {
            std::vector<float> x(s.n_in * P), y(s.n_out * P);  // x: [P][n_in], y: [P][n_out]
            for (float &v : x) v = u(g);
            auto product = [&](uint64_t c) {
                const WeightView view{type, w.data() + c * bytes, s.n_in, s.n_out, row_bytes, packed};
                matmul(view, x.data(), P, y.data(), threads > 1 ? &pool : nullptr);
            };
            product(copies - 1);  // warm: buffers, threads
            std::vector<double> secs;
            for (int k = 0; k < reps; ++k) {
                const auto t0 = std::chrono::steady_clock::now();
                product(static_cast<uint64_t>(k) % copies);
                secs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
            }
            std::sort(secs.begin(), secs.end());
            const double flop =
                2.0 * static_cast<double>(s.n_in) * static_cast<double>(s.n_out) * static_cast<double>(P);
            nlohmann::json j = {{"type", type_name},          {"n_in", s.n_in},
                                {"n_out", s.n_out},           {"positions", P},
                                {"threads", threads},         {"reps", reps},
                                {"weight_bytes", bytes},      {"packed", packed},
                                {"cold", cold},   {"gflops_best", flop / secs.front() / 1e9},
                                {"gflops_median", flop / secs[secs.size() / 2] / 1e9}};
            std::printf("%s\n", j.dump().c_str());
            std::fflush(stdout);
        }
    }
    return 0;
}
