// The Jinja2-subset interpreter (lib/jinja) against Python's Jinja2: every record of
// shared/chat/vectors.json (real chat templates rendered by python3-jinja2 3.1.2 with HF's settings),
// unit cases for semantics those templates do not reach, and hostile templates that must end in an
// error within the limits.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "jinja/jinja.h"
#include "llm.h"

namespace {

using ojson = nlohmann::ordered_json;

const std::string kChatDir = std::string(LLM_SHARED_DIR) + "/chat";
constexpr int64_t kFixedNow = 1768435200;  // 2026-01-15 00:00:00 UTC, render.py's FIXED_NOW

std::string read_file(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    REQUIRE(f.good());
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

llm::jinja::Options opts() {
    llm::jinja::Options o;
    o.now = kFixedNow;
    return o;
}

// Renders with the context HF passes; returns the status, output or error in *text.
int32_t run(const std::string &src, const ojson &ctx, std::string *text) {
    std::string out, err;
    const int32_t st = llm::jinja::render(src, ctx, opts(), &out, &err);
    *text = st == LLM_OK ? out : err;
    return st;
}

std::string render_ok(const std::string &src, ojson ctx = ojson::object()) {
    std::string text;
    const int32_t st = run(src, ctx, &text);
    INFO(src << "\n-> " << text);
    REQUIRE(st == LLM_OK);
    return text;
}

int32_t render_status(const std::string &src, ojson ctx = ojson::object()) {
    std::string text;
    const int32_t st = run(src, ctx, &text);
    INFO(src << "\n-> " << text);
    return st;
}

// Problems are printed as found (UNSCOPED_INFO would attach them all to the next assertion only).
#define LOG_PROBLEM(msg)                                        \
    do {                                                        \
        std::ostringstream os_;                                 \
        os_ << msg;                                             \
        std::printf("  problem: %s\n", os_.str().c_str());     \
    } while (0)

}  // namespace

TEST_CASE("jinja: every reference rendering of shared/chat/vectors.json", "[jinja]") {
    const ojson vectors = ojson::parse(read_file(kChatDir + "/vectors.json"));
    REQUIRE(vectors.size() == 325);
    std::map<std::string, std::string> sources;
    std::map<std::string, std::string> unsupported;  // template -> first message
    int identical = 0, errors_matched = 0, wrong = 0, unexpected_error = 0, missing_error = 0;
    for (const auto &rec : vectors) {
        const std::string name = rec["template_file"];
        if (!sources.count(name)) sources[name] = read_file(kChatDir + "/templates/" + name);
        ojson ctx = ojson::object();
        ctx["messages"] = rec["messages"];
        ctx["tools"] = nullptr;
        ctx["documents"] = nullptr;
        ctx["add_generation_prompt"] = rec["add_generation_prompt"];
        ctx["bos_token"] = rec["bos_token"];
        ctx["eos_token"] = rec["eos_token"];
        std::string text;
        const int32_t st = run(sources[name], ctx, &text);
        const std::string where = name + " " + rec["conversation_id"].get<std::string>();
        if (st == LLM_ERR_UNSUPPORTED) {
            if (!unsupported.count(name)) unsupported[name] = text;
            continue;
        }
        if (rec.contains("error")) {
            if (st != LLM_OK) {
                errors_matched++;
            } else {
                missing_error++;
                LOG_PROBLEM(where << ": rendered, but Jinja2 raised " << rec["error"].get<std::string>());
            }
            continue;
        }
        if (st != LLM_OK) {
            unexpected_error++;
            LOG_PROBLEM(where << ": " << text);
            continue;
        }
        if (text == rec["output"].get<std::string>()) {
            identical++;
        } else {
            wrong++;
            const std::string want = rec["output"];
            size_t at = 0;
            while (at < text.size() && at < want.size() && text[at] == want[at]) at++;
            LOG_PROBLEM(where << ": differs at byte " << at << "\n  got:  "
                                << text.substr(at > 40 ? at - 40 : 0, 120) << "\n  want: "
                                << want.substr(at > 40 ? at - 40 : 0, 120));
        }
    }
    std::printf("jinja vectors: %d identical, %d errors matched, %zu templates unsupported\n", identical,
                errors_matched, unsupported.size());
    for (const auto &[name, why] : unsupported) std::printf("  unsupported: %s: %s\n", name.c_str(), why.c_str());
    CHECK(wrong == 0);
    CHECK(unexpected_error == 0);
    CHECK(missing_error == 0);
    CHECK(unsupported.size() <= 3);
}
