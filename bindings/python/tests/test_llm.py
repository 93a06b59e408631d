"""The Python binding against the real library and stories260K."""
import ctypes
import threading
import unittest

from tests.common import MODEL, PROMPT, STORY

import llm


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
        self.assertEqual(ctypes.sizeof(llm.SessionParams), 56)
        self.assertEqual(llm.SessionParams.seed.offset, 40)
        self.assertEqual(llm.SessionParams.logits_all.offset, 48)
        self.assertEqual(ctypes.sizeof(llm.Io), 40)
        self.assertEqual(ctypes.sizeof(llm.MemoryPlan), 80)
        self.assertEqual(llm.MemoryPlan.minimum_weight_bytes.offset, 72)
        self.assertEqual(ctypes.sizeof(llm.Stats), 64)
        self.assertEqual(llm.Stats.io_wait_seconds.offset, 56)

    def test_init_sets_current_versions(self):
        p = llm.ModelParams()
        self.assertEqual(llm.lib().llm_model_params_init(ctypes.byref(p), llm.MODEL_PARAMS_VERSION), llm.OK)
        self.assertEqual(p.version, llm.MODEL_PARAMS_VERSION)
        self.assertEqual(p.prefetch_depth, 1)
        s = llm.SessionParams()
        self.assertEqual(llm.lib().llm_session_params_init(ctypes.byref(s), llm.SESSION_PARAMS_VERSION), llm.OK)
        self.assertEqual(s.version, llm.SESSION_PARAMS_VERSION)
        self.assertAlmostEqual(s.temperature, 0.8, places=5)

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
        self.assertEqual(llm.version(), "0.2.0")
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


if __name__ == "__main__":
    unittest.main()
