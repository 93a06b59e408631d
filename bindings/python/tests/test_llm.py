"""The Python binding against the real library and stories260K."""
import ctypes
import json
import os
import re
import tempfile
import threading
import unittest

from tests.common import CHAT_MODEL, CHATML, CHATML_MESSAGES, CHATML_RENDERED, HEADER, MODEL, PROMPT, STORY

import libllm_runtime as llm


class StructLayout(unittest.TestCase):
    """ctypes layouts agree with the LP64 table of tests/abi_layout_test.c."""

    def test_sizes_and_offsets(self):
        if ctypes.sizeof(ctypes.c_void_p) != 8:
            self.skipTest("the table describes LP64")
        self.assertEqual(ctypes.sizeof(llm.ModelParams), 48)
        self.assertEqual(llm.ModelParams.residency.offset, 28)
        self.assertEqual(llm.ModelParams.ram_budget_bytes.offset, 32)
        self.assertEqual(llm.ModelParams.prefetch_depth.offset, 40)
        self.assertEqual(llm.ModelParams.page_cache.offset, 44)
        self.assertEqual(ctypes.sizeof(llm.SessionParams), 80)
        self.assertEqual(llm.SessionParams.presence_penalty.offset, 68)
        self.assertEqual(llm.SessionParams.frequency_penalty.offset, 72)
        self.assertEqual(ctypes.sizeof(llm.LogprobsParams), 24)
        self.assertEqual(llm.LogprobsParams.on_token.offset, 8)
        self.assertEqual(ctypes.sizeof(llm.TokenLogprob), 8)
        self.assertEqual(llm.SessionParams.seed.offset, 40)
        self.assertEqual(llm.SessionParams.logits_all.offset, 48)
        self.assertEqual(llm.SessionParams.parse_special.offset, 49)
        self.assertEqual(llm.SessionParams.kv_type_k.offset, 52)
        self.assertEqual(llm.SessionParams.kv_type_v.offset, 56)
        self.assertEqual(llm.SessionParams.context_shift.offset, 60)
        self.assertEqual(llm.SessionParams.n_keep.offset, 64)
        self.assertEqual(ctypes.sizeof(llm.ChatMessage), 16)
        self.assertEqual(ctypes.sizeof(llm.Writer), 24)
        self.assertEqual(ctypes.sizeof(llm.Io), 40)
        self.assertEqual(ctypes.sizeof(llm.MemoryPlan), 80)
        self.assertEqual(llm.MemoryPlan.minimum_weight_bytes.offset, 72)
        self.assertEqual(ctypes.sizeof(llm.Stats), 88)
        self.assertEqual(llm.Stats.io_wait_seconds.offset, 56)
        self.assertEqual(llm.Stats.passes.offset, 64)
        self.assertEqual(llm.Stats.accepted_tokens.offset, 80)
        self.assertEqual(ctypes.sizeof(llm.SpeculationParams), 32)
        self.assertEqual(llm.SpeculationParams.draft.offset, 8)
        self.assertEqual(llm.SpeculationParams.n_draft.offset, 16)
        self.assertEqual(llm.SpeculationParams.lookup_ngram.offset, 20)
        self.assertEqual(llm.SpeculationParams.draft_p_min.offset, 24)
        self.assertEqual(ctypes.sizeof(llm.EmbedParams), 12)
        self.assertEqual(llm.EmbedParams.pooling.offset, 4)
        self.assertEqual(llm.EmbedParams.normalize.offset, 8)
        self.assertEqual(llm.EmbedParams.parse_special.offset, 10)

    def test_init_sets_current_versions(self):
        p = llm.ModelParams()
        self.assertEqual(llm.lib().llm_model_params_init(ctypes.byref(p), llm.MODEL_PARAMS_VERSION), llm.OK)
        self.assertEqual(p.version, llm.MODEL_PARAMS_VERSION)
        self.assertEqual(p.prefetch_depth, 1)
        s = llm.SessionParams()
        self.assertEqual(llm.lib().llm_session_params_init(ctypes.byref(s), llm.SESSION_PARAMS_VERSION), llm.OK)
        self.assertEqual(s.version, llm.SESSION_PARAMS_VERSION)
        self.assertAlmostEqual(s.temperature, 0.8, places=5)
        self.assertFalse(s.parse_special)
        self.assertEqual((s.kv_type_k, s.kv_type_v), (llm.KV_F16, llm.KV_F16))
        self.assertFalse(s.context_shift)
        self.assertEqual(s.n_keep, 0)

    def test_init_refuses_a_newer_version(self):
        p = llm.ModelParams()
        status = llm.lib().llm_model_params_init(ctypes.byref(p), llm.MODEL_PARAMS_VERSION + 1)
        self.assertEqual(status, llm.ERR_INVALID_ARGUMENT)
        self.assertEqual(p.version, 0)


class Errors(unittest.TestCase):
    def test_missing_file_raises_io_error(self):
        with self.assertRaises(llm.Error) as cm:
            llm.Model("/nonexistent/model.gguf")
        self.assertEqual(cm.exception.status, llm.ERR_IO)
        self.assertTrue(cm.exception.message)

    def test_progress_false_cancels_load(self):
        with self.assertRaises(llm.Error) as cm:
            llm.Model(MODEL, progress=lambda f: False)
        self.assertEqual(cm.exception.status, llm.ERR_CANCELLED)

    def test_progress_exception_is_reraised(self):
        def boom(f):
            raise KeyError("from progress")
        with self.assertRaises(KeyError):
            llm.Model(MODEL, progress=boom)

    def test_closed_handles(self):
        m = llm.Model(MODEL)
        m.close()
        m.close()
        with self.assertRaises(llm.Error):
            m.n_vocab


class Generation(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.fractions = []
        cls.model = llm.Model(MODEL, progress=cls.fractions.append)

    @classmethod
    def tearDownClass(cls):
        cls.model.close()

    def test_version_and_model(self):
        with open(HEADER) as f:
            header = f.read()
        part = lambda name: re.search(r"#define LLM_VERSION_%s (\d+)" % name, header).group(1)
        self.assertEqual(llm.version(), "%s.%s.%s" % (part("MAJOR"), part("MINOR"), part("PATCH")))
        self.assertTrue(self.fractions and all(0.0 <= f <= 1.0 for f in self.fractions))
        self.assertEqual(self.model.n_vocab, 512)
        self.assertEqual(self.model.bos, 1)
        self.assertTrue(self.model.is_eog(self.model.eos))
        self.assertEqual(self.model.info()["arch"], "llama")
        self.assertGreater(self.model.memory_plan(128).kv_cache_bytes, 0)
        toks = self.model.tokenize(PROMPT)
        self.assertEqual(len(toks), 5)
        self.assertEqual(toks[0], 1)
        self.assertEqual(b"".join(self.model.token_to_piece(t) for t in toks[1:]).strip(), PROMPT.encode())

    def test_generate_callback(self):
        seen = []
        with llm.Session(self.model, temperature=0, n_ctx=256) as s:
            text = s.generate(PROMPT, 32, on_token=lambda t, p: seen.append(t))
            self.assertEqual(len(seen), 32)
            self.assertTrue(text.startswith(STORY), text)
            total, last = s.stats()
            self.assertEqual(total["generated_tokens"], 32)
            self.assertEqual(s.stats_json()["generated_tokens"], 32)

    def test_tokens_generator_pull_api(self):
        with llm.Session(self.model, temperature=0, n_ctx=256) as s:
            pairs = list(s.tokens(PROMPT, 32))
            self.assertEqual(len(pairs), 32)
            self.assertTrue(all(isinstance(t, int) and isinstance(p, str) for t, p in pairs))
            self.assertTrue("".join(p for _, p in pairs).startswith(STORY))
            self.assertEqual(s.n_past, 5 + 32)
            # continue from the current context
            more = list(s.tokens(None, 4, raw=True))
            self.assertEqual(len(more), 4)
            self.assertTrue(all(isinstance(p, bytes) for _, p in more))

    def test_callback_stop_and_exception(self):
        with llm.Session(self.model, temperature=0) as s:
            text = s.generate(PROMPT, 32, on_token=lambda t, p: False)
            self.assertEqual(s.n_past, 5 + 1)
            self.assertTrue(STORY.startswith(text))
            s.reset()

            def boom(t, p):
                raise ValueError("from the callback")
            with self.assertRaises(ValueError):
                s.generate(PROMPT, 32, on_token=boom)

    def test_low_level_calls(self):
        with llm.Session(self.model, temperature=0, n_ctx=64) as s:
            s.prefill(self.model.tokenize(PROMPT))
            self.assertEqual(len(s.logits()), 512)
            tok = s.sample()
            s.accept(tok)
            self.assertEqual(s.n_past, 6)
            with self.assertRaises(llm.Error) as cm:
                s.prefill([5] * 100)
            self.assertEqual(cm.exception.status, llm.ERR_CONTEXT_FULL)
            self.assertEqual(s.n_past, 6)

    def test_cancel_from_another_thread(self):
        with llm.Session(self.model, temperature=0) as s:
            first = threading.Event()
            go_on = threading.Event()

            def on_token(t, p):
                first.set()
                go_on.wait(10)  # hold generation until the other thread has cancelled
                return True

            def canceller():
                first.wait(10)
                s.cancel()
                go_on.set()

            th = threading.Thread(target=canceller)
            th.start()
            with self.assertRaises(llm.Error) as cm:
                s.generate(PROMPT, 64, on_token=on_token)
            th.join()
            self.assertEqual(cm.exception.status, llm.ERR_CANCELLED)
            s.reset()
            self.assertTrue(s.generate(PROMPT, 32).startswith(STORY))

    def test_sessions_on_threads_share_the_model(self):
        out = {}

        def work(i):
            with llm.Session(self.model, temperature=0, n_ctx=128) as s:
                out[i] = "".join(p for _, p in s.tokens(PROMPT, 32))

        threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        self.assertEqual(len(out), 3)
        for text in out.values():
            self.assertTrue(text.startswith(STORY), text)


class ModelCase(unittest.TestCase):
    """A test class sharing one stories260K model, opened once for the class."""

    @classmethod
    def setUpClass(cls):
        cls.model = llm.Model(MODEL)

    @classmethod
    def tearDownClass(cls):
        cls.model.close()


class Chat(ModelCase):
    """0.3: metadata, chat templates, parse_special, truncate/tokens, saved sessions."""

    def test_meta_string(self):
        self.assertEqual(self.model.meta_string("general.architecture"), "llama")
        self.assertEqual(self.model.meta_string("llama.block_count"), "5")  # an integer, in decimal
        with self.assertRaises(llm.NotFound) as cm:
            self.model.meta_string("general.no_such_key")
        self.assertEqual(cm.exception.status, llm.ERR_NOT_FOUND)
        self.assertIsInstance(cm.exception, LookupError)

    def test_chat_template_not_found(self):
        # stories260K has no tokenizer.chat_template
        with self.assertRaises(llm.NotFound):
            self.model.chat_template()
        with self.assertRaises(llm.NotFound):
            self.model.chat_template("tool_use")
        with self.assertRaises(llm.NotFound):
            self.model.apply_chat_template([("user", "Hi")])

    def test_tools_round_trip(self):
        tmpl = ("{% for m in messages %}<{{ m.role }}>{% if m.tool_calls %}<tool_call>"
                "{{ m.tool_calls[0].function|tojson }}</tool_call>{% else %}{{ m.content }}{% endif %}"
                "{% endfor %}{% if tools %}[{{ tools|map(attribute='function.name')|join(',') }}]{% endif %}"
                "{% if add_generation_prompt %}<assistant>{% endif %}")
        tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
        messages = [{"role": "user", "content": "Paris?"}]
        prompt = llm.apply_chat_template_json({"messages": messages, "tools": tools, "add_generation_prompt": True},
                                              template=tmpl)
        self.assertEqual(prompt, "<user>Paris?[get_weather]<assistant>")
        reply = 'Let me look.<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
        msg = llm.chat_parse(reply, template=tmpl, params={"tools": tools})
        self.assertEqual(msg["content"], "Let me look.")
        self.assertEqual(msg["format"], "hermes")
        call = msg["tool_calls"][0]
        self.assertEqual((call["name"], json.loads(call["arguments"])), ("get_weather", {"city": "Paris"}))
        messages += [{"role": "assistant", "content": None, "tool_calls": [
                         {"type": "function", "function": {"name": call["name"],
                                                           "arguments": json.loads(call["arguments"])}}]},
                     {"role": "tool", "name": "get_weather", "content": "12C"}]
        prompt = llm.apply_chat_template_json({"messages": messages, "add_generation_prompt": True}, template=tmpl)
        self.assertEqual(prompt, '<user>Paris?<assistant><tool_call>{"name": "get_weather", "arguments": '
                                 '{"city": "Paris"}}</tool_call><tool>12C<assistant>')
        with self.assertRaises(llm.Error):
            llm.apply_chat_template_json('{"messages": 3}', template=tmpl)
        with self.assertRaises(llm.Error):
            llm.chat_parse("x", template=tmpl, params='{"tools": 3}')

    def test_apply_chat_template(self):
        self.assertEqual(llm.apply_chat_template(CHATML, CHATML_MESSAGES), CHATML_RENDERED)
        dicts = [{"role": r, "content": c} for r, c in CHATML_MESSAGES]
        self.assertEqual(llm.apply_chat_template(CHATML, dicts, add_assistant=False),
                         CHATML_RENDERED[:-len("<|im_start|>assistant\n")])
        # with a model, bos_token is its BOS text
        rendered = self.model.apply_chat_template(CHATML_MESSAGES, template="{{ bos_token }}" + CHATML)
        self.assertEqual(rendered, "<s>" + CHATML_RENDERED)
        with self.assertRaises(llm.Error) as cm:
            llm.apply_chat_template("{% for m in messages %}", CHATML_MESSAGES)  # unterminated for
        self.assertEqual(cm.exception.status, llm.ERR_FORMAT)

    def test_parse_special(self):
        # "</s>" (EOS's text) is one token with parse_special, several without.
        self.assertEqual(self.model.tokenize("</s>", add_bos=False, parse_special=True), [self.model.eos])
        self.assertGreater(len(self.model.tokenize("</s>", add_bos=False)), 1)
        with llm.Session(self.model, temperature=0, n_ctx=64, parse_special=True) as s:
            self.assertTrue(s.parse_special)
            list(s.tokens(PROMPT + "</s>", 1))
            self.assertEqual(s.context_tokens()[:6], self.model.tokenize(PROMPT) + [self.model.eos])
            s.reset()
            s.generate(PROMPT + "</s>", 1)
            self.assertEqual(s.context_tokens()[5], self.model.eos)
        with llm.Session(self.model, temperature=0, n_ctx=64) as s:
            s.generate(PROMPT + "</s>", 1)
            self.assertNotIn(self.model.eos, s.context_tokens())
        with self.assertRaises(TypeError):
            llm.Session(self.model, no_such_param=1)

    def test_kv_types_and_context_shift_params(self):
        with llm.Session(self.model, temperature=0, n_ctx=64, kv_type_k=llm.KvType.F32, kv_type_v=llm.KV_F32,
                         context_shift=True, n_keep=4) as s:
            self.assertTrue(s.generate(PROMPT, 8).startswith(STORY[:20]))

    def test_truncate_and_tokens(self):
        with llm.Session(self.model, temperature=0, n_ctx=64) as s:
            self.assertEqual(s.context_tokens(), [])
            toks = self.model.tokenize(PROMPT)
            s.prefill(toks)
            self.assertEqual(s.context_tokens(), toks)
            s.truncate(2)
            self.assertEqual(s.n_past, 2)
            self.assertEqual(s.context_tokens(), toks[:2])
            with self.assertRaises(llm.Error) as cm:
                s.truncate(3)
            self.assertEqual(cm.exception.status, llm.ERR_INVALID_ARGUMENT)
            # regenerate from the truncated prefix: the same greedy story
            s.prefill(toks[2:])
            self.assertTrue(s.generate("", 32).startswith(STORY))

    def test_save_and_load(self):
        with llm.Session(self.model, temperature=0, n_ctx=128) as a:
            first = a.generate(PROMPT, 8)
            with tempfile.TemporaryDirectory() as d:
                path = os.path.join(d, "s.llmstate")
                a.save(path)
                blob = a.save_bytes()
                with open(path, "rb") as f:
                    self.assertEqual(f.read(), blob)
                rest = a.generate("", 16)
                for restore in (lambda b: b.load(path), lambda b: b.load_bytes(blob)):
                    with llm.Session(self.model, temperature=0, n_ctx=128) as b:
                        restore(b)
                        self.assertEqual(b.context_tokens(), self.model.tokenize(PROMPT) + b.context_tokens()[5:])
                        self.assertEqual(b.n_past, 5 + 8)
                        self.assertEqual(b.generate("", 16), rest)
                with llm.Session(self.model, temperature=0, n_ctx=128) as c:
                    with self.assertRaises(llm.Error):
                        c.load_bytes(blob[:len(blob) // 2])
                    self.assertEqual(c.n_past, 0)
            self.assertTrue(STORY.startswith(first + rest), first + rest)



class MoreTokensPerPass(ModelCase):
    """0.4: set_speculation, next_batch, stats version 2. Any error fails them (ERR_UNSUPPORTED too)."""

    def session(self, n_ctx=256):
        return llm.Session(self.model, temperature=0, n_ctx=n_ctx)

    def plain(self, prompt, n):
        with self.session() as s:
            return [t for t, _ in s.tokens(prompt, n, raw=True)]

    def speculative(self, n, *args, after_set=lambda: None, **kwargs):
        """A session with set_speculation(*args, **kwargs) that has generated n tokens of PROMPT,
        asserted equal to plain greedy decoding's; after_set runs right after set_speculation (even
        if it fails). The caller closes the session."""
        want = self.plain(PROMPT, n)
        s = self.session()
        try:
            try:
                s.set_speculation(*args, **kwargs)
            finally:
                after_set()
            self.assertEqual([t for t, _ in s.tokens(PROMPT, n, raw=True)], want)
        except BaseException:
            s.close()
            raise
        return s

    def test_speculation_with_lookup_is_lossless(self):
        with self.speculative(48, lookup_ngram=3) as s:
            self.assertEqual(s.n_past, 5 + 48)
            total, _ = s.stats()
            self.assertLessEqual(total["accepted_tokens"], total["drafted_tokens"])
            s.reset()
            self.assertTrue(s.generate(PROMPT, 48).startswith(STORY))

    def test_speculation_with_same_file_draft_is_lossless(self):
        draft = llm.Model(MODEL)
        # draft.close() before generating: the session keeps its own reference
        with self.speculative(32, draft, n_draft=4, after_set=draft.close) as s:
            total, _ = s.stats()
            self.assertGreater(total["drafted_tokens"], 0)
            # the same weights draft what they then verify: nearly every proposal is kept (not
            # necessarily all: a batched verify pass may round differently from one-token drafting)
            self.assertTrue(0 < total["accepted_tokens"] <= total["drafted_tokens"], total)
            self.assertLess(total["passes"], 1 + 32)

    def check_error_surfaces(self, call):
        with self.assertRaises(llm.Error) as cm:
            call()
        self.assertTrue(cm.exception.message)
        self.assertEqual(cm.exception.message, llm.lib().llm_last_error().decode())
        return cm.exception

    def test_speculation_bad_arguments(self):
        with self.session(n_ctx=64) as s:
            e = self.check_error_surfaces(lambda: s.set_speculation(lookup_ngram=2, n_draft=0))
            self.assertEqual(e.status, llm.ERR_INVALID_ARGUMENT)
            self.assertIn("n_draft", e.message)
            if CHAT_MODEL:  # the same size, but two token texts differ
                with llm.Model(CHAT_MODEL) as other:
                    e = self.check_error_surfaces(lambda: s.set_speculation(other))
                self.assertEqual(e.status, llm.ERR_INVALID_ARGUMENT)

    def test_next_batch_equals_solo(self):
        prompts = [PROMPT, "Lily and Ben"]
        want = [self.plain(p, 16) for p in prompts]
        sessions = [self.session() for _ in prompts]
        try:
            for s, p in zip(sessions, prompts):
                s.prefill(self.model.tokenize(p))
            got = [[], []]
            done = [False, False]
            for step in range(16):
                results = llm.next_batch(sessions)
                self.assertEqual(len(results), 2)
                for i, (token, status) in enumerate(results):
                    if done[i]:
                        continue
                    self.assertIn(status, (llm.OK, llm.DONE))
                    if status == llm.DONE:
                        done[i] = True
                    else:
                        got[i].append(token)
            self.assertEqual(got, want)
            self.assertEqual([s.n_past for s in sessions],
                             [len(self.model.tokenize(p)) + len(g) for p, g in zip(prompts, got)])
        finally:
            for s in sessions:
                s.close()

    def test_next_batch_whole_call_errors(self):
        with self.session(n_ctx=64) as s:
            s.prefill(self.model.tokenize(PROMPT))
            e = self.check_error_surfaces(lambda: llm.next_batch([]))
            self.assertEqual(e.status, llm.ERR_INVALID_ARGUMENT)
            e = self.check_error_surfaces(lambda: llm.next_batch([s, s]))
            self.assertEqual(e.status, llm.ERR_INVALID_ARGUMENT)
            self.assertIn("repeats", e.message)
            self.assertEqual(s.n_past, 5)

    def test_stats_version_2_and_fallback(self):
        with self.session(n_ctx=64) as s:
            s.generate(PROMPT, 8)
            total, last = s.stats()
            for key in ("passes", "drafted_tokens", "accepted_tokens"):
                self.assertIn(key, total)
                self.assertIn(key, last)
            self.assertGreaterEqual(total["passes"], 1 + 7)  # the prompt's chunk, then one per accept
            self.assertEqual((total["drafted_tokens"], total["accepted_tokens"]), (0, 0))
            # A library that refuses the binding's llm_stats version (older than 0.4): version 1.
            saved = llm.STATS_VERSION
            llm.STATS_VERSION = saved + 1
            try:
                old_total, _ = s.stats()
            finally:
                llm.STATS_VERSION = saved
            self.assertNotIn("passes", old_total)
            self.assertEqual(old_total["generated_tokens"], 8)


# A bounded object: every draw must close it within a few dozen tokens, then only the end remains.
PERSON_SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                                  "age": {"type": "integer", "minimum": 0, "maximum": 120}},
                 "required": ["name", "age"], "additionalProperties": False}


def fits_person(value):
    # JSON Schema's integer is any number without a fraction: 12.0 is one (json gives a float)
    age = value.get("age") if isinstance(value, dict) else None
    return (isinstance(value, dict) and set(value) == {"name", "age"} and isinstance(value["name"], str)
            and len(value["name"]) <= 8 and type(age) in (int, float) and age == int(age) and 0 <= age <= 120)


class StructuredOutput(ModelCase):
    def test_json_schema_generation_parses_and_fits(self):
        for seed in range(5):
            with llm.Session(self.model, temperature=1.0, seed=seed) as s:
                s.set_json_schema(PERSON_SCHEMA)
                text = s.generate(PROMPT, 200)
                self.assertEqual(s.last_status, llm.DONE, text)
                self.assertTrue(fits_person(json.loads(text)), text)
                self.assertGreaterEqual(s.stats_json()["grammar_tokens"], 1)

    def test_grammar_pull_and_errors(self):
        with llm.Session(self.model, temperature=1.0, seed=3) as s:
            s.set_grammar('root ::= "Lily" (" was" | " ran"){1,3} "."\n')
            text = "".join(piece for _, piece in s.tokens(PROMPT, 50))
            self.assertEqual(s.last_status, llm.DONE)
            self.assertRegex(text, r"^Lily( was| ran){1,3}\.$")
            with self.assertRaises(llm.Error) as e:
                s.set_grammar("root ::= [a-\n")
            self.assertEqual(e.exception.status, llm.ERR_INVALID_ARGUMENT)
            self.assertIn("line 2, column 1", str(e.exception))
            with self.assertRaises(llm.Error) as e:
                s.set_json_schema({"type": "object", "not": {}})
            self.assertEqual(e.exception.status, llm.ERR_UNSUPPORTED)
            s.set_grammar(None)
            s.set_json_schema(None)

    def test_stop_strings(self):
        with llm.Session(self.model, temperature=0) as s:
            full = s.generate(PROMPT, 40)
        self.assertIn(" Lily", full)
        with llm.Session(self.model, temperature=0) as s:
            s.set_stop([" Lily", "never there"])
            text = s.generate(PROMPT, 40)
            self.assertEqual(s.last_status, llm.STOPPED)
            self.assertEqual(text, full[:full.index(" Lily")])
            tokens = s.context_tokens()
            self.assertNotIn(" Lily", self.model.token_to_piece(tokens[-1]).decode(errors="replace"))
        with llm.Session(self.model, temperature=0) as s:  # the pull side gives the same text
            s.set_stop([" Lily"])
            pulled = "".join(piece for _, piece in s.tokens(PROMPT, 40))
            self.assertEqual((pulled, s.last_status), (full[:full.index(" Lily")], llm.STOPPED))
            with self.assertRaises(llm.Error):
                s.set_stop([""])
            s.set_stop(None)

    def test_logprobs_bias_and_penalties(self):
        with llm.Session(self.model, temperature=0) as s:
            s.set_logprobs(3)
            seen = []
            s.set_logprobs(3, on_token=lambda t, lp, top: seen.append((t, lp, top)))
            s.prefill(self.model.tokenize(PROMPT))
            tok = s.sample()
            token, logprob, top = s.logprobs()
            self.assertEqual(token, tok)
            self.assertEqual(len(top), 3)
            self.assertEqual(top[0][0], tok)  # greedy takes the most likely
            self.assertLess(logprob, 0.0)
            self.assertEqual(seen[0][0], tok)
            s.set_logit_bias({tok: float("-inf")})  # banned: the greedy choice moves
            self.assertNotEqual(s.sample(), tok)
            s.set_logit_bias(None)
            self.assertEqual(s.sample(), tok)
            with self.assertRaises(llm.Error):
                s.set_logit_bias({self.model.n_vocab: 1.0})
            s.set_logprobs(None)
            with self.assertRaises(llm.Error):
                s.logprobs()
        with llm.Session(self.model, temperature=0, presence_penalty=0.0, frequency_penalty=0.0) as a, \
                llm.Session(self.model, temperature=0, presence_penalty=2.0, frequency_penalty=1.0) as b:
            self.assertNotEqual(a.generate(PROMPT, 60), b.generate(PROMPT, 60))


@unittest.skipUnless(CHAT_MODEL, "LLM_CHAT_MODEL (written by run_tests.sh with bindings/chat_fixture.py) is not set")
class TwoTurnChat(unittest.TestCase):
    """The README's two-turn chat on a ChatML model: the model's template, parse_special, and only
    the new suffix evaluated on the second turn."""

    def test_two_turns(self):
        with llm.Model(CHAT_MODEL) as model, llm.Session(model, temperature=0, n_ctx=512, parse_special=True) as s:
            im_start, im_end = model.tokenize("<|im_start|><|im_end|>", add_bos=False, parse_special=True)
            self.assertEqual(model.eos, im_end)
            self.assertIn("<|im_start|>", model.chat_template())
            self.assertTrue(model.chat_template("tool_use").startswith("{{ bos_token }}"))
            chat = [("system", "You tell stories."), ("user", "Once upon a time")]
            prompt1 = model.apply_chat_template(chat)
            self.assertEqual(prompt1, "<|im_start|>system\nYou tell stories.<|im_end|>\n"
                                      "<|im_start|>user\nOnce upon a time<|im_end|>\n<|im_start|>assistant\n")
            reply1 = s.generate(prompt1, 16)
            want1 = model.tokenize(prompt1, parse_special=True)
            self.assertEqual(s.context_tokens()[:len(want1)], want1)
            self.assertEqual(want1.count(im_start), 3)
            chat += [("assistant", reply1), ("user", "Tell me more.")]
            prompt2 = model.apply_chat_template(chat)
            self.assertTrue(prompt2.startswith(prompt1 + reply1))
            suffix = prompt2[len(prompt1 + reply1):]
            want2 = model.tokenize(suffix, add_bos=False, parse_special=True)
            self.assertEqual(want2[0], im_end)
            before = s.n_past
            reply2 = s.generate(suffix, 16)
            self.assertEqual(s.stats()[1]["prompt_tokens"], len(want2))  # only the new suffix
            self.assertEqual(s.context_tokens()[before:before + len(want2)], want2)
            self.assertTrue(reply2)


if __name__ == "__main__":
    unittest.main()
