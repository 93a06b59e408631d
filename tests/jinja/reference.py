#!/usr/bin/env python3
"""Writes extra Jinja2 reference renderings for tests/test_jinja.cpp ("[.jinja-reference]"), made at
test time by the installed python3-jinja2 with the environment of SHARED/chat/render.py (Hugging Face's
settings): the 65 chat templates with conversations that vectors.json does not have (tool calls and
results, reasoning, multimodal content, empty and odd conversations), plus random expressions and
statement nests from fixed seeds. Each record: template, context, and output or error.

Usage: reference.py SHARED_DIR OUT_JSON     (exit 77: python3-jinja2 3.1 is not installed)
"""
import glob
import json
import os
import random
import sys


def conversations():
    weather = {"type": "function", "function": {
        "name": "get_weather", "description": "Get the weather for a city.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "City name"},
            "unit": {"type": "string", "enum": ["c", "f"]}, "days": {"type": "integer"}},
            "required": ["city"]}}}
    search = {"type": "function", "function": {
        "name": "search", "description": "Web search",
        "parameters": {"type": "object", "properties": {
            "q": {"type": "string"}, "n": {"type": ["integer", "null"], "default": 3},
            "opts": {"type": "object", "properties": {"safe": {"type": "boolean"}}},
            "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["q"]}}}
    calc = {"type": "function", "function": {
        "name": "calc", "description": "Calc ü", "parameters": {"type": "object", "properties": {
            "x": {"type": "number", "default": 0.5, "minimum": -1e10},
            "arr": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "integer"}}}}},
            "required": []}}}
    bare = {"name": "bare_tool", "description": "no wrapper", "parameters": {"type": "object", "properties": {}}}
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}
    call_str = {"id": "call_2", "type": "function", "function": {"name": "search", "arguments": "{\"q\": \"x\", \"n\": 1}"}}
    call_mix = {"id": "c3", "type": "function", "function": {"name": "calc", "arguments": {
        "x": 1.5, "y": [1, 2.25e-7, None, True], "s": "é\"\n<tag>", "o": {"k": {}}}}}
    u = lambda c: {"role": "user", "content": c}
    a = lambda c: {"role": "assistant", "content": c}
    return [
        ([{"role": "system", "content": "Sys"}, u("Weather?"), {"role": "assistant", "content": "", "tool_calls": [call]},
          {"role": "tool", "content": "{\"temp\": 20}", "tool_call_id": "call_1", "name": "get_weather"},
          a("It is 20."), u("Thanks")], {"tools": [weather, search]}),
        ([u("Q"), {"role": "assistant", "content": None, "tool_calls": [call, call_str]},
          {"role": "tool", "content": "r1", "tool_call_id": "call_1"}, {"role": "tool", "content": "r2", "tool_call_id": "call_2"}],
         {"tools": [weather, search]}),
        ([u("think"), {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nAnswer", "reasoning_content": "hmm"}, u("again")],
         {"enable_thinking": False}),
        ([{"role": "user", "content": [{"type": "text", "text": "Look"}, {"type": "image"}, {"type": "text", "text": "at this"}]}], {}),
        ([{"role": "system", "content": "S"}, u("u1"), a("a1")], {"tools": [weather], "add_generation_prompt": False}),
        ([u("x")], {"tools": [], "reasoning_effort": "high", "builtin_tools": ["browser", "code_interpreter"],
                    "documents": [{"title": "T", "text": "doc text"}]}),
        ([{"role": "developer", "content": "dev"}, u("hi")], {}),
        ([], {}),
        ([{"role": "system", "content": "only system"}], {}),
        ([{"role": "user", "content": None}], {"add_generation_prompt": False}),
        ([u("a"), a("partial")], {"add_generation_prompt": False}),
        ([u("calc"), {"role": "assistant", "content": "I will.", "tool_calls": [call_mix]},
          {"role": "tool", "content": [{"type": "text", "text": "3.0"}], "tool_call_id": "c3"}], {"tools": [calc, bare]}),
        ([u("x"), {"role": "assistant", "content": "y", "thinking": "t", "reasoning_content": "rc"}, u("z")],
         {"tools": [calc, bare], "enable_thinking": True, "thinking": True, "reasoning_effort": "low", "custom_instructions": "ci"}),
        ([a("starts with assistant"), u("u")], {}),
        ([u("  spaced\n\n"), a("\n<think>r</think>\n\n  a  "), u("q"), a("<think>\nx\n</think>b")], {"add_generation_prompt": False}),
    ]


def random_expressions(rng, n):
    atoms = ['1', '0', '-3', '2.5', '0.1', '1e3', 'true', 'false', 'none', '"abc"', '"a b  c"', '""', '"É"', "'x,y'",
             '[1, 2, 3]', '[]', '["b", "A", "a"]', '{"k": 1, "j": [2]}', '{}', '(1, "a")', 'u', 'messages',
             'messages[0]', 'ns', 'ns.a', 'n5', 's', 'lst', 'd']
    ops = ['+', '-', '*', '/', '//', '%', '**', '~', '==', '!=', '<', '>', '<=', '>=', 'in', 'not in', 'and', 'or']
    filters = ['length', 'trim', 'upper', 'lower', 'title', 'capitalize', 'string', 'list', 'first', 'last', 'join',
               'join(",")', 'int', 'float', 'default("D")', 'default("D", true)', 'tojson', 'sort', 'unique|list',
               'reverse|list', 'min', 'max', 'sum', 'abs', 'round', 'items|list', 'dictsort', 'select|list',
               'reject|list', 'map("string")|list', 'replace("a", "Z")', 'indent(2)', 'count', 'safe', 'e',
               'batch(2)|list', 'center(9)']
    tests = ['defined', 'undefined', 'none', 'string', 'number', 'integer', 'float', 'mapping', 'sequence',
             'iterable', 'boolean', 'true', 'false', 'odd', 'even', 'eq 1', 'in [1, "abc"]', 'lower', 'upper']
    methods = ['.upper()', '.lower()', '.strip()', '.split()', '.split(",")', '.startswith("a")',
               '.endswith(("c", "x"))', '.replace("a", "b")', '.items()|list', '.keys()|list', '.values()|list',
               '.get("k")', '.get("z", 0)', '.title()', '.find("b")', '.count("a")', '[0]', '[-1]', '[1:]',
               '[::-1]', '.k', '.a']

    def expr(depth=0):
        r = rng.random()
        if depth > 3 or r < 0.3:
            return rng.choice(atoms)
        if r < 0.5:
            return f"({expr(depth + 1)} {rng.choice(ops)} {expr(depth + 1)})"
        if r < 0.65:
            return f"({expr(depth + 1)})|{rng.choice(filters)}"
        if r < 0.75:
            return f"({expr(depth + 1)} is {rng.choice(['', 'not '])}{rng.choice(tests)})"
        if r < 0.85:
            return f"({expr(depth + 1)}){rng.choice(methods)}"
        if r < 0.92:
            return f"({expr(depth + 1)} if {expr(depth + 1)} else {expr(depth + 1)})"
        return f"(not {expr(depth + 1)})"

    extra = {"n5": 5, "s": "Hello World", "lst": [3, 1, 2], "d": {"b": 2, "a": 1}}
    return [("{% set ns = namespace(a=2) %}{{ " + expr() + " }}", extra) for _ in range(n)]


def random_statements(rng, n):
    names = ['a', 'b', 'c', 'x', 'loop', 'ns.v', 'm']
    values = ['1', '"s"', 'a', 'b ~ "!"', 'x', '(c|default(0)) + 1', 'loop.index', 'ns.v', '[1, 2]', 'none',
              'm() if m is defined else "nm"', 'a is defined', 'x|length if x is defined else -1']

    def stmt(depth):
        r = rng.random()
        if depth > 3 or r < 0.25:
            return "{{ " + rng.choice(names) + " }}|"
        if r < 0.45:
            return "{% set " + rng.choice(['a', 'b', 'c', 'ns.v', 'x']) + " = " + rng.choice(values) + " %}"
        if r < 0.6:
            return ("{% for i in " + rng.choice(['[1, 2]', '[]', 'x', '"ab"', 'range(2)']) +
                    (" if i != 2" if rng.random() < 0.2 else "") + " %}" + body(depth + 1) +
                    ("{% else %}E" + body(depth + 1) if rng.random() < 0.2 else "") + "{% endfor %}")
        if r < 0.75:
            return "{% if " + rng.choice(values) + " %}" + body(depth + 1) + "{% else %}" + body(depth + 1) + "{% endif %}"
        if r < 0.85:
            return "{% macro m(p=1) %}" + body(depth + 1) + "{{ p }}{% endmacro %}"
        if r < 0.9:
            return "{% set x %}" + body(depth + 1) + "{% endset %}"
        if r < 0.95:
            return "{% filter upper %}" + body(depth + 1) + "{% endfilter %}"
        if depth > 0:
            return "{% if loop is defined %}{% if loop.index > 1 %}{% break %}{% endif %}{% endif %}"
        return "{{ a }}"

    def body(depth):
        return "".join(stmt(depth) for _ in range(rng.randint(1, 4)))

    return [("{% set ns = namespace(v=0) %}{% set a = 5 %}" + body(0), {}) for _ in range(n)]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    shared, out_path = sys.argv[1], sys.argv[2]
    try:
        import jinja2
    except ImportError:
        print("python3-jinja2 is not installed: skipped")
        sys.exit(77)
    if not jinja2.__version__.startswith("3.1."):
        print("python3-jinja2 %s is not 3.1.x (the version vectors.json was made with): skipped" % jinja2.__version__)
        sys.exit(77)
    sys.path.insert(0, os.path.join(shared, "chat"))
    from render import make_env  # the environment vectors.json was rendered with
    env = make_env()

    base = {"messages": [{"role": "user", "content": "hi"}], "tools": None, "documents": None,
            "bos_token": "<s>", "eos_token": "</s>", "add_generation_prompt": True}
    cases = []
    for path in sorted(glob.glob(os.path.join(shared, "chat", "templates", "*.jinja"))):
        with open(path, encoding="utf-8", newline="") as fh:
            src = fh.read()
        for msgs, extra in conversations():
            ctx = dict(base, messages=msgs)
            ctx.update(extra)
            cases.append((os.path.basename(path), src, ctx))
    rng = random.Random(20260115)
    cases += [("expression", s, dict(base, **e)) for s, e in random_expressions(rng, 3000)]
    cases += [("statements", s, dict(base, **e)) for s, e in random_statements(rng, 1500)]

    records = []
    compiled = {}
    for name, src, ctx in cases:
        rec = {"name": name, "template": src, "context": json.loads(json.dumps(ctx))}
        try:
            if src not in compiled:
                try:
                    compiled[src] = env.from_string(src)
                except Exception as e:  # a syntax error: every render of it raises
                    compiled[src] = e
            if isinstance(compiled[src], Exception):
                raise compiled[src]
            rec["output"] = compiled[src].render(**json.loads(json.dumps(ctx)))
        except Exception as e:  # the reference raised: ours must fail too
            rec["error"] = "%s: %s" % (type(e).__name__, e)
        records.append(rec)
    with open(out_path, "w", encoding="utf-8") as fh:
        json.dump(records, fh, ensure_ascii=False)
    print("jinja2 %s: %d reference records in %s" % (jinja2.__version__, len(records), out_path))


if __name__ == "__main__":
    main()
