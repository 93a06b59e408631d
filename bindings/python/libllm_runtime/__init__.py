"""Python bindings for libllm (ctypes, standard library only).

    import libllm_runtime as llm
    with llm.Model("stories260K.gguf") as model, llm.Session(model, temperature=0) as s:
        for token, piece in s.tokens("Once upon a time", max_tokens=32):
            print(piece, end="", flush=True)

Chat: Model.apply_chat_template(messages) renders a conversation with the model's own template (or
llm.apply_chat_template(template, messages) with one of yours); a Session with parse_special=True
turns the rendered special tokens into themselves.

Embeddings (libllm 0.4): Session.embed(texts, pooling=None, normalize=False) gives per text an
array('f') of pooled floats (pooling "none": every token's row, one after another).

More than one token per pass (libllm 0.4): Session.set_speculation (a draft model and/or prompt
lookup; lossless), llm.next_batch(sessions) (one token for each of several sessions of one model in
one pass), and the passes / drafted_tokens / accepted_tokens counters of Session.stats().

Structured output (libllm 0.4): Session.set_json_schema / set_grammar (constrained sampling),
set_stop (stop strings), set_logprobs / logprobs, set_logit_bias, and the presence_penalty and
frequency_penalty session parameters.

The library is found through LLM_LIBRARY (path of libllm.so), LLM_LIB_DIR (its directory), the
copy that `pip install` put inside this package, or the system's library search path. Threading: a Model may be shared by sessions on several threads; a
Session must be used by one thread at a time, except Session.cancel(), which any thread may call.
ctypes releases the GIL during every libllm call, so generation on a worker thread does not block
the others.
"""

import array
import codecs
import ctypes
import enum
import ctypes.util
import json
import os
import sys
import threading

# This binding's version: the library's (CMakeLists.txt project VERSION; tests/binding_versions.cmake).
__version__ = "0.4.0"

__all__ = [
    "Error", "NotFound", "Model", "Session", "MemoryPlan", "Stats", "KvType", "lib", "version",
    "apply_chat_template", "has", "next_batch",
    "OK", "DONE", "STOPPED", "ERR_INVALID_ARGUMENT", "ERR_IO", "ERR_FORMAT", "ERR_UNSUPPORTED",
    "ERR_OUT_OF_MEMORY", "ERR_CONTEXT_FULL", "ERR_BUFFER_TOO_SMALL", "ERR_CANCELLED", "ERR_INTERNAL",
    "ERR_NOT_FOUND", "KV_F32", "KV_F16", "KV_Q8_0", "RESIDENCY_RESIDENT", "RESIDENCY_STREAMED", "RESIDENCY_BUDGET",
    "PAGE_CACHE_KEEP", "PAGE_CACHE_DROP", "PAGE_CACHE_DIRECT", "PAGE_CACHE_MAP", "POOLING_UNSPECIFIED", "POOLING_NONE",
    "POOLING_MEAN", "POOLING_CLS", "POOLING_LAST", "POOLING_RANK",
]

# ---- constants (llm.h) --------------------------------------------------------------------------

OK = 0
DONE = 1
STOPPED = 2  # libllm >= 0.4: generation ended at a stop string (Session.set_stop)
ERR_INVALID_ARGUMENT = -1
ERR_IO = -2
ERR_FORMAT = -3
ERR_UNSUPPORTED = -4
ERR_OUT_OF_MEMORY = -5
ERR_CONTEXT_FULL = -6
ERR_BUFFER_TOO_SMALL = -7
ERR_CANCELLED = -8
ERR_INTERNAL = -9
ERR_NOT_FOUND = -10  # libllm >= 0.3

RESIDENCY_RESIDENT = 0
RESIDENCY_STREAMED = 1
RESIDENCY_BUDGET = 2
PAGE_CACHE_KEEP = 0
PAGE_CACHE_DROP = 1
PAGE_CACHE_DIRECT = 2
PAGE_CACHE_MAP = 3  # streamed weights mapped from the file, not copied (files only)
# Embedding poolings (libllm 0.4; llama.cpp's values). UNSPECIFIED: the file's pooling_type.
POOLING_UNSPECIFIED = -1
POOLING_NONE = 0
POOLING_MEAN = 1
POOLING_CLS = 2
POOLING_LAST = 3
POOLING_RANK = 4
_POOLING_NAMES = {"unspecified": -1, "none": 0, "mean": 1, "cls": 2, "last": 3, "rank": 4}


class KvType(enum.IntEnum):
    """KV cache element types (Session's kv_type_k / kv_type_v)."""
    F32 = 0   # exact: the goldens' setting
    F16 = 1   # the default
    Q8_0 = 2  # blocks of 32 with one f16 scale


KV_F32, KV_F16, KV_Q8_0 = KvType.F32, KvType.F16, KvType.Q8_0

LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR, LOG_OFF = range(5)

MODEL_PARAMS_VERSION = 3
SESSION_PARAMS_VERSION = 3  # 3 (0.4): presence_penalty, frequency_penalty; Session falls back to 2
LOGPROBS_PARAMS_VERSION = 1
IO_VERSION = 1
WRITER_VERSION = 1
MEMORY_PLAN_VERSION = 1
STATS_VERSION = 2  # 2 (0.4): passes, drafted_tokens, accepted_tokens; Session.stats falls back to 1
SPECULATION_PARAMS_VERSION = 1
EMBED_PARAMS_VERSION = 1

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
        # version 2
        ("parse_special", ctypes.c_bool),
        ("kv_type_k", ctypes.c_int32),
        ("kv_type_v", ctypes.c_int32),
        ("context_shift", ctypes.c_bool),
        ("n_keep", ctypes.c_int32),
        # version 3 (0.4)
        ("presence_penalty", ctypes.c_float),
        ("frequency_penalty", ctypes.c_float),
    ]


class TokenLogprob(ctypes.Structure):
    _fields_ = [("token", ctypes.c_int32), ("logprob", ctypes.c_float)]


# void (*)(int32_t token, float logprob, const llm_token_logprob *top, int32_t n_top, void *user)
LOGPROBS_CB = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.c_float, ctypes.POINTER(TokenLogprob),
                               ctypes.c_int32, ctypes.c_void_p)


class LogprobsParams(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("n_top", ctypes.c_int32), ("on_token", LOGPROBS_CB),
                ("user", ctypes.c_void_p)]


class ChatMessage(ctypes.Structure):
    _fields_ = [("role", ctypes.c_char_p), ("content", ctypes.c_char_p)]


WRITE_CB = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64)


class Writer(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("user", ctypes.c_void_p), ("write", WRITE_CB)]


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
        # version 2 (0.4)
        ("passes", ctypes.c_uint64),
        ("drafted_tokens", ctypes.c_uint64),
        ("accepted_tokens", ctypes.c_uint64),
    ]
    _V2_FIELDS = ("passes", "drafted_tokens", "accepted_tokens")

    def as_dict(self):
        """The counters of self.version (the version-2 ones are absent after a version-1 fallback)."""
        return {name: getattr(self, name) for name, _ in self._fields_
                if name != "version" and (self.version >= 2 or name not in self._V2_FIELDS)}


class SpeculationParams(ctypes.Structure):
    _fields_ = [
        ("version", ctypes.c_uint32),
        ("draft", ctypes.c_void_p),  # llm_model*
        ("n_draft", ctypes.c_int32),
        ("lookup_ngram", ctypes.c_int32),
        ("draft_p_min", ctypes.c_float),
    ]


class EmbedParams(ctypes.Structure):
    _fields_ = [
        ("version", ctypes.c_uint32),
        ("pooling", ctypes.c_int32),
        ("normalize", ctypes.c_bool),
        ("add_bos", ctypes.c_bool),
        ("parse_special", ctypes.c_bool),
    ]


# ---- the library ---------------------------------------------------------------------------------


# The library's file names, newest ABI first, per platform.
_NAMES = ("libllm.so.0", "libllm.so", "libllm.0.dylib", "libllm.dylib", "llm.dll")


def _candidates():
    """Where the library is looked for, in order: LLM_LIBRARY (a file), LLM_LIB_DIR (a directory), the
    copy inside this package (pip install builds one), then the system's search path (an installed
    libllm0 package, ldconfig)."""
    path = os.environ.get("LLM_LIBRARY")
    if path:
        return [os.path.abspath(path)]
    out = []
    for d in (os.environ.get("LLM_LIB_DIR"), os.path.dirname(os.path.abspath(__file__))):
        if d:
            out += [os.path.join(d, n) for n in _NAMES if os.path.exists(os.path.join(d, n))]
    system = ctypes.util.find_library("llm")
    return out + ([system] if system else []) + ["libllm.so.0"]


def _load():
    tried = []
    for c in _candidates():
        try:
            return ctypes.CDLL(c)
        except OSError as e:
            tried.append("%s (%s)" % (c, e))
    raise OSError("libllm not found; tried LLM_LIBRARY=%r, LLM_LIB_DIR=%r, then: %s. Install the libllm0 "
                  "package, or set LLM_LIBRARY to the path of libllm.so.0"
                  % (os.environ.get("LLM_LIBRARY"), os.environ.get("LLM_LIB_DIR"), "; ".join(tried)))


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
    # 0.3 and 0.4: a library without them still loads; calling one then raises Error(ERR_UNSUPPORTED).
    optional = {
        "llm_model_meta_string": (c.c_int32, [P, c.c_char_p, c.c_char_p, c.c_size_t, c.POINTER(c.c_size_t)]),
        "llm_model_chat_template": (c.c_int32, [P, c.c_char_p, c.c_char_p, c.c_size_t, c.POINTER(c.c_size_t)]),
        "llm_chat_apply_template": (c.c_int32, [P, c.c_char_p, c.POINTER(ChatMessage), c.c_size_t, c.c_bool,
                                                c.c_char_p, c.c_size_t, c.POINTER(c.c_size_t)]),
        "llm_session_truncate": (c.c_int32, [P, c.c_int32]),
        "llm_session_tokens": (c.c_int32, [P, c.POINTER(c.c_int32), c.c_int32, c.POINTER(c.c_int32)]),
        "llm_session_save": (c.c_int32, [P, c.c_char_p]),
        "llm_session_save_io": (c.c_int32, [P, c.POINTER(Writer)]),
        "llm_session_load": (c.c_int32, [P, c.c_char_p]),
        "llm_session_load_io": (c.c_int32, [P, c.POINTER(Io)]),
        # 0.4
        "llm_speculation_params_init": (c.c_int32, [c.POINTER(SpeculationParams), c.c_uint32]),
        "llm_session_set_speculation": (c.c_int32, [P, c.POINTER(SpeculationParams)]),
        "llm_session_next_batch": (c.c_int32, [c.POINTER(P), c.c_int32, c.POINTER(c.c_int32),
                                               c.POINTER(c.c_int32)]),
        "llm_model_pooling_type": (c.c_int32, [P]),
        "llm_embed_params_init": (c.c_int32, [c.POINTER(EmbedParams), c.c_uint32]),
        "llm_chat_apply_template_json": (c.c_int32, [P, c.c_char_p, c.c_char_p, c.c_char_p, c.c_size_t,
                                                     c.POINTER(c.c_size_t)]),
        "llm_chat_parse": (c.c_int32, [P, c.c_char_p, c.c_char_p, c.c_char_p, c.c_char_p, c.c_size_t,
                                       c.POINTER(c.c_size_t)]),
        "llm_session_set_grammar": (c.c_int32, [P, c.c_char_p, c.c_char_p]),
        "llm_session_set_json_schema": (c.c_int32, [P, c.c_char_p]),
        "llm_session_set_stop": (c.c_int32, [P, c.POINTER(c.c_char_p), c.c_size_t]),
        "llm_session_set_logit_bias": (c.c_int32, [P, c.POINTER(c.c_int32), c.POINTER(c.c_float), c.c_size_t]),
        "llm_logprobs_params_init": (c.c_int32, [c.POINTER(LogprobsParams), c.c_uint32]),
        "llm_session_set_logprobs": (c.c_int32, [P, c.POINTER(LogprobsParams)]),
        "llm_session_logprobs": (c.c_int32, [P, c.POINTER(c.c_int32), c.POINTER(c.c_float),
                                             c.POINTER(c.POINTER(TokenLogprob)), c.POINTER(c.c_int32)]),
        "llm_session_flush_held": (c.c_int32, [P, c.c_char_p, c.c_size_t, c.POINTER(c.c_size_t)]),
        "llm_session_embed": (c.c_int32, [P, c.POINTER(c.c_char_p), c.c_size_t, c.POINTER(EmbedParams),
                                          c.POINTER(c.c_float), c.c_size_t, c.POINTER(c.c_size_t),
                                          c.POINTER(c.c_int32), c.POINTER(c.c_int32)]),
    }
    for name, (restype, argtypes) in list(sigs.items()) + list(optional.items()):
        try:
            fn = getattr(lib, name)
        except AttributeError:
            if name in optional:
                continue
            raise
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


def has(name):
    """Whether the loaded libllm exports llm.h function `name` (the 0.3 and 0.4 ones are missing in older
    ones)."""
    try:
        getattr(lib(), name)
        return True
    except AttributeError:
        return False


def _fn(name):
    try:
        return getattr(lib(), name)
    except AttributeError:
        raise Error(ERR_UNSUPPORTED, "this libllm (%s) does not export %s" % (version(), name)) from None


_lib = None
_lib_lock = threading.Lock()


def lib():
    """The loaded libllm (a ctypes.CDLL with every function of llm.h declared). Loaded on first use."""
    global _lib
    with _lib_lock:
        if _lib is None:
            _lib = _declare(_load())
        return _lib


def version():
    """The version string of the loaded library, e.g. "0.2.0"."""
    return lib().llm_version_string().decode()


# ---- errors ---------------------------------------------------------------------------------------


class Error(Exception):
    """A failed libllm call: status is the LLM_ERR_* code, message is llm_last_error()."""

    def __new__(cls, status, message):
        if cls is Error and status == ERR_NOT_FOUND:
            cls = NotFound
        return super().__new__(cls, status, message)

    def __init__(self, status, message):
        super().__init__("%s (%s): %s" % (_status_string(status), status, message))
        self.status = status
        self.message = message


class NotFound(Error, LookupError):
    """ERR_NOT_FOUND: no such metadata key or chat template. Also a LookupError."""


def _status_string(status):
    return lib().llm_status_string(status).decode(errors="replace")


def _check(status):
    """Raises Error for a negative status; returns the status (LLM_OK or LLM_DONE) otherwise.
    llm_last_error() is thread-local, so it is read on the thread that made the call -- here."""
    if status < 0:
        raise Error(status, lib().llm_last_error().decode(errors="replace"))
    return status


def _string_out(call):
    """Runs call(buf, cap, len_ptr) by llm.h's size-query protocol: cap 0 asks for the length, then a
    buffer of length + 1 receives the string. Returns str (invalid UTF-8 replaced)."""
    n = ctypes.c_size_t(0)
    st = call(None, 0, ctypes.byref(n))
    while True:
        if st != ERR_BUFFER_TOO_SMALL:
            _check(st)
        buf = ctypes.create_string_buffer(n.value + 1)
        st = call(buf, len(buf), ctypes.byref(n))
        if st == ERR_BUFFER_TOO_SMALL:  # cannot happen for an immutable model; retry rather than fail
            continue
        _check(st)
        return buf.raw[:n.value].decode(errors="replace")


def _messages(messages):
    """A ctypes array of llm_chat_message from (role, content) pairs or {"role", "content"} dicts; the
    encoded strings are returned too, to stay alive during the call."""
    keep = []
    arr = (ChatMessage * max(len(messages), 1))()
    for i, msg in enumerate(messages):
        role, content = (msg["role"], msg["content"]) if isinstance(msg, dict) else msg
        r, c = str(role).encode(), str(content).encode()
        keep += [r, c]
        arr[i].role, arr[i].content = r, c
    return arr, keep


def apply_chat_template(template, messages, add_assistant=True, model=None):
    """Renders messages (a list of (role, content) pairs or {"role": ..., "content": ...} dicts) with
    the Jinja chat template `template` as Hugging Face's apply_chat_template(tokenize=False) does.
    Without a model, bos_token and eos_token are ""; template=None uses the model's own."""
    if template is None and model is None:
        raise Error(ERR_INVALID_ARGUMENT, "apply_chat_template: give a template or a model")
    fn = _fn("llm_chat_apply_template")
    arr, keep = _messages(messages)
    handle = model.handle if model is not None else None
    tmpl = template.encode() if template is not None else None
    return _string_out(lambda buf, cap, n: fn(handle, tmpl, arr, len(messages), add_assistant, buf, cap, n))


def apply_chat_template_json(request, template=None, model=None):
    """Renders a request in Hugging Face's apply_chat_template form (llm_chat_apply_template_json): a
    dict (or its JSON text) with "messages" (passed as given: assistant "tool_calls", role "tool"
    messages with "tool_call_id" and "name"), "tools", "documents", "add_generation_prompt" and any
    other template variable ("enable_thinking"). template=None uses the model's own."""
    if template is None and model is None:
        raise Error(ERR_INVALID_ARGUMENT, "apply_chat_template_json: give a template or a model")
    fn = _fn("llm_chat_apply_template_json")
    req = (request if isinstance(request, str) else json.dumps(request, ensure_ascii=False)).encode()
    handle = model.handle if model is not None else None
    tmpl = template.encode() if template is not None else None
    return _string_out(lambda buf, cap, n: fn(handle, tmpl, req, buf, cap, n))


def chat_parse(raw, template=None, params=None, model=None):
    """Parses a model's raw output (llm_chat_parse) into a dict {"content", "reasoning_content",
    "tool_calls": [{"name", "arguments" (JSON text), "id"}], "format", "parsed"}; the tool-call
    format is read off the template ("parsed": False when it is none the library knows: the text is
    then the content). params: a dict like the request's (tools, messages, reasoning_format,
    enable_thinking, continue_final_message, is_partial)."""
    if template is None and model is None:
        raise Error(ERR_INVALID_ARGUMENT, "chat_parse: give a template or a model")
    fn = _fn("llm_chat_parse")
    p = None if params is None else (params if isinstance(params, str) else json.dumps(params)).encode()
    handle = model.handle if model is not None else None
    tmpl = template.encode() if template is not None else None
    out = _string_out(lambda buf, cap, n: fn(handle, tmpl, raw.encode(), p, buf, cap, n))
    return json.loads(out)


def next_batch(sessions):
    """llm_session_next_batch: advances every session (distinct, all on one model) by one token in one
    evaluation pass, each sampling as Session.next() would (no pieces: Model.token_to_piece). Returns a
    list of (token, status) in the order of `sessions`: status OK (token accepted), DONE (an
    end-of-generation token, not accepted) or a negative LLM_ERR_* for that session alone (e.g.
    ERR_CONTEXT_FULL). Raises Error only when the call as a whole failed and changed no session (no
    sessions, a repeated one, sessions on different models, ERR_CANCELLED). Speculation settings are
    not used. No other call on any of the sessions may run at the same time."""
    fn = _fn("llm_session_next_batch")
    sessions = list(sessions)
    n = len(sessions)
    handles = (ctypes.c_void_p * max(n, 1))(*[s.handle.value for s in sessions])
    tokens = (ctypes.c_int32 * max(n, 1))()
    statuses = (ctypes.c_int32 * max(n, 1))()
    _check(fn(handles, n, tokens, statuses))
    return [(tokens[i], statuses[i]) for i in range(n)]


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

    def meta_string(self, key):
        """The GGUF metadata value of key as a string (numbers in decimal, booleans "true"/"false").
        Raises NotFound (a LookupError) when the file has no such key."""
        fn = _fn("llm_model_meta_string")
        k = key.encode()
        return _string_out(lambda buf, cap, n: fn(self.handle, k, buf, cap, n))

    def chat_template(self, name=None):
        """The model's chat template (Jinja source), or the named one (tokenizer.chat_template.<name>).
        Raises NotFound when the file has none."""
        fn = _fn("llm_model_chat_template")
        nm = name.encode() if name is not None else None
        return _string_out(lambda buf, cap, n: fn(self.handle, nm, buf, cap, n))

    def apply_chat_template(self, messages, add_assistant=True, template=None):
        """Renders messages ((role, content) pairs or dicts) with the model's chat template, or with
        `template` (Jinja source) and this model's BOS/EOS texts. Tokenize the result with
        parse_special (Session(parse_special=True) does it for generate/tokens)."""
        return apply_chat_template(template, messages, add_assistant, model=self)

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
    temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n, seed, logits_all; libllm 0.3:
    parse_special, kv_type_k, kv_type_v (KvType), context_shift, n_keep; libllm 0.4: presence_penalty,
    frequency_penalty)."""

    _PIECE_CAP = 256

    def __init__(self, model, **params):
        L = lib()
        p = SessionParams()
        if L.llm_session_params_init(ctypes.byref(p), SESSION_PARAMS_VERSION) == ERR_INVALID_ARGUMENT:
            # a library older than 0.4 knows version 2, whose struct ends before presence_penalty
            _check(L.llm_session_params_init(ctypes.byref(p), 2))
            for key in ("presence_penalty", "frequency_penalty"):
                if params.get(key):
                    raise Error(ERR_UNSUPPORTED, "this libllm (%s) has no %s" % (version(), key))
        for key, value in params.items():
            if key == "version" or key not in dict(SessionParams._fields_):
                raise TypeError("unknown session parameter %r" % key)
            setattr(p, key, value)
        self.parse_special = bool(p.parse_special)  # tokens() tokenizes its prompt the same way
        handle = ctypes.c_void_p()
        _check(L.llm_session_create(model.handle, ctypes.byref(p), ctypes.byref(handle)))
        self.model = model  # keeps the model alive while the session exists
        self._h = handle
        # A cancel must never reach a freed session: close() and cancel() exclude each other.
        self._cancel_lock = threading.Lock()
        self._piece = ctypes.create_string_buffer(self._PIECE_CAP)
        self._tail = b""  # text a pull handed out with LLM_DONE / LLM_STOPPED (stop strings), for tokens()
        self.last_status = OK  # generate()'s or next()'s status: DONE, STOPPED or OK
        self._logprobs = None  # the LogprobsParams in use (its callback must outlive the session's use)

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

    def truncate(self, n_past):
        """Drops the context from position n_past on (to edit or regenerate a turn); prefill or accept
        before sampling again."""
        _check(_fn("llm_session_truncate")(self.handle, n_past))

    def context_tokens(self):
        """The tokens in the context (n_past of them), in order, as a list of ints."""
        fn = _fn("llm_session_tokens")
        n = ctypes.c_int32(0)
        st = fn(self.handle, None, 0, ctypes.byref(n))
        while True:
            if st != ERR_BUFFER_TOO_SMALL:
                _check(st)
            buf = (ctypes.c_int32 * max(n.value, 1))()
            st = fn(self.handle, buf, len(buf), ctypes.byref(n))
            if st != ERR_BUFFER_TOO_SMALL:
                _check(st)
                return list(buf[:n.value])

    # -- more than one token per pass (0.4) --
    def set_speculation(self, draft=None, *, n_draft=None, lookup_ngram=None, draft_p_min=None):
        """llm_session_set_speculation for generate()/tokens()/next() from now on: draft (a Model with
        this model's vocabulary) and/or prompt lookup (lookup_ngram > 0) propose tokens that one pass
        checks. Lossless: greedy output is identical to generating without it. Arguments left None
        keep llm_speculation_params_init's defaults (no draft, n_draft 8, lookup_ngram 0, draft_p_min
        0); with neither a draft nor lookup_ngram > 0 speculation is off. The library keeps its own
        reference to the draft model, so draft.close() afterwards is fine (the session goes on)."""
        fn = _fn("llm_session_set_speculation")
        p = SpeculationParams()
        _check(_fn("llm_speculation_params_init")(ctypes.byref(p), SPECULATION_PARAMS_VERSION))
        if draft is not None:
            p.draft = draft.handle.value
        if n_draft is not None:
            p.n_draft = n_draft
        if lookup_ngram is not None:
            p.lookup_ngram = lookup_ngram
        if draft_p_min is not None:
            p.draft_p_min = draft_p_min
        _check(fn(self.handle, ctypes.byref(p)))

    # -- saved sessions --
    def save(self, path):
        """Saves the conversation (tokens, KV, sampler and RNG state) to path, atomically."""
        _check(_fn("llm_session_save")(self.handle, os.fsencode(path)))

    def load(self, path):
        """Restores a conversation saved by save() on the same model file; on failure the session is
        left as it was."""
        _check(_fn("llm_session_load")(self.handle, os.fsencode(path)))

    def save_bytes(self):
        """save() into a bytes object (through llm_writer)."""
        fn = _fn("llm_session_save_io")
        chunks = []
        raised = []

        def write(user, src, n):
            try:
                chunks.append(ctypes.string_at(src, n))
                return OK
            except BaseException as e:  # never let an exception unwind through C
                raised.append(e)
                return ERR_IO

        cb = WRITE_CB(write)
        w = Writer(WRITER_VERSION, None, cb)
        st = fn(self.handle, ctypes.byref(w))
        if raised:
            raise raised[0]
        _check(st)
        return b"".join(chunks)

    def load_bytes(self, data):
        """load() from bytes made by save_bytes() (or read from a saved file)."""
        fn = _fn("llm_session_load_io")
        data = bytes(data)
        size_cb = Io._fields_[2][1](lambda user: len(data))

        def read_at(user, offset, dst, n):
            if offset + n > len(data):
                return ERR_IO
            ctypes.memmove(dst, data[offset:offset + n], n)
            return OK

        read_cb = Io._fields_[3][1](read_at)
        io = Io(IO_VERSION, None, size_cb, read_cb)
        _check(fn(self.handle, ctypes.byref(io)))

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
        """One step of the pull API: (token, piece bytes), or None at an end-of-generation token or a
        stop string (last_status says which: DONE or STOPPED). With stop strings a piece may be
        shorter than the token's text, even b"" (held back: it may begin a stop string); the text
        handed out with the end is kept for tokens() and returned by flush_held()."""
        tok = ctypes.c_int32(0)
        n = ctypes.c_size_t(0)
        st = lib().llm_session_next(self.handle, ctypes.byref(tok), self._piece, len(self._piece), ctypes.byref(n))
        if st == ERR_BUFFER_TOO_SMALL:
            if n.value > len(self._piece):
                self._piece = ctypes.create_string_buffer(n.value)
            # the token was accepted (or ended generation); its text stays held: take it from there
            held = self.flush_held()
            if not held and n.value:  # no stop strings: the piece was not held, only too long
                held = self.model.token_to_piece(tok.value)
            if self.model.is_eog(tok.value):
                self.last_status, self._tail = DONE, held
                return None
            self.last_status = OK
            return tok.value, held
        self.last_status = _check(st)
        if st in (DONE, STOPPED):
            self._tail += self._piece.raw[:n.value]
            return None
        return tok.value, self._piece.raw[:n.value]

    def flush_held(self):
        """llm_session_flush_held: the text held back for stop strings (and what next() received with
        DONE / STOPPED that tokens() has not yielded), as bytes; b"" when nothing is held."""
        out, self._tail = self._tail, b""
        if not has("llm_session_flush_held"):
            return out
        fn = _fn("llm_session_flush_held")
        n = ctypes.c_size_t(0)
        st = fn(self.handle, None, 0, ctypes.byref(n))
        if st == ERR_BUFFER_TOO_SMALL:
            buf = ctypes.create_string_buffer(n.value)
            _check(fn(self.handle, buf, len(buf), ctypes.byref(n)))
            return out + buf.raw[:n.value]
        _check(st)
        return out

    # -- generation --
    def tokens(self, prompt, max_tokens, *, raw=False):
        """A generator over (token, piece) for up to max_tokens generated tokens, using the pull API.
        The prompt is tokenized (with BOS when the session is empty) and prefilled first; prompt may
        be None or "" to continue. Pieces are str decoded incrementally as UTF-8 (a piece may be ""
        while a multi-byte character is incomplete; if generation stops inside one, a last pair
        (-1, "\ufffd") ends the stream), or bytes with raw=True."""
        if prompt:
            self.prefill(self.model.tokenize(prompt, add_bos=self.n_past == 0, parse_special=self.parse_special))
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._tail = b""
        for _ in range(max_tokens):
            step = self.next()
            if step is None:
                break
            token, piece = step
            yield (token, piece) if raw else (token, decoder.decode(piece))
        rest = self.flush_held()  # stop strings: text held back, or handed out with the end
        if rest:
            yield (-1, rest) if raw else (-1, decoder.decode(rest))
        if not raw:
            tail = decoder.decode(b"", final=True)
            if tail:
                yield -1, tail

    def generate(self, prompt, max_tokens, on_token=None):
        """llm_session_generate: returns the generated text (str); last_status then says why it ended
        (DONE, STOPPED at a stop string, OK at max_tokens). on_token(token, piece_bytes) may return
        False to stop (with stop strings, text held back comes in a last call with token -1); an
        exception raised in it stops generation and is re-raised."""
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
        self.last_status = _check(st)
        return b"".join(chunks).decode(errors="replace")

    # -- structured output (0.4) --
    def set_grammar(self, gbnf, root=None):
        """llm_session_set_grammar: from the next token on, sample only text of the GBNF grammar
        (llama.cpp's syntax) from rule root (None: "root"); end-of-generation only where it may end.
        None removes it. A bad grammar raises Error(ERR_INVALID_ARGUMENT) saying where."""
        fn = _fn("llm_session_set_grammar")
        _check(fn(self.handle, None if gbnf is None else gbnf.encode(), None if root is None else root.encode()))

    def set_json_schema(self, schema):
        """llm_session_set_json_schema: the output is JSON the schema (a dict or its JSON text) accepts;
        {"type": "object"} asks for any object. None removes it. An unsupported keyword raises
        Error(ERR_UNSUPPORTED) naming it."""
        fn = _fn("llm_session_set_json_schema")
        text = None if schema is None else (schema if isinstance(schema, str) else json.dumps(schema)).encode()
        _check(fn(self.handle, text))

    def set_stop(self, stops):
        """llm_session_set_stop: generate()/tokens()/next() end at the first occurrence of any of these
        strings (last_status STOPPED); the stop string is neither handed out nor kept in the context.
        [] or None turns them off."""
        fn = _fn("llm_session_set_stop")
        stops = [x.encode() if isinstance(x, str) else bytes(x) for x in (stops or [])]
        arr = (ctypes.c_char_p * max(1, len(stops)))(*stops)
        _check(fn(self.handle, arr if stops else None, len(stops)))
        self._tail = b""

    def set_logit_bias(self, bias):
        """llm_session_set_logit_bias: {token: bias} added to the logits before sampling
        (float("-inf") bans a token); {} or None removes the map."""
        fn = _fn("llm_session_set_logit_bias")
        items = list((bias or {}).items())
        toks = (ctypes.c_int32 * max(1, len(items)))(*[t for t, _ in items])
        vals = (ctypes.c_float * max(1, len(items)))(*[b for _, b in items])
        _check(fn(self.handle, toks, vals, len(items)))

    def set_logprobs(self, n_top=0, on_token=None):
        """llm_session_set_logprobs: from the next sampled token on, compute its log-probability and the
        n_top most likely alternatives (pull them with logprobs()); on_token(token, logprob, top) is
        called for each, top a list of (token, logprob). n_top None turns them off."""
        fn = _fn("llm_session_set_logprobs")
        if n_top is None:
            _check(fn(self.handle, None))
            self._logprobs = None
            return
        p = LogprobsParams()
        _check(_fn("llm_logprobs_params_init")(ctypes.byref(p), LOGPROBS_PARAMS_VERSION))
        p.n_top = n_top
        if on_token is not None:
            def cb(token, logprob, top, n, user):
                on_token(token, logprob, [(top[i].token, top[i].logprob) for i in range(n)])
            p.on_token = LOGPROBS_CB(cb)
        _check(fn(self.handle, ctypes.byref(p)))
        self._logprobs = p  # keeps the callback alive

    def logprobs(self):
        """llm_session_logprobs: (token, logprob, [(token, logprob), ...]) of the last sampled token."""
        tok, lp = ctypes.c_int32(0), ctypes.c_float(0)
        top, n = ctypes.POINTER(TokenLogprob)(), ctypes.c_int32(0)
        _check(_fn("llm_session_logprobs")(self.handle, ctypes.byref(tok), ctypes.byref(lp), ctypes.byref(top),
                                           ctypes.byref(n)))
        return tok.value, lp.value, [(top[i].token, top[i].logprob) for i in range(n.value)]

    def stats(self):
        """(total, last_call) counters as dicts. passes, drafted_tokens and accepted_tokens (libllm 0.4)
        are absent when the library is older (it refuses llm_stats version 2; version 1 is used)."""
        total, last = Stats(), Stats()
        version = STATS_VERSION
        if lib().llm_stats_init(ctypes.byref(total), version) == ERR_INVALID_ARGUMENT:
            version = 1  # a library older than 0.4: its llm_stats ends before `passes`
        _check(lib().llm_stats_init(ctypes.byref(total), version))
        _check(lib().llm_stats_init(ctypes.byref(last), version))
        _check(lib().llm_session_stats(self.handle, ctypes.byref(total), ctypes.byref(last)))
        return total.as_dict(), last.as_dict()

    def stats_json(self):
        return json.loads(lib().llm_session_stats_json(self.handle).decode())

    # -- embeddings (0.4) --
    def embed(self, texts, pooling=None, normalize=False):
        """llm_session_embed: per text (a str, or a list of them) an array('f') of its pooled vector,
        or with pooling "none" its tokens' rows one after another (len = n_tokens * dim). pooling:
        None (the file's pooling_type, else none), "none", "mean", "cls", "last", "rank" or a
        POOLING_* value; normalize: L2 per row. All texts share the evaluation passes; the session's
        context is left as it was."""
        if isinstance(texts, (str, bytes)):
            texts = [texts]
        texts = [t.encode() if isinstance(t, str) else bytes(t) for t in texts]
        if not texts:
            raise Error(ERR_INVALID_ARGUMENT, "embed: no texts")
        if pooling is None:
            pooling = POOLING_UNSPECIFIED
        elif isinstance(pooling, str):
            if pooling not in _POOLING_NAMES:
                raise Error(ERR_INVALID_ARGUMENT, "embed: unknown pooling %r" % pooling)
            pooling = _POOLING_NAMES[pooling]
        fn = _fn("llm_session_embed")
        p = EmbedParams()
        _check(lib().llm_embed_params_init(ctypes.byref(p), EMBED_PARAMS_VERSION))
        p.pooling = int(pooling)
        p.normalize = bool(normalize)
        arr = (ctypes.c_char_p * len(texts))(*texts)
        n, dim = ctypes.c_size_t(0), ctypes.c_int32(0)
        rows = (ctypes.c_int32 * len(texts))()
        st = fn(self.handle, arr, len(texts), ctypes.byref(p), None, 0, ctypes.byref(n), ctypes.byref(dim), rows)
        if st != ERR_BUFFER_TOO_SMALL:
            _check(st)
        out = array.array("f", bytes(4 * n.value))
        addr, _ = out.buffer_info()
        _check(fn(self.handle, arr, len(texts), ctypes.byref(p), ctypes.cast(addr, ctypes.POINTER(ctypes.c_float)),
                  len(out), ctypes.byref(n), ctypes.byref(dim), rows))
        result, at = [], 0
        for r in rows:
            result.append(out[at:at + r * dim.value])
            at += r * dim.value
        return result


if sys.version_info < (3, 7):  # pragma: no cover
    raise ImportError("llm needs Python 3.7 or newer")
