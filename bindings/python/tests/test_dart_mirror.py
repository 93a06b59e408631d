"""dart_mirror: replays bindings/dart/lib/llm.dart's exact call sequence against the real library.

No Dart SDK is available here, so the Dart binding cannot be compiled or run. These tests make the
same C calls, in the same order, on the same kinds of threads, as the Dart code does:

  load    (Model.load -> _loadWorker, on a background isolate = a worker thread here)
          llm_model_params_init; fields set; progress = _onProgress, progress_user = a calloc'd
          int32 cancel flag owned by the main isolate; llm_model_load; llm_last_error on failure.
          _onProgress posts the fraction to the main isolate and returns flag == 0.
  session (Session(), on the main isolate = the main thread)
          llm_session_params_init; fields set; llm_session_create; llm_last_error on failure.
  generate (Session.generate -> _generateWorker, on a background isolate = a worker thread)
          llm_session_n_past; llm_tokenize (cap = len + 8; on BUFFER_TOO_SMALL once more with the
          size it asked for); llm_session_prefill; then llm_session_next(piece cap 256) per token,
          llm_token_to_piece when a piece did not fit; llm_last_error right after a failure; each
          piece posted to the main isolate, then ['done', status, error].
  cancel  (Session.cancel, main thread while the worker is inside the pull loop) llm_session_cancel
  close   (Session.close: cancel, wait for the worker, llm_session_free; Model.close: llm_model_free)
  strings (Model.metaString / chatTemplate / applyChatTemplate, main thread) _stringOut: the call with
          buf NULL, cap 0; NOT_FOUND -> null; then a calloc'd buffer of len + 1 and the call again;
          llm_last_error right after a failure. applyChatTemplate passes a calloc'd
          llm_chat_message array (one element when there are no messages) and n_msgs.
  tokens  (Session.tokens, main thread) llm_session_tokens(NULL, 0), then with a buffer of n (>= 1).
  truncate (Session.truncate, main thread) llm_session_truncate.
  state   (Session.save/load -> _stateWorker on Isolate.run = a worker thread) llm_session_save or
          llm_session_load, then llm_last_error on failure.
  speculation (Session.setSpeculation, main thread; libllm 0.4) llm_speculation_params_init into a
          calloc'd struct (version 1); draft / n_draft / lookup_ngram / draft_p_min set when given;
          llm_session_set_speculation; llm_last_error on failure.
  batch   (nextBatch -> _batchWorker on Isolate.run = a worker thread) an empty list fails before any
          call; else calloc'd arrays of n handles, tokens and statuses; llm_session_next_batch;
          llm_last_error right after a failure. The sessions are prefilled by generate(prompt, 0).
  embed   (Session.embed, main thread; libllm 0.4) calloc'd llm_embed_params (version 1) through
          llm_embed_params_init, pooling and normalize set; a calloc'd array of n calloc'd UTF-8
          strings, n_rows (n int32), n_out (size_t), n_dim (int32); llm_session_embed with out NULL,
          cap 0 (BUFFER_TOO_SMALL expected, else llm_last_error), then with a calloc'd float buffer
          of n_out (at least 1) floats; the rows split per text by n_rows * n_dim.
  stats   (Session.stats, main thread) llm_stats_init(version 2); if that is INVALID_ARGUMENT
          (libllm < 0.4) llm_stats_init(version 1); llm_session_stats(total, NULL); the 0.4 keys only
          with version 2.
  structured (Session.setJsonSchema / setGrammar / setStop / setLogitBias / setLogprobs / logprobs,
          main thread; libllm 0.4) the text as a calloc'd UTF-8 string (null: NULL); stops as a
          calloc'd array of n strings (NULL when empty); bias as calloc'd token and float arrays;
          llm_logprobs_params_init(version 1) into a calloc'd struct, n_top set; llm_last_error right
          after a failure. The generate worker then posts the text that comes with LLM_DONE /
          LLM_STOPPED as a piece with token -1, at maxTokens the llm_session_flush_held text (when
          the library has it), and ['done', status, error] with the pull loop's last status.
The generate worker tokenizes with the session's parseSpecial (Session(parseSpecial: ...)).

SendPort/ReceivePort become a queue.Queue; raw ctypes calls replace the Dart FFI lookups.
If llm.dart changes its call sequence, change this file the same way.
"""
import ctypes
import json
import queue
import threading
import unittest

from tests.common import MODEL, PROMPT, STORY

import libllm_runtime as llm

PIECE_CAP = 256  # _pieceCap in llm.dart


class Port(queue.Queue):
    """A ReceivePort: a worker that died (Isolate.spawn's onError) fails the test at once instead of
    leaving the main thread waiting for the timeout."""

    def get(self, block=True, timeout=None):
        m = super().get(block, timeout)
        if m[0] == "died":
            raise AssertionError("worker died: " + m[1])
        return m


def spawn(target, port, *args):
    """Isolate.spawn(target, [port, ...args], onError: port)."""
    def run():
        try:
            target(port, *args)
        except BaseException as e:  # noqa: B902 -- any death must reach the listener
            port.put(["died", repr(e)])
            raise
    worker = threading.Thread(target=run)
    worker.start()
    return worker


def load_worker(port, model_path, n_threads, residency, ram_budget_bytes, cancel_flag_address):
    """_loadWorker."""
    L = llm.lib()

    def on_progress(fraction, user):  # _onProgress
        port.put(["progress", fraction])
        return ctypes.c_int32.from_address(user).value == 0

    progress_cb = llm.PROGRESS_CB(on_progress)  # Pointer.fromFunction<LlmProgressNative>
    p = llm.ModelParams()
    out = ctypes.c_void_p()
    L.llm_model_params_init(ctypes.byref(p), llm.MODEL_PARAMS_VERSION)
    p.n_threads = n_threads
    p.residency = residency
    p.ram_budget_bytes = ram_budget_bytes
    p.progress = progress_cb
    p.progress_user = cancel_flag_address
    status = L.llm_model_load(model_path.encode(), ctypes.byref(p), ctypes.byref(out))
    error = L.llm_last_error().decode() if status < 0 else ""
    port.put(["done", status, 0 if status < 0 else out.value, error])


def model_load(model_path, cancel_before_start=False, on_progress=None):
    """Model.load on the main thread: returns (status, model address, error, fractions)."""
    cancel_flag = ctypes.c_int32(0)  # calloc<Int32>()
    if cancel_before_start:
        cancel_flag.value = 1
    port = Port()
    worker = spawn(load_worker, port, model_path, 0, llm.RESIDENCY_RESIDENT, 0,
                   ctypes.addressof(cancel_flag))  # Isolate.spawn
    fractions = []
    while True:
        m = port.get(timeout=120)
        if m[0] == "progress":
            fractions.append(m[1])
            if on_progress:
                on_progress(m[1], cancel_flag)
            continue
        worker.join()
        return m[1], m[2], m[3], fractions


def generate_worker(port, model_address, session_address, prompt, max_tokens, parse_special=False):
    """_generateWorker."""
    L = llm.lib()
    m = ctypes.c_void_p(model_address)
    s = ctypes.c_void_p(session_address)
    tok = ctypes.c_int32(0)
    length = ctypes.c_size_t(0)
    piece = ctypes.create_string_buffer(PIECE_CAP)
    status = llm.OK
    error = ""
    if prompt:
        # 1. tokenize
        text = prompt.encode()
        add_bos = L.llm_session_n_past(s) == 0
        cap = len(text) + 8
        tokens = (ctypes.c_int32 * cap)()
        n = ctypes.c_int32(0)
        status = L.llm_tokenize(m, text, len(text), add_bos, parse_special, tokens, cap, ctypes.byref(n))
        if status == llm.ERR_BUFFER_TOO_SMALL:
            cap = n.value
            tokens = (ctypes.c_int32 * cap)()
            status = L.llm_tokenize(m, text, len(text), add_bos, parse_special, tokens, cap, ctypes.byref(n))
        # 2. prefill
        if status >= 0:
            status = L.llm_session_prefill(s, tokens, n.value)
        if status < 0:
            error = L.llm_last_error().decode()
    # 3. the pull loop
    i = 0
    while status >= 0 and i < max_tokens:
        status = L.llm_session_next(s, ctypes.byref(tok), piece, PIECE_CAP, ctypes.byref(length))
        if status == llm.ERR_BUFFER_TOO_SMALL:
            big = ctypes.create_string_buffer(length.value)
            want = length.value
            has_stop = llm.has("llm_session_flush_held")  # lib.hasStopStrings
            status = L.llm_session_flush_held(s, big, want, ctypes.byref(length)) if has_stop else llm.OK
            if status >= 0 and (not has_stop or length.value == 0):
                status = L.llm_token_to_piece(m, tok.value, big, want, ctypes.byref(length))
            if status >= 0:
                port.put(["piece", tok.value, big.raw[:length.value]])
        elif status in (llm.DONE, llm.STOPPED):
            if length.value > 0:  # stop strings: the text held back comes with the end
                port.put(["piece", -1, piece.raw[:length.value]])
            break
        elif status >= 0:
            port.put(["piece", tok.value, piece.raw[:length.value]])
        if status < 0:
            error = L.llm_last_error().decode()
        i += 1
    # 4. at maxTokens, text still held back for stop strings (lib.hasStopStrings: the symbol exists)
    if status == llm.OK and llm.has("llm_session_flush_held"):
        if L.llm_session_flush_held(s, None, 0, ctypes.byref(length)) == llm.ERR_BUFFER_TOO_SMALL:
            held = ctypes.create_string_buffer(length.value)
            if L.llm_session_flush_held(s, held, length.value, ctypes.byref(length)) >= 0:
                port.put(["piece", -1, held.raw[:length.value]])
    port.put(["done", status, error])


class DartMirror(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        status, address, error, cls.fractions = model_load(MODEL)
        if status < 0:
            raise llm.Error(status, error)
        cls.model = ctypes.c_void_p(address)

    @classmethod
    def tearDownClass(cls):
        llm.lib().llm_model_free(cls.model)  # Model.close

    def session_create(self, n_ctx=0, parse_special=False, kv_type=llm.KV_F16, temperature=0.0, seed=0):
        """Session() on the main thread (temperature 0 for a deterministic story)."""
        L = llm.lib()
        p = llm.SessionParams()
        out = ctypes.c_void_p()
        if L.llm_session_params_init(ctypes.byref(p), 3) == llm.ERR_INVALID_ARGUMENT:  # _sessionParamsVersion
            L.llm_session_params_init(ctypes.byref(p), 2)
        else:
            p.presence_penalty = 0.0
            p.frequency_penalty = 0.0
        p.n_ctx = n_ctx
        p.n_threads = 0
        p.temperature = temperature
        p.top_k = 40
        p.top_p = 0.95
        p.min_p = 0.05
        p.seed = seed
        p.parse_special = parse_special
        p.kv_type_k = kv_type
        p.kv_type_v = kv_type
        p.context_shift = False
        p.n_keep = 0
        status = L.llm_session_create(self.model, ctypes.byref(p), ctypes.byref(out))
        if status < 0:
            raise llm.Error(status, L.llm_last_error().decode())
        return out

    def run_generate(self, s, prompt, max_tokens, on_piece=None, parse_special=False):
        """Session.generate: spawns the worker and listens on the port; returns (pieces, status, error)."""
        port = Port()
        worker = spawn(generate_worker, port, self.model.value, s.value, prompt, max_tokens, parse_special)
        pieces = []
        while True:
            m = port.get(timeout=300)
            if m[0] == "piece":
                pieces.append((m[1], m[2]))
                if on_piece:
                    on_piece(len(pieces))
                continue
            worker.join()
            return pieces, m[1], m[2]

    def test_dart_mirror_load_progress(self):
        self.assertTrue(self.fractions)
        self.assertTrue(all(0.0 <= f <= 1.0 for f in self.fractions))

    def test_dart_mirror_load_cancel(self):
        # Model.load(cancel: ...): the main thread sets the flag; the worker's progress returns false.
        def cancel_on_first(fraction, flag):
            flag.value = 1
        status, address, error, _ = model_load(MODEL, on_progress=cancel_on_first)
        if status == llm.OK:  # the load finished before the flag was seen: free it and use a pre-set flag
            llm.lib().llm_model_free(ctypes.c_void_p(address))
            status, address, error, _ = model_load(MODEL, cancel_before_start=True)
        self.assertEqual(status, llm.ERR_CANCELLED)
        self.assertEqual(address, 0)
        self.assertIn("cancel", error)

    def test_dart_mirror_generate(self):
        s = self.session_create()
        try:
            pieces, status, error = self.run_generate(s, PROMPT, 32)
            self.assertEqual(status, llm.OK, error)
            self.assertEqual(len(pieces), 32)
            text = b"".join(p for _, p in pieces).decode()
            self.assertTrue(text.startswith(STORY), text)
            # continue from the context ("" prompt): the worker skips tokenize/prefill
            more, status, error = self.run_generate(s, "", 4)
            self.assertEqual(status, llm.OK, error)
            self.assertEqual(len(more), 4)
        finally:
            llm.lib().llm_session_free(s)  # Session.close

    def test_dart_mirror_cancel_from_main_thread(self):
        s = self.session_create(n_ctx=512)
        try:
            for _attempt in range(3):
                llm.lib().llm_session_reset(s)
                # Session.cancel on the main thread as soon as the first piece arrives, while the
                # worker runs on in its pull loop (max_tokens beyond the context: it cannot finish
                # normally before hitting the end of the context).
                pieces, status, error = self.run_generate(
                    s, PROMPT, 100000, on_piece=lambda n: n == 1 and llm.lib().llm_session_cancel(s))
                if status != llm.ERR_CONTEXT_FULL:
                    break
            self.assertEqual(status, llm.ERR_CANCELLED, error)
            self.assertIn("cancel", error)
            self.assertGreaterEqual(len(pieces), 1)
            self.assertLess(len(pieces), 512)
            # still usable: reset and generate the story again
            self.assertEqual(llm.lib().llm_session_reset(s), llm.OK)
            pieces, status, error = self.run_generate(s, PROMPT, 32)
            self.assertEqual(status, llm.OK, error)
            self.assertTrue(b"".join(p for _, p in pieces).decode().startswith(STORY))
        finally:
            llm.lib().llm_session_free(s)

    def test_dart_mirror_close_while_generating(self):
        # Session.close(): cancel, wait for the worker to leave the library, then free.
        s = self.session_create(n_ctx=512)
        port = Port()
        worker = spawn(generate_worker, port, self.model.value, s.value, PROMPT, 100000)
        self.assertEqual(port.get(timeout=300)[0], "piece")
        llm.lib().llm_session_cancel(s)
        while True:
            m = port.get(timeout=300)
            if m[0] == "done":
                break
        worker.join()
        llm.lib().llm_session_free(s)
        self.assertIn(m[1], (llm.ERR_CANCELLED, llm.ERR_CONTEXT_FULL))

    # -- libllm 0.3 --

    def string_out(self, call):
        """_stringOut: returns the string, or None for NOT_FOUND; raises llm.Error otherwise."""
        L = llm.lib()
        length = ctypes.c_size_t(0)
        status = call(None, 0, ctypes.byref(length))
        while True:
            if status == llm.ERR_NOT_FOUND:
                return None
            if status != llm.ERR_BUFFER_TOO_SMALL and status < 0:
                raise llm.Error(status, L.llm_last_error().decode())
            cap = length.value + 1
            buf = ctypes.create_string_buffer(cap)  # calloc<Uint8>(cap)
            status = call(buf, cap, ctypes.byref(length))
            if status == llm.ERR_BUFFER_TOO_SMALL:
                continue
            if status == llm.ERR_NOT_FOUND:
                return None
            if status < 0:
                raise llm.Error(status, L.llm_last_error().decode())
            return buf.raw[:length.value].decode(errors="replace")

    def render_chat(self, model, template, messages, add_assistant=True):
        """_renderChat."""
        L = llm.lib()
        tmpl = template.encode() if template is not None else None
        msgs = (llm.ChatMessage * max(len(messages), 1))()
        keep = []
        for i, (role, content) in enumerate(messages):
            keep += [role.encode(), content.encode()]
            msgs[i].role, msgs[i].content = keep[-2], keep[-1]
        out = self.string_out(lambda buf, cap, n: L.llm_chat_apply_template(
            model, tmpl, msgs, len(messages), add_assistant, buf, cap, n))
        if out is None:
            raise llm.Error(llm.ERR_NOT_FOUND, "the model has no chat template")
        return out

    def test_dart_mirror_meta_and_chat(self):
        from tests.common import CHATML, CHATML_MESSAGES, CHATML_RENDERED
        L = llm.lib()
        meta = lambda key: self.string_out(lambda buf, cap, n: L.llm_model_meta_string(self.model, key, buf, cap, n))
        self.assertEqual(meta(b"general.architecture"), "llama")
        self.assertIsNone(meta(b"general.no_such_key"))
        tmpl = lambda name: self.string_out(lambda buf, cap, n: L.llm_model_chat_template(self.model, name, buf, cap, n))
        self.assertIsNone(tmpl(None))
        self.assertIsNone(tmpl(b"tool_use"))
        # applyChatTemplate(lib, template, messages): no model
        self.assertEqual(self.render_chat(None, CHATML, CHATML_MESSAGES), CHATML_RENDERED)
        self.assertEqual(self.render_chat(self.model, "{{ bos_token }}" + CHATML, CHATML_MESSAGES), "<s>" + CHATML_RENDERED)
        with self.assertRaises(llm.Error) as cm:
            self.render_chat(self.model, None, CHATML_MESSAGES)
        self.assertEqual(cm.exception.status, llm.ERR_NOT_FOUND)

    def session_tokens(self, s):
        """Session.tokens."""
        L = llm.lib()
        n = ctypes.c_int32(0)
        status = L.llm_session_tokens(s, None, 0, ctypes.byref(n))
        while True:
            if status != llm.ERR_BUFFER_TOO_SMALL and status < 0:
                raise llm.Error(status, L.llm_last_error().decode())
            cap = n.value
            buf = (ctypes.c_int32 * max(cap, 1))()
            status = L.llm_session_tokens(s, buf, cap, ctypes.byref(n))
            if status == llm.ERR_BUFFER_TOO_SMALL:
                continue
            if status < 0:
                raise llm.Error(status, L.llm_last_error().decode())
            return list(buf[:n.value])

    def test_dart_mirror_parse_special_tokens_truncate(self):
        L = llm.lib()
        s = self.session_create(n_ctx=64, parse_special=True, kv_type=llm.KV_F32)
        try:
            self.assertEqual(self.session_tokens(s), [])
            pieces, status, error = self.run_generate(s, PROMPT + "</s>", 1, parse_special=True)
            self.assertEqual(status, llm.OK, error)
            toks = self.session_tokens(s)
            self.assertEqual(len(toks), 7)
            self.assertEqual(toks[5], L.llm_model_token_eos(self.model))
            self.assertEqual(L.llm_session_truncate(s, 2), llm.OK)  # Session.truncate
            self.assertEqual(self.session_tokens(s), toks[:2])
            self.assertEqual(L.llm_session_truncate(s, 3), llm.ERR_INVALID_ARGUMENT)
        finally:
            L.llm_session_free(s)

    def test_dart_mirror_state_worker(self):
        """_stateWorker on a worker thread: save, then load into a new session."""
        import os
        import tempfile
        L = llm.lib()

        def state_worker(out, s, path, save):
            status = (L.llm_session_save if save else L.llm_session_load)(s, path.encode())
            out.append((status, L.llm_last_error().decode() if status < 0 else ""))

        def run(s, path, save):
            out = []
            th = threading.Thread(target=state_worker, args=(out, s, path, save))
            th.start()
            th.join()
            return out[0]

        a = self.session_create(n_ctx=128)
        b = self.session_create(n_ctx=128)
        try:
            _, status, error = self.run_generate(a, PROMPT, 8)
            self.assertEqual(status, llm.OK, error)
            with tempfile.TemporaryDirectory() as d:
                path = os.path.join(d, "s.llmstate")
                status, error = run(a, path, True)
                self.assertEqual(status, llm.OK, error)
                self.assertEqual(run(b, path, False), (llm.OK, ""))
                self.assertEqual(self.session_tokens(b), self.session_tokens(a))
                rest_a = self.run_generate(a, "", 8)[0]
                rest_b = self.run_generate(b, "", 8)[0]
                self.assertEqual(rest_a, rest_b)
                status, error = run(b, os.path.join(d, "missing"), False)
                self.assertLess(status, 0)
                self.assertTrue(error)
        finally:
            L.llm_session_free(a)
            L.llm_session_free(b)


    # -- libllm 0.4 --

    def set_speculation(self, s, draft=None, n_draft=None, lookup_ngram=None, draft_p_min=None):
        """Session.setSpeculation."""
        L = llm.lib()
        p = llm.SpeculationParams()  # calloc<LlmSpeculationParams>()
        status = L.llm_speculation_params_init(ctypes.byref(p), 1)
        if status < 0:
            raise llm.Error(status, L.llm_last_error().decode())
        if draft is not None:
            p.draft = draft.value
        if n_draft is not None:
            p.n_draft = n_draft
        if lookup_ngram is not None:
            p.lookup_ngram = lookup_ngram
        if draft_p_min is not None:
            p.draft_p_min = draft_p_min
        status = L.llm_session_set_speculation(s, ctypes.byref(p))
        if status < 0:
            raise llm.Error(status, L.llm_last_error().decode())

    def next_batch(self, sessions):
        """nextBatch: raises llm.Error for a whole-call failure; returns [(token, status)]."""
        if not sessions:
            raise llm.Error(llm.ERR_INVALID_ARGUMENT, "nextBatch: no sessions")
        addresses = [s.value for s in sessions]
        out = []

        def batch_worker():  # _batchWorker
            L = llm.lib()
            n = len(addresses)
            handles = (ctypes.c_void_p * n)(*addresses)
            tokens = (ctypes.c_int32 * n)()
            statuses = (ctypes.c_int32 * n)()
            status = L.llm_session_next_batch(handles, n, tokens, statuses)
            if status < 0:
                out.append((status, L.llm_last_error().decode(), [], []))
            else:
                out.append((status, "", list(tokens), list(statuses)))

        th = threading.Thread(target=batch_worker)  # Isolate.run
        th.start()
        th.join()
        status, error, tokens, statuses = out[0]
        if status < 0:
            raise llm.Error(status, error)
        return list(zip(tokens, statuses))

    def stats(self, s):
        """Session.stats."""
        L = llm.lib()
        total = llm.Stats()
        version = 2
        if L.llm_stats_init(ctypes.byref(total), version) == llm.ERR_INVALID_ARGUMENT:
            version = 1
        self.assertEqual(L.llm_stats_init(ctypes.byref(total), version), llm.OK)
        self.assertEqual(L.llm_session_stats(s, ctypes.byref(total), None), llm.OK)
        out = {"prompt_tokens": total.prompt_tokens, "generated_tokens": total.generated_tokens,
               "prefill_seconds": total.prefill_seconds, "decode_seconds": total.decode_seconds}
        if version >= 2:
            out.update(passes=total.passes, drafted_tokens=total.drafted_tokens,
                       accepted_tokens=total.accepted_tokens)
        return out

    def speculation_is_lossless(self, n, after_set=lambda: None, **spec):
        """Generates n tokens of PROMPT on a plain session and on one with set_speculation(**spec)
        (after_set runs right after that call, even if it fails); asserts both give the same tokens
        and returns the second session's stats."""
        L = llm.lib()
        a, b = self.session_create(n_ctx=256), self.session_create(n_ctx=256)
        try:
            want, status, error = self.run_generate(a, PROMPT, n)
            self.assertEqual(status, llm.OK, error)
            try:
                self.set_speculation(b, **spec)
            finally:
                after_set()
            got, status, error = self.run_generate(b, PROMPT, n)
            self.assertEqual(status, llm.OK, error)
            self.assertEqual(got, want)
            return self.stats(b)
        finally:
            L.llm_session_free(a)
            L.llm_session_free(b)

    def test_dart_mirror_speculation_with_lookup(self):
        self.speculation_is_lossless(48, lookup_ngram=3)

    def test_dart_mirror_speculation_with_a_draft(self):
        status, address, error, _ = model_load(MODEL)  # Model.load of the draft
        self.assertEqual(status, llm.OK, error)
        draft = ctypes.c_void_p(address)
        # draft.close() right after setSpeculation: the session keeps its own reference
        st = self.speculation_is_lossless(32, after_set=lambda: llm.lib().llm_model_free(draft),
                                          draft=draft, n_draft=4)
        self.assertGreater(st["drafted_tokens"], 0)
        self.assertTrue(0 < st["accepted_tokens"] <= st["drafted_tokens"], st)

    def test_dart_mirror_speculation_error_message(self):
        s = self.session_create(n_ctx=64)
        try:
            with self.assertRaises(llm.Error) as cm:
                self.set_speculation(s, lookup_ngram=2, n_draft=0)
            e = cm.exception
            self.assertTrue(e.message)
            self.assertEqual(e.status, llm.ERR_INVALID_ARGUMENT)
            self.assertIn("n_draft", e.message)
        finally:
            llm.lib().llm_session_free(s)

    def test_dart_mirror_next_batch(self):
        L = llm.lib()
        prompts = [PROMPT, "Lily and Ben"]
        want = []
        for p in prompts:
            s = self.session_create(n_ctx=256)
            pieces, status, error = self.run_generate(s, p, 16)
            self.assertEqual(status, llm.OK, error)
            want.append([t for t, _ in pieces])
            L.llm_session_free(s)
        sessions = [self.session_create(n_ctx=256) for _ in prompts]
        try:
            for s, p in zip(sessions, prompts):
                self.assertEqual(self.run_generate(s, p, 0)[1], llm.OK)  # generate(prompt, 0): prefill only
            got, done = [[], []], [False, False]
            for _ in range(16):
                results = self.next_batch(sessions)
                for i, (token, status) in enumerate(results):
                    if done[i]:
                        continue
                    self.assertIn(status, (llm.OK, llm.DONE))
                    if status == llm.DONE:
                        done[i] = True
                    else:
                        got[i].append(token)
            self.assertEqual(got, want)
        finally:
            for s in sessions:
                L.llm_session_free(s)

    def test_dart_mirror_next_batch_whole_call_error(self):
        s = self.session_create(n_ctx=64)
        try:
            self.assertEqual(self.run_generate(s, PROMPT, 0)[1], llm.OK)
            with self.assertRaises(llm.Error) as cm:
                self.next_batch([s, s])
            self.assertEqual(cm.exception.status, llm.ERR_INVALID_ARGUMENT)
            self.assertIn("repeats", cm.exception.message)  # read on the worker thread
            with self.assertRaises(llm.Error):
                self.next_batch([])
        finally:
            llm.lib().llm_session_free(s)

    def test_dart_mirror_stats(self):
        s = self.session_create(n_ctx=64)
        try:
            self.assertEqual(self.run_generate(s, PROMPT, 8)[1], llm.OK)
            st = self.stats(s)
            self.assertEqual(st["generated_tokens"], 8)
            for key in ("passes", "drafted_tokens", "accepted_tokens"):
                self.assertIn(key, st)
            self.assertGreaterEqual(st["passes"], 1 + 7)
        finally:
            llm.lib().llm_session_free(s)

    def embed(self, s, texts, pooling=-1, normalize=False):
        """Session.embed."""
        L = llm.lib()
        p = llm.EmbedParams()
        status = L.llm_embed_params_init(ctypes.byref(p), 1)
        if status < 0:
            raise llm.Error(status, L.llm_last_error().decode())
        p.pooling = pooling
        p.normalize = normalize
        ptrs = (ctypes.c_char_p * len(texts))(*[t.encode() for t in texts])
        rows = (ctypes.c_int32 * len(texts))()
        n, dim = ctypes.c_size_t(0), ctypes.c_int32(0)
        status = L.llm_session_embed(s, ptrs, len(texts), ctypes.byref(p), None, 0, ctypes.byref(n),
                                     ctypes.byref(dim), rows)
        if status != llm.ERR_BUFFER_TOO_SMALL and status < 0:
            raise llm.Error(status, L.llm_last_error().decode())
        out = (ctypes.c_float * max(n.value, 1))()
        status = L.llm_session_embed(s, ptrs, len(texts), ctypes.byref(p), out, n.value, ctypes.byref(n),
                                     ctypes.byref(dim), rows)
        if status < 0:
            raise llm.Error(status, L.llm_last_error().decode())
        result, at = [], 0
        for r in rows:
            result.append(list(out[at:at + r * dim.value]))
            at += r * dim.value
        return result

    def test_dart_mirror_embed(self):
        if not llm.has("llm_session_embed"):
            self.skipTest("libllm < 0.4")
        s = self.session_create(n_ctx=64)
        try:
            rows = self.embed(s, [PROMPT, "a second text"], pooling=llm.POOLING_MEAN, normalize=True)
            self.assertEqual(len(rows), 2)
            dim = len(rows[0])
            self.assertGreater(dim, 0)
            self.assertAlmostEqual(sum(v * v for v in rows[0]), 1.0, places=4)
            self.assertEqual(self.embed(s, [PROMPT], pooling=llm.POOLING_MEAN, normalize=True)[0], rows[0])
            with self.assertRaises(llm.Error) as e:
                self.embed(s, [PROMPT, ""], pooling=llm.POOLING_MEAN)
            self.assertEqual(e.exception.status, llm.ERR_INVALID_ARGUMENT)
            self.assertIn("empty", e.exception.message)
        finally:
            llm.lib().llm_session_free(s)


    # ---- structured output (libllm 0.4): Session.setJsonSchema / setGrammar / setStop / setLogprobs /
    # logprobs / setLogitBias, all on the main thread, llm_last_error right after a failure.

    def checked(self, status):
        if status < 0:
            raise llm.Error(status, llm.lib().llm_last_error().decode())
        return status

    def test_dart_mirror_structured(self):
        L = llm.lib()
        schema = json.dumps({"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                                              "age": {"type": "integer", "minimum": 0, "maximum": 120}},
                             "required": ["name", "age"], "additionalProperties": False})  # jsonEncode
        for seed in range(5):
            s = self.session_create(temperature=1.0, seed=seed)
            try:
                self.checked(L.llm_session_set_json_schema(s, schema.encode()))  # toNativeUtf8
                pieces, status, error = self.run_generate(s, PROMPT, 200)
                self.assertEqual(status, llm.DONE, error)  # lastStatus
                value = json.loads(b"".join(p for _, p in pieces))
                self.assertEqual(set(value), {"name", "age"})
                self.assertLessEqual(len(value["name"]), 8)
                self.assertTrue(value["age"] == int(value["age"]) and 0 <= value["age"] <= 120)
            finally:
                L.llm_session_free(s)
        s = self.session_create()
        try:
            with self.assertRaises(llm.Error) as e:
                self.checked(L.llm_session_set_grammar(s, b"root ::= [a-\n", None))
            self.assertIn("line 2, column 1", str(e.exception))
            full = b"".join(p for _, p in self.run_generate(s, PROMPT, 40)[0])
            L.llm_session_reset(s)
            # setStop: a calloc'd array of n calloc'd strings
            stops = (ctypes.c_char_p * 2)(b" Lily", b"never there")
            self.checked(L.llm_session_set_stop(s, stops, 2))
            pieces, status, error = self.run_generate(s, PROMPT, 40)
            self.assertEqual((status, b"".join(p for _, p in pieces)), (llm.STOPPED, full[:full.index(b" Lily")]))
            self.checked(L.llm_session_set_stop(s, None, 0))
            L.llm_session_reset(s)
            # setLogprobs(3): calloc'd llm_logprobs_params through llm_logprobs_params_init, n_top set
            p = llm.LogprobsParams()
            self.checked(L.llm_logprobs_params_init(ctypes.byref(p), 1))
            p.n_top = 3
            self.checked(L.llm_session_set_logprobs(s, ctypes.byref(p)))
            first = self.run_generate(s, PROMPT, 1)[0][0][0]
            tok, lp = ctypes.c_int32(0), ctypes.c_float(0)
            top, n = ctypes.POINTER(llm.TokenLogprob)(), ctypes.c_int32(0)
            self.checked(L.llm_session_logprobs(s, ctypes.byref(tok), ctypes.byref(lp), ctypes.byref(top), ctypes.byref(n)))
            self.assertEqual((tok.value, n.value, top[0].token), (first, 3, first))
            self.checked(L.llm_session_set_logprobs(s, None))
            L.llm_session_reset(s)
            # setLogitBias: calloc'd token and bias arrays of n (at least 1)
            toks, vals = (ctypes.c_int32 * 1)(first), (ctypes.c_float * 1)(float("-inf"))
            self.checked(L.llm_session_set_logit_bias(s, toks, vals, 1))
            self.assertNotEqual(self.run_generate(s, PROMPT, 1)[0][0][0], first)
        finally:
            L.llm_session_free(s)


if __name__ == "__main__":
    unittest.main()
