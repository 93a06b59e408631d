// grammar-bench: the grammar's share of sampling time per token (llm_session_stats_json's
// grammar_us_per_token) with a JSON grammar and a 10-property JSON schema, on synthetic models with a
// byte-level BPE vocabulary of 32k and 150k tokens. A benchmark, not a test: run it on a quiet machine.
//
// The models are tools::write_synth_model's (tests/support, internal C++: this program links the core
// objects as llm-bench does): llama, n_embd 64, one layer, q8_0, a seeded byte-level BPE vocabulary
// (SynthShape::vocab "bpe"), so nearly all of a token's time is the vocabulary-sized work (the output
// row, sampling, the grammar). Random weights give a nearly flat distribution at temperature 1: the
// draw the grammar checks is refused far more often than with a trained model, so the masked path
// (every token of the vocabulary checked) weighs more than it would in use. grammar_masks says how often.
//
// The same files and grammars feed llama.cpp's grammar sampler in the throwaway comparison program
// described in NOTES / the README (not part of this repository).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/json_schema.h"
#include "llm.h"
#include "synth_model.h"

namespace {

const char *kUsage =
    "usage: grammar-bench [options]\n"
    "  --vocab N[,N..]     vocabulary sizes (default 32000,150000)\n"
    "  --tokens N          tokens generated per seed (default 256); a generation that ends earlier\n"
    "                      (the grammar completed) starts over with the next seed\n"
    "  --seeds N           seeds per configuration (default 8)\n"
    "  --temp T            temperature (default 1)\n"
    "  --gbnf FILE         the JSON grammar (default: the JSON-schema converter's any-object grammar,\n"
    "                      {\"type\": \"object\"}); e.g. llama.cpp's grammars/json.gbnf for a comparison\n"
    "  --schema FILE       the schema (default: the built-in 10-property one, see --print-schema)\n"
    "  --dir DIR           where the synthetic models are written (default /tmp); kept, named\n"
    "                      grammar-bench-bpe<N>.gguf, and reused when present\n"
    "  --write-only        write the models and exit\n"
    "  --write-gbnf        also write, into --dir, the grammars this program uses as GBNF\n"
    "                      (grammar-bench-json.gbnf, grammar-bench-schema10.gbnf) and the schema\n"
    "                      (grammar-bench-schema10.json), for another engine to load the same ones\n"
    "  --print-schema      print the built-in schema and exit\n"
    "Prints one JSON object per (vocabulary, constraint) line.\n";

// Ten properties of the kinds a tool's arguments have: bounded strings and numbers, an enum, a
// boolean, a formatted string, an array and a nested object; all required, no others.
const char *kSchema10 = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 24},
    "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "email": {"type": "string", "pattern": "^[a-z0-9.]{1,16}@[a-z]{1,12}\\.(com|org|net)$"},
    "score": {"type": "number"},
    "active": {"type": "boolean"},
    "role": {"enum": ["admin", "editor", "viewer", "guest"]},
    "joined": {"type": "string", "format": "date"},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 4},
    "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string",
                "pattern": "^[0-9]{5}$"}}, "required": ["city", "zip"], "additionalProperties": false},
    "id": {"type": "string", "format": "uuid"}
  },
  "required": ["name", "age", "email", "score", "active", "role", "joined", "tags", "address", "id"],
  "additionalProperties": false
})";

std::vector<uint32_t> parse_list(const std::string &s) {
    std::vector<uint32_t> out;
    std::stringstream in(s);
    for (std::string x; std::getline(in, x, ',');) out.push_back(static_cast<uint32_t>(std::stoul(x)));
    return out;
}

std::string read_file(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot read " + path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

struct Totals {
    double grammar_seconds = 0, decode_seconds = 0;
    uint64_t grammar_tokens = 0, grammar_masks = 0, generated = 0, completed = 0;
};

}  // namespace

int run(int argc, char **argv) {
    std::vector<uint32_t> vocabs{32000, 150000};
    int tokens = 256, seeds = 8;
    float temp = 1.0f;
    std::string gbnf_path, schema_path, dir = "/tmp";
    bool write_only = false, write_gbnf = false;
    for (int i = 1; i < argc; ++i) {
        const std::string f = argv[i];
        auto val = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "%s needs a value\n%s", f.c_str(), kUsage);
                std::exit(2);
            }
            return argv[++i];
        };
        if (f == "--vocab")
            vocabs = parse_list(val());
        else if (f == "--tokens")
            tokens = std::stoi(val());
        else if (f == "--seeds")
            seeds = std::stoi(val());
        else if (f == "--temp")
            temp = std::stof(val());
        else if (f == "--gbnf")
            gbnf_path = val();
        else if (f == "--schema")
            schema_path = val();
        else if (f == "--dir")
            dir = val();
        else if (f == "--write-only")
            write_only = true;
        else if (f == "--write-gbnf")
            write_gbnf = true;
        else if (f == "--print-schema") {
            std::printf("%s\n", kSchema10);
            return 0;
        } else {
            std::fprintf(stderr, "%s", kUsage);
            return f == "-h" || f == "--help" ? 0 : 2;
        }
    }
    llm_set_log_level(LLM_LOG_WARN);
    struct Constraint {
        std::string name, text;
        bool is_schema;
    };
    std::vector<Constraint> constraints;
    if (gbnf_path.empty())
        constraints.push_back({"json (any object)", R"({"type": "object"})", true});
    else
        constraints.push_back({"json (" + gbnf_path + ")", read_file(gbnf_path), false});
    constraints.push_back({"schema (10 properties)", schema_path.empty() ? kSchema10 : read_file(schema_path), true});
    if (write_gbnf) {
        const auto gbnf = [](const Constraint &c) {
            return c.is_schema ? llm::grammar::json_schema_to_gbnf(c.text) : c.text;
        };
        std::ofstream(dir + "/grammar-bench-json.gbnf") << gbnf(constraints[0]);
        std::ofstream(dir + "/grammar-bench-schema10.gbnf") << gbnf(constraints[1]);
        std::ofstream(dir + "/grammar-bench-schema10.json") << constraints[1].text;
        std::fprintf(stderr, "wrote %s/grammar-bench-{json,schema10}.gbnf and grammar-bench-schema10.json\n",
                     dir.c_str());
    }

    for (uint32_t n_vocab : vocabs) {
        const std::string path = dir + "/grammar-bench-bpe" + std::to_string(n_vocab) + ".gguf";
        if (!std::ifstream(path)) {
            tools::SynthShape sh{"grammar-bench", 64, 1, 4, 2, 128, n_vocab, 4096};
            sh.vocab = "bpe";
            tools::write_synth_model(sh, "q8_0", path, 1);
        }
        if (write_only) {
            std::fprintf(stderr, "wrote %s\n", path.c_str());
            continue;
        }
        llm_model_params mp;
        llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
        llm_model *m = nullptr;
        if (llm_model_load(path.c_str(), &mp, &m) != LLM_OK) {
            std::fprintf(stderr, "%s: %s\n", path.c_str(), llm_last_error());
            return 1;
        }
        for (const Constraint &c : constraints) {
            Totals t;
            const auto w0 = std::chrono::steady_clock::now();
            double setup_seconds = 0;
            for (int seed = 0; seed < seeds; ++seed) {
                llm_session_params sp;
                llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
                sp.temperature = temp;
                sp.seed = static_cast<uint64_t>(seed);
                sp.n_ctx = tokens + 64;
                sp.n_threads = 1;
                llm_session *s = nullptr;
                if (llm_session_create(m, &sp, &s) != LLM_OK) {
                    std::fprintf(stderr, "session: %s\n", llm_last_error());
                    return 1;
                }
                const auto s0 = std::chrono::steady_clock::now();
                const int32_t st = c.is_schema ? llm_session_set_json_schema(s, c.text.c_str())
                                               : llm_session_set_grammar(s, c.text.c_str(), nullptr);
                setup_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
                if (st != LLM_OK) {
                    std::fprintf(stderr, "%s: %s\n", c.name.c_str(), llm_last_error());
                    return 2;
                }
                const int32_t gs = llm_session_generate(s, "Once upon a time", tokens, nullptr, nullptr);
                if (gs < 0) {
                    std::fprintf(stderr, "generate: %s\n", llm_last_error());
                    return 1;
                }
                t.completed += gs == LLM_DONE;
                const auto j = nlohmann::json::parse(llm_session_stats_json(s));
                t.grammar_seconds += j.at("grammar_seconds").get<double>();
                t.grammar_tokens += j.at("grammar_tokens").get<uint64_t>();
                t.grammar_masks += j.at("grammar_masks").get<uint64_t>();
                t.decode_seconds += j.at("decode_seconds").get<double>();
                t.generated += j.at("generated_tokens").get<uint64_t>();
                llm_session_free(s);
            }
            const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
            nlohmann::json out = {
                {"engine", "libllm"},
                {"vocab", n_vocab},
                {"constraint", c.name},
                {"temperature", temp},
                {"seeds", seeds},
                {"generated_tokens", t.generated},
                {"completed", t.completed},
                {"grammar_tokens", t.grammar_tokens},
                {"grammar_masks", t.grammar_masks},
                {"mask_fraction", t.grammar_tokens ? double(t.grammar_masks) / double(t.grammar_tokens) : 0.0},
                {"grammar_us_per_token", t.grammar_tokens ? t.grammar_seconds * 1e6 / double(t.grammar_tokens) : 0.0},
                {"decode_us_per_token", t.generated ? t.decode_seconds * 1e6 / double(t.generated) : 0.0},
                {"setup_ms_per_grammar", setup_seconds * 1e3 / seeds},
                {"wall_seconds", wall},
            };
            std::printf("%s\n", out.dump().c_str());
            std::fflush(stdout);
        }
        llm_model_free(m);
    }
    return 0;
}

int main(int argc, char **argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "grammar-bench: %s\n", e.what());
        return 1;
    }
}
