// Writes the seed corpus of fuzz_grammar from the project's test data (nothing from it is committed):
// each GBNF grammar of SHARED_DIR/grammar/gbnf_vectors.json with one of its strings, and each schema of
// json_schema_vectors.json (marked 's') with one of its instances.
// Usage: fuzz_grammar_corpus SHARED_DIR OUT_DIR
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

namespace fs = std::filesystem;

namespace {

nlohmann::json read_json(const fs::path &p) {
    std::ifstream f(p, std::ios::binary);
    if (!f) throw std::runtime_error("cannot read " + p.string());
    return nlohmann::json::parse(f);
}

void write_seed(const fs::path &dir, int n, const std::string &bytes) {
    std::ofstream f(dir / ("seed-" + std::to_string(n)), std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!f) throw std::runtime_error("cannot write the corpus");
}

}  // namespace

int main(int argc, char **argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s SHARED_DIR OUT_DIR\n", argv[0]);
        return 2;
    }
    try {
        const fs::path dir = fs::path(argv[1]) / "grammar";
        const fs::path out = argv[2];
        fs::create_directories(out);
        int n = 0;
        std::set<std::string> seen;
        const auto seed = [&](const std::string &bytes) {
            if (seen.insert(bytes).second) write_seed(out, n++, bytes);
        };
        // Held in locals: a range-for over a member of a temporary would outlive it.
        const nlohmann::json gbnf = read_json(dir / "gbnf_vectors.json");
        const nlohmann::json schemas = read_json(dir / "json_schema_vectors.json");
        for (const auto &c : gbnf.at("cases")) {
            if (!c.contains("grammar") || !c.at("grammar").is_string()) continue;
            std::string text;
            if (c.contains("pass") && c.at("pass").is_array() && !c.at("pass").empty() && c.at("pass")[0].is_string())
                text = c.at("pass")[0].get<std::string>();
            seed("g" + c.at("grammar").get<std::string>() + std::string(1, '\0') + text);
        }
        for (const auto &c : schemas.at("cases")) {
            if (!c.contains("schema")) continue;
            const std::string instance = c.value("instance_json", std::string());
            seed("s" + c.at("schema").dump() + std::string(1, '\0') + instance);
        }
        std::printf("fuzz_grammar_corpus: %d seeds in %s\n", n, out.string().c_str());
    } catch (const std::exception &e) {
        std::fprintf(stderr, "fuzz_grammar_corpus: %s\n", e.what());
        return 1;
    }
    return 0;
}
