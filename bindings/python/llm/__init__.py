"""Python bindings for libllm (ctypes, standard library only).

    import llm
    with llm.Model("stories260K.gguf") as model, llm.Session(model, temperature=0) as s:
        for token, piece in s.tokens("Once upon a time", max_tokens=32):
            print(piece, end="", flush=True)

The library is found through LLM_LIBRARY (path of libllm.so), LLM_LIB_DIR (its directory), or the
system's library search path. Threading: a Model may be shared by sessions on several threads; a
Session must be used by one thread at a time, except Session.cancel(), which any thread may call.
ctypes releases the GIL during every libllm call, so generation on a worker thread does not block
the others.
"""

import codecs
import ctypes
import ctypes.util
import json
import os
import sys
import threading

__all__ = [
    "Error", "Model", "Session", "MemoryPlan", "Stats", "lib", "version",
    "OK", "DONE", "ERR_INVALID_ARGUMENT", "ERR_IO", "ERR_FORMAT", "ERR_UNSUPPORTED",
    "ERR_OUT_OF_MEMORY", "ERR_CONTEXT_FULL", "ERR_BUFFER_TOO_SMALL", "ERR_CANCELLED", "ERR_INTERNAL",
    "RESIDENCY_RESIDENT", "RESIDENCY_STREAMED", "RESIDENCY_BUDGET",
    "PAGE_CACHE_KEEP", "PAGE_CACHE_DROP", "PAGE_CACHE_DIRECT",
]

# ---- constants (llm.h) --------------------------------------------------------------------------

OK = 0
DONE = 1
ERR_INVALID_ARGUMENT = -1
ERR_IO = -2
ERR_FORMAT = -3
ERR_UNSUPPORTED = -4
ERR_OUT_OF_MEMORY = -5
ERR_CONTEXT_FULL = -6
ERR_BUFFER_TOO_SMALL = -7
ERR_CANCELLED = -8
ERR_INTERNAL = -9

RESIDENCY_RESIDENT = 0
RESIDENCY_STREAMED = 1
RESIDENCY_BUDGET = 2
PAGE_CACHE_KEEP = 0
PAGE_CACHE_DROP = 1
PAGE_CACHE_DIRECT = 2

LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR, LOG_OFF = range(5)

MODEL_PARAMS_VERSION = 3
SESSION_PARAMS_VERSION = 1
IO_VERSION = 1
MEMORY_PLAN_VERSION = 1
STATS_VERSION = 1

# ---- struct layouts (must match llm.h; tests/abi_layout_test.c holds the LP64 table) --------------

PROGRESS_CB = ctypes.CFUNCTYPE(ctypes.c_bool, ctypes.c_float, ctypes.c_void_p)
TOKEN_CB = ctypes.CFUNCTYPE(ctypes.c_bool, ctypes.c_int32, ctypes.POINTER(ctypes.c_char), ctypes.c_size_t,
                            ctypes.c_void_p)
LOG_CB = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.c_char_p, ctypes.c_void_p)


class ModelParams(ctypes.Structure):
    _fields_ = [
        ("version", ctypes.c_uint32),
        ("n_threads", ctypes.c_int32),
        ("progress", PROGRESS_CB),
        ("progress_user", ctypes.c_void_p),
        ("vocab_only", ctypes.c_bool),
        ("residency", ctypes.c_int32),
        ("ram_budget_bytes", ctypes.c_uint64),
        ("prefetch_depth", ctypes.c_int32),
        ("page_cache", ctypes.c_int32),  # version 3
    ]


class SessionParams(ctypes.Structure):
    _fields_ = [
        ("version", ctypes.c_uint32),
        ("n_ctx", ctypes.c_int32),
        ("n_threads", ctypes.c_int32),
        ("temperature", ctypes.c_float),
        ("top_k", ctypes.c_int32),
        ("top_p", ctypes.c_float),
        ("min_p", ctypes.c_float),
        ("repeat_penalty", ctypes.c_float),
        ("repeat_last_n", ctypes.c_int32),
        ("seed", ctypes.c_uint64),
        ("logits_all", ctypes.c_bool),
    ]


class Io(ctypes.Structure):
    _fields_ = [
        ("version", ctypes.c_uint32),
        ("user", ctypes.c_void_p),
        ("size", ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_void_p)),
        ("read_at", ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p,
                                     ctypes.c_uint64)),
        ("close", ctypes.CFUNCTYPE(None, ctypes.c_void_p)),
    ]


class MemoryPlan(ctypes.Structure):
    _fields_ = [
        ("version", ctypes.c_uint32),
        ("n_layer", ctypes.c_uint32),
        ("n_resident_layers", ctypes.c_uint32),
        ("n_stream_slots", ctypes.c_uint32),
        ("resident_block_bytes", ctypes.c_uint64),
        ("stream_slot_bytes", ctypes.c_uint64),
        ("lm_head_bytes", ctypes.c_uint64),
        ("embedding_bytes", ctypes.c_uint64),
        ("kv_cache_bytes", ctypes.c_uint64),
        ("scratch_bytes", ctypes.c_uint64),
        ("total_bytes", ctypes.c_uint64),
        ("minimum_weight_bytes", ctypes.c_uint64),
    ]

    def as_dict(self):
        return {name: getattr(self, name) for name, _ in self._fields_ if name != "version"}


class Stats(ctypes.Structure):
    _fields_ = [
        ("version", ctypes.c_uint32),
        ("prompt_tokens", ctypes.c_uint64),
        ("generated_tokens", ctypes.c_uint64),
        ("prefill_seconds", ctypes.c_double),
        ("decode_seconds", ctypes.c_double),
        ("bytes_read", ctypes.c_uint64),
        ("read_calls", ctypes.c_uint64),
        ("io_wait_seconds", ctypes.c_double),
    ]

    def as_dict(self):
        return {name: getattr(self, name) for name, _ in self._fields_ if name != "version"}


# ---- the library ---------------------------------------------------------------------------------


def _find_library():
    path = os.environ.get("LLM_LIBRARY")
    if path:
        return os.path.abspath(path)
    libdir = os.environ.get("LLM_LIB_DIR")
    if libdir:
        for name in ("libllm.so.0", "libllm.so", "libllm.dylib"):
            if os.path.exists(os.path.join(libdir, name)):
                return os.path.join(libdir, name)
    return ctypes.util.find_library("llm") or "libllm.so.0"


def _declare(lib):
    c = ctypes
    P = c.c_void_p  # opaque llm_model* / llm_session*
    sigs = {
        "llm_version_string": (c.c_char_p, []),
        "llm_status_string": (c.c_char_p, [c.c_int32]),
        "llm_last_error": (c.c_char_p, []),
        "llm_set_log_callback": (None, [LOG_CB, c.c_void_p]),
        "llm_set_log_level": (None, [c.c_int32]),
        "llm_model_params_init": (c.c_int32, [c.POINTER(ModelParams), c.c_uint32]),
        "llm_model_load": (c.c_int32, [c.c_char_p, c.POINTER(ModelParams), c.POINTER(P)]),
        "llm_model_load_io": (c.c_int32, [c.POINTER(Io), c.POINTER(ModelParams), c.POINTER(P)]),
        "llm_model_free": (None, [P]),
        "llm_model_info_json": (c.c_char_p, [P]),
        "llm_model_set_ram_budget": (c.c_int32, [P, c.c_uint64]),
        "llm_memory_plan_init": (c.c_int32, [c.POINTER(MemoryPlan), c.c_uint32]),
        "llm_model_memory_plan": (c.c_int32, [P, c.c_int32, c.POINTER(MemoryPlan)]),
        "llm_model_n_vocab": (c.c_int32, [P]),
        "llm_model_token_bos": (c.c_int32, [P]),
        "llm_model_token_eos": (c.c_int32, [P]),
        "llm_model_token_is_eog": (c.c_bool, [P, c.c_int32]),
        "llm_tokenize": (c.c_int32, [P, c.c_char_p, c.c_size_t, c.c_bool, c.c_bool, c.POINTER(c.c_int32),
                                     c.c_int32, c.POINTER(c.c_int32)]),
        "llm_token_to_piece": (c.c_int32, [P, c.c_int32, c.c_char_p, c.c_size_t, c.POINTER(c.c_size_t)]),
        "llm_session_params_init": (c.c_int32, [c.POINTER(SessionParams), c.c_uint32]),
        "llm_session_create": (c.c_int32, [P, c.POINTER(SessionParams), c.POINTER(P)]),
        "llm_session_free": (None, [P]),
        "llm_session_reset": (c.c_int32, [P]),
        "llm_session_n_past": (c.c_int32, [P]),
        "llm_session_prefill": (c.c_int32, [P, c.POINTER(c.c_int32), c.c_size_t]),
        "llm_session_logits": (c.c_int32, [P, c.POINTER(c.POINTER(c.c_float)), c.POINTER(c.c_int32)]),
        "llm_session_logits_ith": (c.c_int32, [P, c.c_int32, c.POINTER(c.POINTER(c.c_float)),
                                               c.POINTER(c.c_int32)]),
        "llm_session_sample": (c.c_int32, [P, c.POINTER(c.c_int32)]),
        "llm_session_accept": (c.c_int32, [P, c.c_int32]),
        "llm_session_generate": (c.c_int32, [P, c.c_char_p, c.c_int32, TOKEN_CB, c.c_void_p]),
        "llm_session_next": (c.c_int32, [P, c.POINTER(c.c_int32), c.c_char_p, c.c_size_t,
                                         c.POINTER(c.c_size_t)]),
        "llm_session_cancel": (None, [P]),
        "llm_stats_init": (c.c_int32, [c.POINTER(Stats), c.c_uint32]),
        "llm_session_stats": (c.c_int32, [P, c.POINTER(Stats), c.POINTER(Stats)]),
        "llm_session_stats_json": (c.c_char_p, [P]),
    }
    for name, (restype, argtypes) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


_lib = None
_lib_lock = threading.Lock()


def lib():
    """The loaded libllm (a ctypes.CDLL with every function of llm.h declared). Loaded on first use."""
    global _lib
    with _lib_lock:
        if _lib is None:
            _lib = _declare(ctypes.CDLL(_find_library()))
        return _lib


def version():
    """The version string of the loaded library, e.g. "0.2.0"."""
    return lib().llm_version_string().decode()


# ---- errors ---------------------------------------------------------------------------------------


class Error(Exception):
    """A failed libllm call: status is the LLM_ERR_* code, message is llm_last_error()."""

    def __init__(self, status, message):
        super().__init__("%s (%s): %s" % (_status_string(status), status, message))
        self.status = status
        self.message = message


def _status_string(status):
    return lib().llm_status_string(status).decode(errors="replace")


def _check(status):
    """Raises Error for a negative status; returns the status (LLM_OK or LLM_DONE) otherwise.
    llm_last_error() is thread-local, so it is read on the thread that made the call -- here."""
    if status < 0:
        raise Error(status, lib().llm_last_error().decode(errors="replace"))
    return status


# ---- model ----------------------------------------------------------------------------------------


class Model:
    """A loaded model (immutable, shareable across threads). Free it with close() or a with-block;
    every Session on it must be closed first (a Session keeps a reference to its Model).

    progress: optional callable(fraction) -> bool|None called during load on the loading thread;
    returning False cancels the load (Error with status ERR_CANCELLED). An exception raised by it
    cancels the load and is re-raised from Model()."""

    def __init__(self, path, *, n_threads=0, progress=None, vocab_only=False, residency=RESIDENCY_RESIDENT,
                 ram_budget_bytes=0, prefetch_depth=None, page_cache=None):
        L = lib()
        p = ModelParams()
        _check(L.llm_model_params_init(ctypes.byref(p), MODEL_PARAMS_VERSION))
        p.n_threads = n_threads
        p.vocab_only = vocab_only
        p.residency = residency
        p.ram_budget_bytes = ram_budget_bytes
        if prefetch_depth is not None:
            p.prefetch_depth = prefetch_depth
        if page_cache is not None:
            p.page_cache = page_cache
        raised = []
        if progress is not None:
            def on_progress(fraction, user):
                try:
                    return progress(fraction) is not False
                except BaseException as e:  # never let an exception unwind through C
                    raised.append(e)
                    return False
            cb = PROGRESS_CB(on_progress)  # kept alive for the duration of the call
            p.progress = cb
        handle = ctypes.c_void_p()
        st = L.llm_model_load(os.fsencode(path), ctypes.byref(p), ctypes.byref(handle))
        if raised:
            raise raised[0]
        _check(st)
        self._h = handle
        self._info_lock = threading.Lock()

    @property
    def handle(self):
        if self._h is None or not self._h.value:
            raise Error(ERR_INVALID_ARGUMENT, "the model is closed")
        return self._h

    def close(self):
        """Frees the model. Idempotent."""
        h, self._h = getattr(self, "_h", None), None
        if h is not None and h.value:
            lib().llm_model_free(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may already be gone
            pass

    def info(self):
        """The model description (llm_model_info_json) as a dict."""
        # The library's string lives until the next info call on this model: serialize and copy.
        with self._info_lock:
            return json.loads(lib().llm_model_info_json(self.handle).decode())

    def memory_plan(self, n_ctx=0):
        plan = MemoryPlan()
        _check(lib().llm_memory_plan_init(ctypes.byref(plan), MEMORY_PLAN_VERSION))
        _check(lib().llm_model_memory_plan(self.handle, n_ctx, ctypes.byref(plan)))
        return plan

    def set_ram_budget(self, nbytes):
        """The run-time RAM dial; call only while no session of this model is running."""
        _check(lib().llm_model_set_ram_budget(self.handle, nbytes))

    @property
    def n_vocab(self):
        return lib().llm_model_n_vocab(self.handle)

    @property
    def bos(self):
        return lib().llm_model_token_bos(self.handle)

    @property
    def eos(self):
        return lib().llm_model_token_eos(self.handle)

    def is_eog(self, token):
        return bool(lib().llm_model_token_is_eog(self.handle, token))

    def tokenize(self, text, add_bos=True, parse_special=False):
        """Token ids of text (str or bytes)."""
        data = text.encode() if isinstance(text, str) else bytes(text)
        n = ctypes.c_int32(0)
        cap = len(data) + 8
        while True:
            buf = (ctypes.c_int32 * cap)()
            st = lib().llm_tokenize(self.handle, data, len(data), add_bos, parse_special, buf, cap, ctypes.byref(n))
            if st == ERR_BUFFER_TOO_SMALL:
                cap = n.value
                continue
            _check(st)
            return list(buf[:n.value])

    def token_to_piece(self, token):
        """The bytes of one token as generation prints them."""
        n = ctypes.c_size_t(0)
        buf = ctypes.create_string_buffer(64)
        st = lib().llm_token_to_piece(self.handle, token, buf, len(buf), ctypes.byref(n))
        if st == ERR_BUFFER_TOO_SMALL:
            buf = ctypes.create_string_buffer(n.value)
            st = lib().llm_token_to_piece(self.handle, token, buf, len(buf), ctypes.byref(n))
        _check(st)
        return buf.raw[:n.value]


# ---- session --------------------------------------------------------------------------------------


class Session:
    """A conversation on a model: KV cache and sampler. Use from one thread at a time; cancel() may be
    called from any thread. Keyword arguments are the fields of llm_session_params (n_ctx, n_threads,
    temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n, seed, logits_all)."""

    _PIECE_CAP = 256

    def __init__(self, model, **params):
        L = lib()
        p = SessionParams()
        _check(L.llm_session_params_init(ctypes.byref(p), SESSION_PARAMS_VERSION))
        for key, value in params.items():
            if key == "version" or key not in dict(SessionParams._fields_):
                raise TypeError("unknown session parameter %r" % key)
            setattr(p, key, value)
        handle = ctypes.c_void_p()
        _check(L.llm_session_create(model.handle, ctypes.byref(p), ctypes.byref(handle)))
        self.model = model  # keeps the model alive while the session exists
        self._h = handle
        # A cancel must never reach a freed session: close() and cancel() exclude each other.
        self._cancel_lock = threading.Lock()
        self._piece = ctypes.create_string_buffer(self._PIECE_CAP)

    @property
    def handle(self):
        if self._h is None or not self._h.value:
            raise Error(ERR_INVALID_ARGUMENT, "the session is closed")
        return self._h

    def close(self):
        """Frees the session. Idempotent. Must not run while another thread is inside a call on it."""
        lock = getattr(self, "_cancel_lock", None)
        if lock is None:
            return
        with lock:
            h, self._h = self._h, None
        if h is not None and h.value:
            lib().llm_session_free(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may already be gone
            pass

    # -- thread-safe --
    def cancel(self):
        """Makes the call running on this session fail with ERR_CANCELLED. Any thread. With no call
        running, the next step of a pull loop (tokens()/llm_session_next) is cancelled; a call that
        starts new work (generate, prefill, accept, reset) drops it."""
        with self._cancel_lock:
            if self._h is not None and self._h.value:
                lib().llm_session_cancel(self._h)

    # -- low level --
    def reset(self):
        _check(lib().llm_session_reset(self.handle))

    @property
    def n_past(self):
        return lib().llm_session_n_past(self.handle)

    def prefill(self, tokens):
        arr = (ctypes.c_int32 * len(tokens))(*tokens)
        _check(lib().llm_session_prefill(self.handle, arr, len(tokens)))

    def logits(self, i=None):
        """A copy of the last logits (or of row i of the last prefill with logits_all) as a list."""
        ptr = ctypes.POINTER(ctypes.c_float)()
        nv = ctypes.c_int32(0)
        if i is None:
            _check(lib().llm_session_logits(self.handle, ctypes.byref(ptr), ctypes.byref(nv)))
        else:
            _check(lib().llm_session_logits_ith(self.handle, i, ctypes.byref(ptr), ctypes.byref(nv)))
        return ptr[:nv.value]

    def sample(self):
        tok = ctypes.c_int32(0)
        _check(lib().llm_session_sample(self.handle, ctypes.byref(tok)))
        return tok.value

    def accept(self, token):
        _check(lib().llm_session_accept(self.handle, token))

    def next(self):
        """One step of the pull API: (token, piece bytes), or None at an end-of-generation token."""
        tok = ctypes.c_int32(0)
        n = ctypes.c_size_t(0)
        st = lib().llm_session_next(self.handle, ctypes.byref(tok), self._piece, len(self._piece), ctypes.byref(n))
        if st == ERR_BUFFER_TOO_SMALL:  # the token was accepted; only the piece did not fit
            return tok.value, self.model.token_to_piece(tok.value)
        if _check(st) == DONE:
            return None
        return tok.value, self._piece.raw[:n.value]

    # -- generation --
    def tokens(self, prompt, max_tokens, *, raw=False):
        """A generator over (token, piece) for up to max_tokens generated tokens, using the pull API.
        The prompt is tokenized (with BOS when the session is empty) and prefilled first; prompt may
        be None or "" to continue. Pieces are str decoded incrementally as UTF-8 (a piece may be ""
        while a multi-byte character is incomplete; if generation stops inside one, a last pair
        (-1, "\ufffd") ends the stream), or bytes with raw=True."""
        if prompt:
            self.prefill(self.model.tokenize(prompt, add_bos=self.n_past == 0))
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        for _ in range(max_tokens):
            step = self.next()
            if step is None:
                break
            token, piece = step
            yield (token, piece) if raw else (token, decoder.decode(piece))
        if not raw:
            tail = decoder.decode(b"", final=True)
            if tail:
                yield -1, tail

    def generate(self, prompt, max_tokens, on_token=None):
        """llm_session_generate: returns the generated text (str). on_token(token, piece_bytes) may
        return False to stop; an exception raised in it stops generation and is re-raised."""
        chunks = []
        raised = []

        def cb(token, piece, length, user):
            try:
                data = ctypes.string_at(piece, length)
                chunks.append(data)
                if on_token is not None and on_token(token, data) is False:
                    return False
                return True
            except BaseException as e:
                raised.append(e)
                return False

        c_cb = TOKEN_CB(cb)
        st = lib().llm_session_generate(self.handle, prompt.encode() if prompt else None, max_tokens, c_cb, None)
        if raised:
            raise raised[0]
        _check(st)
        return b"".join(chunks).decode(errors="replace")

    def stats(self):
        """(total, last_call) counters as dicts."""
        total, last = Stats(), Stats()
        _check(lib().llm_stats_init(ctypes.byref(total), STATS_VERSION))
        _check(lib().llm_stats_init(ctypes.byref(last), STATS_VERSION))
        _check(lib().llm_session_stats(self.handle, ctypes.byref(total), ctypes.byref(last)))
        return total.as_dict(), last.as_dict()

    def stats_json(self):
        return json.loads(lib().llm_session_stats_json(self.handle).decode())


if sys.version_info < (3, 7):  # pragma: no cover
    raise ImportError("llm needs Python 3.7 or newer")
