// Writes the seed corpus of fuzz_jinja from the project's test data (nothing from it is committed):
// each chat template of SHARED_DIR/chat/templates with each conversation of conversations.json
// (template, NUL, the conversation's context as JSON), plus a few short templates that reach the
// statements, filters and error paths the chat templates rarely use.
// Usage: fuzz_jinja_corpus SHARED_DIR OUT_DIR
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace fs = std::filesystem;

namespace {

std::string read_all(const fs::path &p) {
    std::ifstream f(p, std::ios::binary);
    if (!f) throw std::runtime_error("cannot read " + p.string());
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void write_seed(const fs::path &dir, int n, const std::string &bytes) {
    std::ofstream f(dir / ("seed-" + std::to_string(n)), std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!f) throw std::runtime_error("cannot write the corpus");
}

const char *const kSnippets[] = {
    "{% set ns = namespace(n=0) %}{% for m in messages if m.role != 'system' %}{% set ns.n = ns.n + 1 %}"
    "{{ loop.index }}{{ m.content|trim|upper }}{% else %}none{% endfor %}{{ ns.n }}",
    "{% macro f(x, d=1) %}{% if d < 4 %}[{{ f(x, d + 1) }}]{% else %}{{ x|tojson(indent=2) }}{% endif %}{% endmacro %}"
    "{{ f({'a': [1, 2.5, none, true], 'b': 'é\\n'}) }}",
    "{%- for k, v in {'b': 1, 'a': [3, 1]}|dictsort -%}{{ k }}={{ v|sort|join(',') }};{%- endfor %}"
    "{{ '%s-%05.2f' % ('x', 3.14159) }}{{ '{:>6}|{!r}'.format('a', 'b') }}",
    "{{ messages|selectattr('role', 'equalto', 'user')|map(attribute='content')|list }}{{ (messages|last).content[::-1] }}",
    "{% set x %}  {{ 'a b  c'.split() }} {% endset %}{% filter upper %}{{ x|trim }}{% endfilter %}"
    "{{ x is string }}{{ 3 is odd }}{{ none is none }}{{ [] is sequence }}",
    "{% raw %}{{ raw }}{% endraw %}  {%- if true -%}  x  {%- endif %}\n  {%+ if 1 %}y{% endif %}{# c #}",
    "{{ raise_exception('stop') }}",
    "{{ strftime_now('%Y-%m-%d %a %B') }}{{ range(3)|list }}{{ 7 // 2 }}{{ -7 % 3 }}{{ 2 ** 10 }}{{ 1 / 3 }}",
    "{% for i in [1, 2, 3] %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}{% endif %}"
    "{{ loop.previtem }}{{ loop.nextitem }}{{ loop.cycle('a', 'b') }}{% endfor %}",
    "{{ ('<'|safe) + '<' }}{{ 'ab'[5:1:-1] }}{{ x.y }}{{ {'a': 1}.items()|list }}{{ [1, 2]|map('string')|first }}",
};

}  // namespace

int main(int argc, char **argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s SHARED_DIR OUT_DIR\n", argv[0]);
        return 2;
    }
    try {
        const fs::path chat = fs::path(argv[1]) / "chat";
        const fs::path out = argv[2];
        fs::create_directories(out);
        const auto convs = nlohmann::ordered_json::parse(read_all(chat / "conversations.json"));
        std::vector<fs::path> templates;
        for (const auto &e : fs::directory_iterator(chat / "templates"))
            if (e.path().extension() == ".jinja") templates.push_back(e.path());
        std::sort(templates.begin(), templates.end());
        int n = 0;
        for (const auto &t : templates) {
            const std::string src = read_all(t);
            for (const auto &c : convs) {
                nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
                ctx["messages"] = c["messages"];
                ctx["tools"] = nullptr;
                ctx["documents"] = nullptr;
                ctx["add_generation_prompt"] = c["add_generation_prompt"];
                ctx["bos_token"] = "<s>";
                ctx["eos_token"] = "</s>";
                write_seed(out, n++, src + std::string(1, '\0') + ctx.dump());
            }
        }
        for (const char *s : kSnippets) write_seed(out, n++, s);
        std::printf("wrote %d seeds to %s\n", n, out.string().c_str());
    } catch (const std::exception &e) {
        std::fprintf(stderr, "fuzz_jinja_corpus: %s\n", e.what());
        return 1;
    }
    return 0;
}
