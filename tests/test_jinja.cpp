// The Jinja2-subset interpreter (lib/jinja) against Python's Jinja2: every record of
// shared/chat/vectors.json (real chat templates rendered by python3-jinja2 3.1.2 with HF's settings),
// unit cases for semantics those templates do not reach, and hostile templates that must end in an
// error within the limits.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
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

// The context of the unit cases (python's side is /work/shared/chat/render.py's environment).
ojson unit_context() {
    return ojson::parse(R"({"messages": [{"role": "system", "content": "Be brief."},
                                          {"role": "user", "content": "Grüße 🌍"}],
                            "tools": null, "documents": null, "bos_token": "<s>", "eos_token": "</s>",
                            "add_generation_prompt": true})");
}

struct UnitCase {
    const char *src;
    int32_t status;    // LLM_OK, or the status Python's exception maps to
    const char *want;  // the rendering, or Python's exception (for the reader; not compared)
};

// Expected renderings and exceptions printed by python3-jinja2 3.1.2 with HF's environment
// (render.py's make_env(), fixed date 2026-01-15) for the context above. Each covers semantics the
// 65 real templates do not reach with vectors.json's conversations.
const UnitCase kUnitCases[] = {
    {R"J(  {% if true %}
    x
  {% endif %}
y
)J",
     LLM_OK, R"J(    x
y)J"},
    {R"J(a  {%- if true -%}  b  {%- endif -%}  c)J", LLM_OK, R"J(abc)J"},
    {R"J(  {%+ if true %}z{% endif %}
  {{- 'v' -}}  
w)J",
     LLM_OK, R"J(  zvw)J"},
    {R"J({# c #}
a{#- c -#}  b  {#+ c +#}
  c)J",
     LLM_OK, R"J(ab  
  c)J"},
    {R"J({% raw %}{{ not parsed }}{% endraw %}
{%- raw -%}  {{ x }}  {%- endraw %}!)J",
     LLM_OK, R"J({{ not parsed }}{{ x }}!)J"},
    {R"J(line1
line2
{% if true %}
x{% endif %}

)J",
     LLM_OK, R"J(line1
line2
x)J"},
    {R"J({{- 1 }}{{+ 2 }})J", LLM_OK, R"J(12)J"},
    {R"J({% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = x + i %}{{ x }};{% endfor %}{{ x }})J", LLM_OK,
     R"J(12;13;1)J"},
    {R"J({% for i in [1, 2] %}{% if i == 2 %}[{{ y }}]{% endif %}{% set y = i %}{% endfor %})J", LLM_OK, R"J([])J"},
    {R"J({% set ns = namespace(n=0, items=[]) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% set ns.items = ns.items + [m.role] %}{% endfor %}{{ ns.n }} {{ ns.items }})J",
     LLM_OK, R"J(2 ['system', 'user'])J"},
    {R"J({% if true %}{% set y = 5 %}{% endif %}{{ y }})J", LLM_OK, R"J(5)J"},
    {R"J({% set g = 5 %}{% macro f() %}{{ g }}{% endmacro %}{% set g = 6 %}{{ f() }})J", LLM_OK, R"J(6)J"},
    {R"J({% macro m(a, b=2, c=a) %}{{ a }}-{{ b }}-{{ c }}{% endmacro %}{{ m(1) }}|{{ m(1, 3) }}|{{ m(1, c=9) }}|{{ m(b=7, a=0) }}|{{ m() }})J",
     LLM_OK, R"J(1-2-1|1-3-1|1-2-9|0-7-0|-2-)J"},
    {R"J({% macro m() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, k=3) }})J", LLM_OK, R"J((1, 2){'k': 3})J"},
    {R"J({% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(5) }}|{{ f }})J", LLM_OK,
     R"J(54321|<Macro 'f'>)J"},
    {R"J({% set x %}  block {{ 1 }}  {% endset %}[{{ x }}]{% set y | trim | upper %}  b  {% endset %}[{{ y }}])J",
     LLM_OK, R"J([  block 1  ][B])J"},
    {R"J({% filter upper %}hello {{ 'x' }}{% endfilter %}|{% with a = 1 %}{{ a }}{% endwith %}{{ a }})J", LLM_OK,
     R"J(HELLO X|1)J"},
    {R"J({% generation %}gen {{ 1 }}{% endgeneration %})J", LLM_OK, R"J(gen 1)J"},
    {R"J({% for x in [1, 2, 3] if x != 2 %}{{ loop.index }}/{{ loop.length }}:{{ x }}{{ ',' if not loop.last }}{% endfor %})J",
     LLM_OK, R"J(1/2:1,2/2:3)J"},
    {R"J({% for x in 'ab' %}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ loop.last }}{{ loop.previtem }}{{ loop.nextitem }}{{ loop.cycle('a', 'b') }}|{% endfor %})J",
     LLM_OK, R"J(02TrueFalseba|11FalseTrueab|)J"},
    {R"J({% for x in [1, 2, 3, 4] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %})J",
     LLM_OK, R"J(13)J"},
    {R"J({% for i in [1, 2] %}{% filter upper %}a{% if i == 2 %}{% break %}{% endif %}{% endfilter %}b{% endfor %})J",
     LLM_OK, R"J(Ab)J"},
    {R"J({% for k, v in {'b': 1, 'a': 2}.items() %}{{ k }}={{ v }};{% endfor %}{% for x in [] %}a{% else %}empty{% endfor %})J",
     LLM_OK, R"J(b=1;a=2;empty)J"},
    {R"J({% for a, b in [[1, 2, 3]] %}{% endfor %})J", LLM_ERR_INVALID_ARGUMENT,
     "ValueError: too many values to unpack (expected 2)"},
    {R"J({% for x in none %}{% endfor %})J", LLM_ERR_INVALID_ARGUMENT, "TypeError: 'NoneType' object is not iterable"},
    {R"J({{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % -3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 7 / 2 }} {{ 1 // 0.1 }} {{ -2 ** 2 }} {{ 2 ** 3 ** 2 }})J",
     LLM_OK, R"J(3 -4 -2 2 1024 3.5 9.0 4 64)J"},
    {R"J({{ 'ab' * 3 }} {{ [1] * 2 }} {{ [1, 2] + [3] }} {{ 'a' ~ 1 ~ none ~ true }} {{ 1 == 1.0 }} {{ (1, 2) == [1, 2] }} {{ 'a' < 'b' < 'c' }})J",
     LLM_OK, R"J(ababab [1, 1] [1, 2, 3] a1NoneTrue True False True)J"},
    {R"J({{ 'a' in 'cat' }} {{ 'z' not in 'cat' }} {{ 1 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ x or 'd' }} {{ 0 or none }} {{ 1 and 'y' }} {{ 'a' if false }}|)J",
     LLM_OK, R"J(True True True True d None y |)J"},
    {R"J({{ 'a' + 1 }})J", LLM_ERR_INVALID_ARGUMENT, "TypeError: can only concatenate str (not \"int\") to str"},
    {R"J({{ x + 1 }})J", LLM_ERR_INVALID_ARGUMENT, "UndefinedError: 'x' is undefined"},
    {R"J({{ 1 < 'a' }})J", LLM_ERR_INVALID_ARGUMENT,
     "TypeError: '<' not supported between instances of 'int' and 'str'"},
    {R"J({{ 1 / 0 }})J", LLM_ERR_INVALID_ARGUMENT, "ZeroDivisionError: division by zero"},
    {R"J({{ x.y }})J", LLM_ERR_INVALID_ARGUMENT, "UndefinedError: 'x' is undefined"},
    {R"J({{ x() }})J", LLM_ERR_INVALID_ARGUMENT, "UndefinedError: 'x' is undefined"},
    {R"J({{ 'hello'[1:3] }} {{ 'hello'[::-1] }} {{ 'héllo wörld'[3:8] }} {{ [1, 2, 3, 4][1::2] }} {{ [1, 2, 3][-10:2] }} {{ 'abc'[5] }}| {{ {'a': 1}.a }} {{ {'items': 5}['items'] }} {{ none.y }}|)J",
     LLM_OK, R"J(el olleh lo wö [2, 4] [1, 2] | 1 5 |)J"},
    {R"J({% set n = 1 %}{{ n[1:] }})J", LLM_ERR_INVALID_ARGUMENT, "TypeError: 'int' object is not subscriptable"},
    {R"J({{ (1)[1:] }}|{{ not (1)[1:] }})J", LLM_OK, R"J(|True)J"},
    {R"J({{ {'a': 1, 'b': [1, 2.0, none, true]} }} {{ ('a',) }} {{ ['it\'s', 'q"r'] }} {{ 1e16 }} {{ 0.1 + 0.2 }} {{ 1e-5 }} {{ 100.0 }} {{ {'a': 1}.items() }})J",
     LLM_OK,
     R"J({'a': 1, 'b': [1, 2.0, None, True]} ('a',) ["it's", 'q"r'] 1e+16 0.30000000000000004 1e-05 100.0 dict_items([('a', 1)]))J"},
    {R"J({{ '  a  '|trim }}|{{ 'xxaxx'|trim('x') }}|{{ 'hello wORLD'|title }}|{{ 'hello wORLD'|capitalize }}|{{ 'o\'neil mc-d (x)'|title }}|{{ 'ÄÖü'|lower }}{{ 'straße'|upper }})J",
     LLM_OK, R"J(a|a|Hello World|Hello world|O'neil Mc-D (X)|äöüSTRASSE)J"},
    {R"J({{ x|default('d') }}|{{ none|default('d') }}|{{ ''|default('d', true) }}|{{ [1, 2]|length }}{{ 'héllo'|length }}{{ x|length }})J",
     LLM_OK, R"J(d|None|d|250)J"},
    {R"J({{ [3, 1, 2]|sort }}|{{ ['b', 'A', 'c']|sort }}|{{ [{'n': 2}, {'n': 1}]|sort(attribute='n') }}|{{ {'b': 1, 'A': 2}|dictsort }}|{{ [1, 2, 2, 'a', 'A']|unique|list }})J",
     LLM_OK, R"J([1, 2, 3]|['A', 'b', 'c']|[{'n': 1}, {'n': 2}]|[('A', 2), ('b', 1)]|[1, 2, 'a'])J"},
    {R"J({{ [3, 1, 2]|min }}{{ [3, 1, 2]|max }}{{ ['b', 'A']|max }}{{ [1, 2, 3]|first }}{{ [1, 2, 3]|last }}{{ [1, 2, 3]|sum }}{{ -3|abs }}{{ 2.5|round }}{{ 2.675|round(2) }}{{ 5|round }})J",
     LLM_OK, R"J(13b13632.02.675)J"},
    {R"J({{ [1, 2, 3]|join(',') }}|{{ [{'n': 'a'}, {'n': 'b'}]|join(', ', attribute='n') }}|{{ 'a\nb\n\nc'|indent(2) }}|{{ 'a\nb'|indent(2, true) }})J",
     LLM_OK, R"J(1,2,3|a, b|a
  b

  c|  a
  b)J"},
    {R"J({{ '3.9'|int }}{{ 'x'|int }}{{ '0x1f'|int(0, 16) }}{{ '1e3'|float }}{{ 'hello'|replace('l', 'L', 1) }}{{ 'ab'|list }}{{ 'abc'|reverse }})J",
     LLM_OK, R"J(30311000.0heLlo['a', 'b']cba)J"},
    {R"J({{ [1, none, 0, 2]|select|list }}|{{ [1, 2, 3, 4]|select('odd')|list }}|{{ [1, 2, 3]|reject('in', [1, 3])|list }}|{{ [{'a': 1}, {'a': 0}, {}]|selectattr('a')|list }}|{{ [{'t': 'x'}, {'t': 'y'}]|rejectattr('t', 'equalto', 'x')|list }})J",
     LLM_OK, R"J([1, 2]|[1, 3]|[2]|[{'a': 1}]|[{'t': 'y'}])J"},
    {R"J({{ [{'a': {'b': 1}}]|map(attribute='a.b')|list }}|{{ [{'a': 1}, {}]|map(attribute='a', default=0)|list }}|{{ ['a', 'B']|map('upper')|list }}|{{ none|selectattr('a')|list }})J",
     LLM_OK, R"J([1]|[1, 0]|['A', 'B']|[])J"},
    {R"J({% set g = [1, 2, 3]|select('odd') %}{{ g|list }}{{ g|list }}{{ 'yes' if [1]|reject else 'no' }})J", LLM_OK,
     R"J([1, 3][]yes)J"},
    {R"J({{ [1]|map('string')|tojson }})J", LLM_ERR_INVALID_ARGUMENT,
     "TypeError: Object of type generator is not JSON serializable"},
    {R"J({{ {'a': [1, 2.0, 'é\n"', none, true]}|tojson }}|{{ [1, {'b': {}}]|tojson(indent=2) }}|{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }}|{{ 'é😀'|tojson(ensure_ascii=true) }}|{{ [1, 2]|tojson(separators=(',', ':')) }})J",
     LLM_OK, R"J({"a": [1, 2.0, "é\n\"", null, true]}|[
  1,
  {
    "b": {}
  }
]|{"a": 2, "b": 1}|"\u00e9\ud83d\ude00"|[1,2])J"},
    {R"J({{ x|tojson }})J", LLM_ERR_INVALID_ARGUMENT, "TypeError: Object of type Undefined is not JSON serializable"},
    {R"J({{ '%s-%05.1f-%x'|format('a', 3.14159, 255) }}|{{ '%(a)s' % {'a': 1} }}|{{ '{} {:>4} {:.2f} {!r}'.format('a', 'b', 3.14159, 'c') }})J",
     LLM_OK, R"J(a-003.1-ff|1|a    b 3.14 'c')J"},
    {R"J({{ '<a&>'|e }}|{{ ('<'|safe) + '<' }}|{{ ('<'|safe) ~ '<' }}|{{ '<' + ('<'|safe) }})J", LLM_OK,
     R"J(&lt;a&amp;&gt;|<&lt;|<<|&lt;<)J"},
    {R"J({{ x is defined }}{{ none is none }}{{ true is number }}{{ 1 is integer }}{{ 'a' is string }}{{ {} is mapping }}{{ 'a' is sequence }}{{ x is sequence }}{{ none is iterable }}{{ 3 is odd }}{{ 9 is divisibleby 3 }}{{ 1 is eq 1 }}{{ 'ab' is lower }}{{ 'trim' is filter }}{{ x is not none }})J",
     LLM_OK, R"J(FalseTrueTrueTrueTrueTrueTrueTrueFalseTrueTrueTrueTrueTrueTrue)J"},
    {R"J({{ '  a  '.strip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'a b c'.rsplit(' ', 1) }}|{{ 'a b '.split(None, 1) }}|{{ 'abc'.startswith(('x', 'ab')) }}|{{ 'héllo'.find('l') }}|{{ '-'.join(['a', 'b']) }}|{{ {'a': 1}.get('b', 2) }}|{{ 'ab cd'.title() }})J",
     LLM_OK, R"J(a|['a', 'b', '', 'c']|['a', 'b']|['a', 'b c']|['a b', 'c']|['a', 'b ']|True|2|a-b|2|Ab Cd)J"},
    {R"J({% set l = [1, 2, 3] %}{{ l.pop() }}{{ l }}{{ l.pop(0) }}{{ l }})J", LLM_OK, R"J(3[1, 2]1[2])J"},
    {R"J({{ [1].append(2) }})J", LLM_ERR_INVALID_ARGUMENT,
     "SecurityError: access to attribute 'append' of 'list' object is unsafe."},
    {R"J({{ namespace(a=1) }}|{% for i in [1] %}{{ loop }}{% endfor %}|{{ range(3)|list }}|{{ dict(a=1) }})J", LLM_OK,
     R"J(<Namespace {'a': 1}>|<LoopContext 1/1>|[0, 1, 2]|{'a': 1})J"},
    {R"J({{ range(100001)|length }})J", LLM_ERR_INVALID_ARGUMENT,
     "OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000)."},
    {R"J({{ raise_exception('boom') }})J", LLM_ERR_INVALID_ARGUMENT, "TemplateError: boom"},
    {R"J({{ strftime_now('%Y-%m-%d %H:%M %a %b %d %B %-d %j') }})J", LLM_OK,
     R"J(2026-01-15 00:00 Thu Jan 15 January 15 015)J"},
    {R"J({% if true %})J", LLM_ERR_FORMAT,
     "TemplateSyntaxError: Unexpected end of template. Jinja was looking for the following tags: 'elif' or 'else' or "
     "'endif'. The innermost block that needs to be closed is 'if'."},
    {R"J({{ 1 + }})J", LLM_ERR_FORMAT, "TemplateSyntaxError: unexpected 'end of print statement'"},
    {R"J({% endfor %})J", LLM_ERR_FORMAT, "TemplateSyntaxError: Encountered unknown tag 'endfor'."},
    {R"J({{ x|nosuchfilter }})J", LLM_ERR_FORMAT, "TemplateAssertionError: No filter named 'nosuchfilter'."},
    {R"J({% if false %}{{ x|nosuchfilter }}{% endif %}ok)J", LLM_OK, R"J(ok)J"},
    {R"J({% do x %})J", LLM_ERR_FORMAT, "TemplateSyntaxError: Encountered unknown tag 'do'."},
    // issue 25: the block form of `set` assigns a namespace's attribute, as `set ns.x = ...` does
    {R"J({% set ns = namespace(bar=1) %}{% set ns.bar %}42{% endset %}[{{ ns.bar }}])J", LLM_OK, R"J([42])J"},
    {R"J({% set ns = namespace(bar=1) %}{% set ns.bar | upper %}x{% endset %}[{{ ns.bar }}])J", LLM_OK, R"J([X])J"},
    // issue 25: a for-loop that assigns the name `loop` (its target, or a set anywhere inside) is refused
    {R"J({% for loop in [1] %}{{ loop }}{% endfor %})J", LLM_ERR_FORMAT,
     "TemplateAssertionError: Can't assign to special loop variable in for-loop target"},
    {R"J({% for x in [1] %}{% set loop = 3 %}{{ loop }}{% endfor %})J", LLM_ERR_FORMAT,
     "TemplateAssertionError: Can't assign to special loop variable in for-loop target"},
    {R"J({% for x, y in [[1, 2]] %}{% macro m() %}{% set loop %}a{% endset %}{% endmacro %}{% endfor %})J",
     LLM_ERR_FORMAT, "TemplateAssertionError: Can't assign to special loop variable in for-loop target"},
    {R"J({% set loop = 3 %}{{ loop }}|{% set ns = namespace(loop=1) %}{% for x in [1] %}{% set ns.loop = 3 %}{% endfor %}{{ ns.loop }})J",
     LLM_OK, R"J(3|3)J"},

};

// Problems are printed as found (UNSCOPED_INFO would attach them all to the next assertion only).
#define LOG_PROBLEM(msg)                                   \
    do {                                                   \
        std::ostringstream os_;                            \
        os_ << msg;                                        \
        std::printf("  problem: %s\n", os_.str().c_str()); \
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
            LOG_PROBLEM(where << ": differs at byte " << at << "\n  got:  " << text.substr(at > 40 ? at - 40 : 0, 120)
                              << "\n  want: " << want.substr(at > 40 ? at - 40 : 0, 120));
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

TEST_CASE("jinja: unit cases agree with python3-jinja2", "[jinja]") {
    for (const auto &c : kUnitCases) {
        std::string text;
        const int32_t st = run(c.src, unit_context(), &text);
        INFO("template: " << c.src << "\n  got: " << text << "\n  want: " << c.want);
        CHECK(st == c.status);
        if (c.status == LLM_OK && st == LLM_OK) CHECK(text == c.want);
    }
}

TEST_CASE("jinja: render_chat passes the context apply_chat_template does", "[jinja]") {
    const std::string tmpl =
        "{{ bos_token }}{% for m in messages %}{{ m.role }}:{{ m.content }}|{{ m|tojson }}\n{% endfor %}"
        "{{ add_generation_prompt }} {{ tools }} {{ documents }} {{ eos_token }}";
    std::string out, err;
    const std::vector<llm::jinja::ChatMessage> msgs = {{"user", "Hi \"you\""}, {"assistant", "ok"}};
    REQUIRE(llm::jinja::render_chat(tmpl, msgs, true, "<s>", "</s>", opts(), &out, &err) == LLM_OK);
    // python3-jinja2 3.1.2 with render.py's environment:
    CHECK(out ==
          "<s>user:Hi \"you\"|{\"role\": \"user\", \"content\": \"Hi \\\"you\\\"\"}\n"
          "assistant:ok|{\"role\": \"assistant\", \"content\": \"ok\"}\nTrue None None </s>");
    // raise_exception is the template speaking: the message says so
    REQUIRE(llm::jinja::render_chat("{{ raise_exception('System role not supported') }}", msgs, false, "", "", opts(),
                                    &out, &err) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(err == "template raised: System role not supported");
}

TEST_CASE("jinja: errors say what and where", "[jinja]") {
    std::string text;
    CHECK(run("a\n{% for x in none %}{% endfor %}", ojson::object(), &text) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(text == "template line 2: TypeError: 'NoneType' object is not iterable");
    CHECK(run("{{ 1 }}\n\n{{ 'x'|wordwrap(3) }}", ojson::object(), &text) == LLM_ERR_UNSUPPORTED);
    CHECK(text == "unsupported: filter 'wordwrap' (line 3)");
    CHECK(run("{% include 'x.html' %}", ojson::object(), &text) == LLM_ERR_UNSUPPORTED);
    CHECK(text == "unsupported: statement 'include' (line 1)");
    CHECK(run("\n{% if %}", ojson::object(), &text) == LLM_ERR_FORMAT);
    CHECK(text.rfind("template line 2: syntax error", 0) == 0);
    CHECK(run("\n{% for loop in [1] %}{% endfor %}", ojson::object(), &text) == LLM_ERR_FORMAT);
    CHECK(text == "template line 2: syntax error: Can't assign to special loop variable in for-loop target");
    CHECK(run("x", ojson::array(), &text) == LLM_ERR_INVALID_ARGUMENT);
    // a plain nlohmann::json context works too (its objects are key-sorted, which tojson would show)
    std::string out, err;
    CHECK(llm::jinja::render("{{ a }}{{ b|tojson }}", nlohmann::json::parse(R"({"b": {"y": 1, "x": 2}, "a": 1})"),
                             opts(), &out, &err) == LLM_OK);
    CHECK(out == "1{\"x\": 2, \"y\": 1}");
}

TEST_CASE("jinja: strftime_now uses Options::now", "[jinja]") {
    llm::jinja::Options o;
    o.now = 0;
    std::string out, err;
    REQUIRE(llm::jinja::render("{{ strftime_now('%d %b %Y %H:%M') }}", ojson::object(), o, &out, &err) == LLM_OK);
    CHECK(out == "01 Jan 1970 00:00");
    o.now = -1;  // the current time: a four-digit year at least
    REQUIRE(llm::jinja::render("{{ strftime_now('%Y') }}", ojson::object(), o, &out, &err) == LLM_OK);
    CHECK(out.size() == 4);
}

TEST_CASE("jinja: hostile templates end with an error within the limits", "[jinja][cpu-neutral]") {
    const std::string deep_parens = "{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}";
    const std::string deep_ifs = [] {
        std::string s;
        for (int i = 0; i < 100000; i++) s += "{% if true %}";
        return s;
    }();
    struct Hostile {
        std::string src;
        int32_t status;
    };
    const Hostile cases[] = {
        {"{% for i in range(1000000000) %}x{% endfor %}", LLM_ERR_INVALID_ARGUMENT},  // the sandbox's MAX_RANGE
        {deep_parens, LLM_ERR_FORMAT},
        {deep_ifs, LLM_ERR_FORMAT},
        {"{{ 1" +
             [] {
                 std::string s;
                 for (int i = 0; i < 100000; i++) s += " + 1";
                 return s;
             }() +
             " }}",
         LLM_ERR_FORMAT},
        {"{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", LLM_ERR_FORMAT},
        {"{% macro f(n) %}{% for i in [1, 2] %}{{ f(n + 1) }}{% endfor %}{% endmacro %}{{ f(0) }}", LLM_ERR_FORMAT},
        {"{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
         LLM_ERR_FORMAT},
        {"{{ 'x' * 10**12 }}", LLM_ERR_FORMAT},
        {"{{ [1, 2] * 10**12 }}", LLM_ERR_FORMAT},
        {"{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", LLM_ERR_FORMAT},
        {"{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = [ns.l] %}{% endfor %}",
         LLM_ERR_FORMAT},
        {"{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}", LLM_ERR_FORMAT},
        {"{{ '{:>1000000000}'.format(1) }}", LLM_ERR_FORMAT},
        {"{{ ('a ' * 10000000).split() }}", LLM_ERR_FORMAT},
        {"{{ 2 ** 64 }}", LLM_ERR_UNSUPPORTED},
    };
    for (const auto &h : cases) {
        const auto t0 = std::chrono::steady_clock::now();
        std::string text;
        const int32_t st = run(h.src, ojson::object(), &text);
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        INFO(h.src.substr(0, 120) << "\n-> " << text << " in " << secs << " s");
        CHECK(st == h.status);
        CHECK(secs < 60);  // about 1 s at most on one core; generous for sanitizer builds and busy machines
    }
    // 10^10 loop iterations stop at max_steps (10M by default: about 1.5 s of CPU in a release build, 35 s
    // under ASan, so a tenth of that here).
    {
        llm::jinja::Options o = opts();
        o.limits.max_steps = 1'000'000;
        std::string out, err;
        CHECK(llm::jinja::render(
                  "{% for i in range(100000) %}{% for j in range(100000) %}{{ j }}{% endfor %}{% endfor %}",
                  ojson::object(), o, &out, &err) == LLM_ERR_FORMAT);
        CHECK(err == "template line 1: limit exceeded: more than 1000000 steps");
    }
    // A chain of namespaces (each holding the previous) is released without deep recursion.
    std::string text;
    CHECK(run("{% set ns = namespace(head=none) %}{% for i in range(100000) %}"
              "{% set ns.head = namespace(next=ns.head) %}{% endfor %}done",
              ojson::object(), &text) == LLM_OK);
    CHECK(text == "done");
    // Small limits bound a render too.
    llm::jinja::Options small = opts();
    small.limits.max_steps = 1000;
    small.limits.max_output = 100;
    std::string out, err;
    CHECK(llm::jinja::render("{% for i in range(1000) %}{{ i }}{% endfor %}", ojson::object(), small, &out, &err) ==
          LLM_ERR_FORMAT);
    CHECK(llm::jinja::render("{{ 'x' * 101 }}", ojson::object(), small, &out, &err) == LLM_ERR_FORMAT);
}

// Run by the jinja_reference ctest (tests/jinja/run_reference.cmake) after tests/jinja/reference.py
// rendered thousands of extra cases with the installed python3-jinja2: the 65 templates with tool
// calls, reasoning and odd conversations, and random expressions and statement nests.
TEST_CASE("jinja: extra reference renderings made by python3-jinja2 at test time", "[.jinja-reference]") {
    const char *path = std::getenv("LLM_JINJA_REFERENCE");
    REQUIRE(path);
    const ojson records = ojson::parse(read_file(path));
    REQUIRE(records.size() > 0);
    int identical = 0, errors = 0, unsupported = 0, wrong = 0;
    for (const auto &rec : records) {
        std::string text;
        const int32_t st = run(rec["template"].get<std::string>(), rec["context"], &text);
        const std::string name = rec["name"];
        if (st == LLM_ERR_UNSUPPORTED) {
            unsupported++;
        } else if (rec.contains("error")) {
            if (st != LLM_OK) {
                errors++;
            } else {
                wrong++;
                LOG_PROBLEM(name << ": rendered, but Jinja2 raised " << rec["error"].get<std::string>() << "\n  "
                                 << rec["template"].get<std::string>().substr(0, 300));
            }
        } else if (st != LLM_OK) {
            wrong++;
            LOG_PROBLEM(name << ": " << text << "\n  " << rec["template"].get<std::string>().substr(0, 300));
        } else if (text != rec["output"].get<std::string>()) {
            wrong++;
            LOG_PROBLEM(name << ": got " << text.substr(0, 200) << "\n  want "
                             << rec["output"].get<std::string>().substr(0, 200) << "\n  "
                             << rec["template"].get<std::string>().substr(0, 300));
        } else {
            identical++;
        }
    }
    std::printf("jinja reference: %zu records: %d identical, %d errors matched, %d unsupported, %d wrong\n",
                records.size(), identical, errors, unsupported, wrong);
    CHECK(wrong == 0);
    CHECK(unsupported * 20 <= static_cast<int>(records.size()));  // refusals stay rare
}
