// llm-template: renders a conversation with a chat template, as llm_chat_apply_template_json does, and
// prints exactly the rendering; or (--parse) parses a model's raw output as llm_chat_parse does. Not public API only: it includes core, gguf, model and runtime headers and
// links the core (like llm-bench) rather than libllm, because the C call has no way to override the
// BOS/EOS texts or to fix strftime_now's clock, which tests and template authors need; the rendering
// itself is the same function the C call runs (runtime/chat.h, chat/tool_parse.h).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common.h"
#include "core/error.h"
#include "gguf/weight_source.h"
#include "model/model.h"
#include "chat/tool_parse.h"
#include "runtime/chat.h"

using namespace tools;

namespace {

const char *kUsage =
    "usage: llm-template (-m MODEL.gguf | --template FILE) --messages FILE.json [options]\n"
    "       llm-template (-m MODEL.gguf | --template FILE) --parse RAW.txt [--params P.json] [--partial]\n"
    "  -m MODEL.gguf        use the model's chat template and its BOS/EOS token texts\n"
    "  --template FILE      a Jinja chat template (with -m: instead of the model's)\n"
    "  --name NAME          the model's named template (tokenizer.chat_template.NAME), e.g. tool_use\n"
    "  --messages FILE.json [{\"role\": \"user\", \"content\": \"...\"}, ...]: passed to the template as\n"
    "                       given (assistant \"tool_calls\", role \"tool\" with \"tool_call_id\"/\"name\")\n"
    "  --tools FILE.json    tool definitions, [{\"type\": \"function\", \"function\": {...}}, ...] (tools)\n"
    "  --documents FILE.json documents for templates that read them (documents)\n"
    "  --add-assistant      end with the opening of an assistant turn (add_generation_prompt)\n"
    "  --bos S, --eos S     bos_token / eos_token texts (default: the model's; required without -m\n"
    "                       when rendering)\n"
    "  --now UNIX_SECONDS   the time strftime_now sees (default: now)\n"
    "  --parse RAW.txt      parse a model's output instead: prints one JSON line {content,\n"
    "                       reasoning_content, tool_calls: [{name, arguments, id}], format, parsed}\n"
    "  --params P.json      the request's parameters for --parse (tools, messages, reasoning_format,\n"
    "                       enable_thinking, parallel_tool_calls, tool_choice, continue_final_message)\n"
    "  --partial            the output was cut short (unfinished calls are kept)\n"
    "Prints the rendering to stdout, nothing added; errors go to stderr with exit status 1.\n";

struct Args {
    std::string model, template_file, name, messages, bos, eos, tools, documents, parse, params;
    bool have_bos = false, have_eos = false, add_assistant = false, partial = false;
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
        else if (f == "--tools")
            a.tools = val();
        else if (f == "--documents")
            a.documents = val();
        else if (f == "--parse")
            a.parse = val();
        else if (f == "--params")
            a.params = val();
        else if (f == "--partial")
            a.partial = true;
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
    if (!a.parse.empty()) {
        if (!a.messages.empty() || !a.tools.empty() || !a.documents.empty())
            die("--parse takes the request from --params P.json, not --messages/--tools/--documents");
    } else {
        if (a.model.empty() && (!a.have_bos || !a.have_eos)) die("--template without -m needs --bos S and --eos S");
        if (a.messages.empty()) die("no conversation given (--messages FILE.json)");
        if (!a.params.empty() || a.partial) die("--params and --partial go with --parse RAW.txt");
    }
    if (!a.name.empty() && a.model.empty()) die("--name selects one of the model's templates: it needs -m");
    return a;
}

nlohmann::ordered_json read_json(const std::string &path, const char *what) {
    std::string text;
    if (!read_file(path, &text)) die("cannot read '" + path + "'");
    // ordered: key order reaches the template (its tojson shows it), as Python dicts keep it
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(text, nullptr, false);
    if (j.is_discarded()) die("'" + path + "' is not valid JSON");
    if (!j.is_array() && std::string(what) != "params") die("'" + path + "' must hold a JSON array of " + what);
    if (!j.is_object() && std::string(what) == "params") die("'" + path + "' must hold a JSON object");
    return j;
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
        std::string out;
        if (!a.parse.empty()) {
            std::string raw;
            if (!read_file(a.parse, &raw)) die("cannot read '" + a.parse + "'");
            nlohmann::ordered_json params =
                a.params.empty() ? nlohmann::ordered_json::object() : read_json(a.params, "params");
            if (a.partial) params["is_partial"] = true;
            const llm::chat::ParseResult r =
                llm::chat::parse_output(source, raw, llm::chat::parse_params(params), specials);
            if (!r.recognized) std::fputs("llm-template: no known tool-call format in the template: the output is content\n", stderr);
            out = llm::chat::to_json(r).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
        } else {
            nlohmann::ordered_json req = nlohmann::ordered_json::object();
            req["messages"] = read_json(a.messages, "message objects");
            if (!a.tools.empty()) req["tools"] = read_json(a.tools, "tool definitions");
            if (!a.documents.empty()) req["documents"] = read_json(a.documents, "documents");
            req["add_generation_prompt"] = a.add_assistant;
            out = llm::render_chat_request(source, req, specials, opt);
        }
        if (std::fwrite(out.data(), 1, out.size(), stdout) != out.size() || std::fflush(stdout) != 0) {
            die("writing the output failed");
        }
    } catch (const llm::Error &e) {
        die(std::string(llm::status_string(e.status())) + ": " + e.what());
    } catch (const std::exception &e) {
        die(e.what());
    }
    return 0;
}
