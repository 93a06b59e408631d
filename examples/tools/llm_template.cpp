// llm-template: renders a conversation with a chat template, as llm_chat_apply_template does, and prints
// exactly the rendering. Not public API only: it includes core, gguf, model and runtime headers and
// links the core (like llm-bench) rather than libllm, because the C call has no way to override the
// BOS/EOS texts or to fix strftime_now's clock, which tests and template authors need; the rendering
// itself is the same function the C call runs (runtime/chat.h).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common.h"
#include "core/error.h"
#include "gguf/weight_source.h"
#include "model/model.h"
#include "runtime/chat.h"

using namespace tools;

namespace {

const char *kUsage =
    "usage: llm-template (-m MODEL.gguf | --template FILE) --messages FILE.json [options]\n"
    "  -m MODEL.gguf        use the model's chat template and its BOS/EOS token texts\n"
    "  --template FILE      a Jinja chat template (with -m: instead of the model's)\n"
    "  --name NAME          the model's named template (tokenizer.chat_template.NAME), e.g. tool_use\n"
    "  --messages FILE.json [{\"role\": \"user\", \"content\": \"...\"}, ...]\n"
    "  --add-assistant      end with the opening of an assistant turn (add_generation_prompt)\n"
    "  --bos S, --eos S     bos_token / eos_token texts (default: the model's; required without -m)\n"
    "  --now UNIX_SECONDS   the time strftime_now sees (default: now)\n"
    "Prints the rendering to stdout, nothing added; errors go to stderr with exit status 1.\n";

struct Args {
    std::string model, template_file, name, messages, bos, eos;
    bool have_bos = false, have_eos = false, add_assistant = false;
    int64_t now = -1;
};

Args parse(int argc, char **argv) {
    Args a;
    for (int i = 1; i < argc; ++i) {
        const std::string f = argv[i];
        auto val = [&]() -> std::string {
            if (i + 1 >= argc) die("missing value for " + f);
            return argv[++i];
        };
        if (f == "-h" || f == "--help") {
            std::fputs(kUsage, stdout);
            std::exit(0);
        } else if (f == "-m")
            a.model = val();
        else if (f == "--template")
            a.template_file = val();
        else if (f == "--name")
            a.name = val();
        else if (f == "--messages")
            a.messages = val();
        else if (f == "--add-assistant")
            a.add_assistant = true;
        else if (f == "--bos") {
            a.bos = val();
            a.have_bos = true;
        } else if (f == "--eos") {
            a.eos = val();
            a.have_eos = true;
        } else if (f == "--now") {
            const std::string v = val();
            char *end = nullptr;
            a.now = std::strtoll(v.c_str(), &end, 10);
            if (v.empty() || *end || a.now < 0)
                die("--now takes a non-negative number of seconds since 1970, not '" + v + "'");
        } else
            die("unknown flag '" + f + "' (see --help)");
    }
    if (a.model.empty() && a.template_file.empty()) die("give -m MODEL.gguf or --template FILE; see --help");
    if (a.model.empty() && (!a.have_bos || !a.have_eos)) die("--template without -m needs --bos S and --eos S");
    if (a.messages.empty()) die("no conversation given (--messages FILE.json)");
    if (!a.name.empty() && a.model.empty()) die("--name selects one of the model's templates: it needs -m");
    return a;
}

std::vector<llm::jinja::ChatMessage> read_messages(const std::string &path) {
    std::string text;
    if (!read_file(path, &text)) die("cannot read '" + path + "'");
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded()) die("'" + path + "' is not valid JSON");
    if (!j.is_array()) die("'" + path + "' must hold an array of {\"role\": ..., \"content\": ...} objects");
    std::vector<llm::jinja::ChatMessage> msgs;
    for (size_t i = 0; i < j.size(); ++i) {
        const nlohmann::json &m = j[i];
        if (!m.is_object() || !m.contains("role") || !m.contains("content") || !m["role"].is_string() ||
            !m["content"].is_string()) {
            die("'" + path + "': message " + std::to_string(i) + " needs string fields \"role\" and \"content\"");
        }
        msgs.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
    }
    return msgs;
}

}  // namespace

int main(int argc, char **argv) {
    const Args a = parse(argc, argv);
    try {
        std::string source;
        llm::ChatSpecials specials;
        if (!a.model.empty()) {
            llm::LoadOptions lo;
            lo.vocab_only = true;  // the metadata and the vocabulary are all a template needs
            const auto model = llm::Model::load(llm::WeightSource::open_file(a.model), lo);
            if (a.template_file.empty()) source = llm::chat_template(model->source().meta(), a.name);
            specials = llm::chat_specials(*model);
        }
        if (!a.template_file.empty() && !read_file(a.template_file, &source))
            die("cannot read '" + a.template_file + "'");
        if (a.have_bos) specials.bos = a.bos;
        if (a.have_eos) specials.eos = a.eos;
        llm::jinja::Options opt;
        opt.now = a.now;
        const std::string out = llm::render_chat(source, read_messages(a.messages), a.add_assistant, specials, opt);
        if (std::fwrite(out.data(), 1, out.size(), stdout) != out.size() || std::fflush(stdout) != 0) {
            die("writing the rendering failed");
        }
    } catch (const llm::Error &e) {
        die(std::string(llm::status_string(e.status())) + ": " + e.what());
    } catch (const std::exception &e) {
        die(e.what());
    }
    return 0;
}
