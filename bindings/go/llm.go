// Package llm is the Go binding of libllm (include/llm.h): run LLM decoders from GGUF files.
//
// Handles are freed by an explicit Close (no finalizers). Errors are *Error values carrying the
// library's status and message. A Model may be shared by sessions on many goroutines; a Session
// must be used by one goroutine at a time, except Cancel, which any goroutine may call. Generate
// maps context cancellation to llm_session_cancel.
//
// Chat (libllm 0.3): Model.ApplyChatTemplate renders a conversation with the model's own template
// (ApplyChatTemplate with one of yours); a session with ParseSpecial turns the rendered special
// tokens into themselves.
//
// More than one token per pass (libllm 0.4): Session.SetSpeculation (a draft model and/or prompt
// lookup; lossless), NextBatch (one token for each of several sessions of one model in one pass),
// and Stats.Passes / DraftedTokens / AcceptedTokens.
//
// Embeddings (libllm 0.4): Session.Embed gives per text its pooled vector ([]float32).
//
// Structured output (libllm 0.4): Session.SetJSONSchema / SetGrammar (constrained sampling), SetStop
// (stop strings; Session.Stopped), SetLogprobs / Logprobs, SetLogitBias, and the PresencePenalty and
// FrequencyPenalty session parameters.
package llm

/*
#cgo pkg-config: llm
#include "bridge.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/cgo"
	"sync"
	"unsafe"
)

// Status codes of llm.h.
const (
	OK                 = 0
	Done               = 1
	Stopped            = 2 // generation ended at a stop string (Session.SetStop; libllm 0.4)
	ErrInvalidArgument = -1
	ErrIO              = -2
	ErrFormat          = -3
	ErrUnsupported     = -4
	ErrOutOfMemory     = -5
	ErrContextFull     = -6
	ErrBufferTooSmall  = -7
	ErrCancelled       = -8
	ErrInternal        = -9
	ErrNotFound        = -10 // no such metadata key or chat template (libllm 0.3)
	ResidencyResident  = 0
	ResidencyStreamed  = 1
	ResidencyBudget    = 2
)

// Embedding poolings (Session.Embed; llama.cpp's values). PoolingUnspecified: the file's pooling_type.
const (
	PoolingUnspecified = -1
	PoolingNone        = 0 // every token's row
	PoolingMean        = 1
	PoolingCLS         = 2 // first token
	PoolingLast        = 3
	PoolingRank        = 4 // a classifier head's scores (files with cls.* tensors)
)

// Page cache policies (ModelParams.PageCache).
const (
	PageCacheKeep   = 0
	PageCacheDrop   = 1
	PageCacheDirect = 2
	PageCacheMap    = 3 // streamed weights mapped from the file, not copied (files only; see llm.h)
)

// KVType is the element type of a session's KV cache (SessionParams.KVTypeK / KVTypeV).
type KVType int32

const (
	KVF32  KVType = C.LLM_KV_F32  // exact: the goldens' setting
	KVF16  KVType = C.LLM_KV_F16  // the default
	KVQ8_0 KVType = C.LLM_KV_Q8_0 // blocks of 32 with one f16 scale
)

const (
	pieceBufferCapacity = 256
)

// Error is a failed libllm call: Status is the LLM_ERR_* code, Msg the library's message.
type Error struct {
	Status int
	Msg    string
}

func (e *Error) Error() string {
	return fmt.Sprintf("llm: %s (%d): %s", StatusString(e.Status), e.Status, e.Msg)
}

// Is makes errors.Is(err, &llm.Error{Status: llm.ErrNotFound}) match any error of that status.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Msg == "" && t.Status == e.Status
}

// IsNotFound reports whether err is an *Error with Status ErrNotFound (no such metadata key or chat
// template).
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == ErrNotFound
}

// StatusString is the library's short description of a status code.
func StatusString(status int) string {
	return C.GoString(C.llm_status_string(C.int32_t(status)))
}

// Version is "MAJOR.MINOR.PATCH" of the loaded library.
func Version() string { return C.GoString(C.llm_version_string()) }

// BindingVersion is this package's version: the library's it was written for (CMakeLists.txt;
// tests/binding_versions.cmake checks they agree).
const BindingVersion = "0.4.0"

// call runs one fallible C call and reads llm_last_error on the same OS thread (it is
// thread-local, and a goroutine may move between threads from one cgo call to the next).
func call(f func() C.int32_t) (int, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	st := int(f())
	if st < 0 {
		return st, &Error{Status: st, Msg: C.GoString(C.llm_last_error())}
	}
	return st, nil
}

// ---- model ---------------------------------------------------------------------------------------

// ModelParams are the load options; DefaultModelParams gives the library's defaults.
type ModelParams struct {
	NThreads       int  // <= 0: number of physical cores
	VocabOnly      bool // tokenizer only
	Residency      int  // Residency* constants
	RAMBudgetBytes uint64
	PrefetchDepth  int
	PageCache      int // PageCache* constants: what weight reads leave in the OS page cache
	// Progress, if set, is called on the loading goroutine's thread with fractions in [0, 1];
	// returning false cancels the load (ErrCancelled).
	Progress func(fraction float32) bool
}

// DefaultModelParams returns llm_model_params_init's values.
func DefaultModelParams() ModelParams {
	var p C.llm_model_params
	C.llm_model_params_init(&p, C.LLM_MODEL_PARAMS_VERSION)
	return ModelParams{
		NThreads: int(p.n_threads), VocabOnly: bool(p.vocab_only), Residency: int(p.residency),
		RAMBudgetBytes: uint64(p.ram_budget_bytes), PrefetchDepth: int(p.prefetch_depth),
		PageCache: int(p.page_cache),
	}
}

// Model is a loaded model. Close it after closing all its sessions.
type Model struct {
	ptr      *C.llm_model
	mu       sync.Mutex // guards sessions, ptr for Close, and the cached info string
	sessions int
}

// LoadModel opens a GGUF file; params may be nil for the defaults.
func LoadModel(path string, params *ModelParams) (*Model, error) {
	p := DefaultModelParams()
	if params != nil {
		p = *params
	}
	var cp C.llm_model_params
	C.llm_model_params_init(&cp, C.LLM_MODEL_PARAMS_VERSION)
	cp.n_threads = C.int32_t(p.NThreads)
	cp.vocab_only = C.bool(p.VocabOnly)
	cp.residency = C.int32_t(p.Residency)
	cp.ram_budget_bytes = C.uint64_t(p.RAMBudgetBytes)
	cp.prefetch_depth = C.int32_t(p.PrefetchDepth)
	cp.page_cache = C.int32_t(p.PageCache)
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))

	var state *callbackState
	var handle C.uintptr_t
	if p.Progress != nil {
		state = &callbackState{onProgress: p.Progress}
		h := cgo.NewHandle(state)
		defer h.Delete()
		handle = C.uintptr_t(h)
	}
	var out *C.llm_model
	_, err := call(func() C.int32_t { return C.llm_go_model_load(cpath, &cp, handle, &out) })
	if state != nil && state.panicked != nil {
		panic(state.panicked)
	}
	if err != nil {
		return nil, err
	}
	return &Model{ptr: out}, nil
}

// Close frees the model. It fails while sessions of the model are open. Idempotent.
func (m *Model) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sessions > 0 {
		return &Error{Status: ErrInvalidArgument, Msg: fmt.Sprintf("%d sessions of this model are still open", m.sessions)}
	}
	if m.ptr != nil {
		C.llm_model_free(m.ptr)
		m.ptr = nil
	}
	return nil
}

func (m *Model) handle() *C.llm_model {
	if m == nil || m.ptr == nil {
		panic("llm: use of a closed Model")
	}
	return m.ptr
}

// InfoJSON describes the model (architecture, dimensions, residency, memory plan) as JSON.
func (m *Model) InfoJSON() string {
	m.mu.Lock() // the library's string lives until the next info call on this model
	defer m.mu.Unlock()
	return C.GoString(C.llm_model_info_json(m.handle()))
}

// NVocab is the vocabulary size.
func (m *Model) NVocab() int { return int(C.llm_model_n_vocab(m.handle())) }

// TokenBOS is the BOS token id (-1 if none).
func (m *Model) TokenBOS() int { return int(C.llm_model_token_bos(m.handle())) }

// TokenEOS is the EOS token id (-1 if none).
func (m *Model) TokenEOS() int { return int(C.llm_model_token_eos(m.handle())) }

// IsEOG reports whether token ends generation.
func (m *Model) IsEOG(token int) bool {
	return bool(C.llm_model_token_is_eog(m.handle(), C.int32_t(token)))
}

// MemoryPlan is llm_memory_plan: predicted bytes of the model plus one session.
type MemoryPlan struct {
	NLayer, NResidentLayers, NStreamSlots                            uint32
	ResidentBlockBytes, StreamSlotBytes, LMHeadBytes, EmbeddingBytes uint64
	KVCacheBytes, ScratchBytes, TotalBytes, MinimumWeightBytes       uint64
}

// MemoryPlan predicts memory for one session of nCtx positions (0: the default).
func (m *Model) MemoryPlan(nCtx int) (MemoryPlan, error) {
	var p C.llm_memory_plan
	C.llm_memory_plan_init(&p, C.LLM_MEMORY_PLAN_VERSION)
	if _, err := call(func() C.int32_t { return C.llm_model_memory_plan(m.handle(), C.int32_t(nCtx), &p) }); err != nil {
		return MemoryPlan{}, err
	}
	return MemoryPlan{
		uint32(p.n_layer), uint32(p.n_resident_layers), uint32(p.n_stream_slots),
		uint64(p.resident_block_bytes), uint64(p.stream_slot_bytes), uint64(p.lm_head_bytes), uint64(p.embedding_bytes),
		uint64(p.kv_cache_bytes), uint64(p.scratch_bytes), uint64(p.total_bytes), uint64(p.minimum_weight_bytes),
	}, nil
}

// SetRAMBudget is the run-time RAM dial; call it only while no session of m is running.
func (m *Model) SetRAMBudget(bytes uint64) error {
	_, err := call(func() C.int32_t { return C.llm_model_set_ram_budget(m.handle(), C.uint64_t(bytes)) })
	return err
}

// stringOut runs f by llm.h's size-query protocol: cap 0 asks for the length, then a buffer of
// length + 1 bytes receives the string. f runs inside call (on one locked OS thread each time).
func stringOut(f func(buf *C.char, cap C.size_t, n *C.size_t) C.int32_t) (string, error) {
	var n C.size_t
	st, err := call(func() C.int32_t { return f(nil, 0, &n) })
	for {
		if st != ErrBufferTooSmall && err != nil {
			return "", err
		}
		buf := (*C.char)(C.malloc(n + 1))
		st, err = call(func() C.int32_t { return f(buf, n+1, &n) })
		if st == ErrBufferTooSmall {
			C.free(unsafe.Pointer(buf))
			continue
		}
		var out string
		if err == nil {
			out = C.GoStringN(buf, C.int(n))
		}
		C.free(unsafe.Pointer(buf))
		return out, err
	}
}

// MetaString returns the GGUF metadata value of key (e.g. "general.architecture") as a string:
// numbers in decimal, booleans "true"/"false". A missing key is an *Error with Status ErrNotFound
// (IsNotFound).
func (m *Model) MetaString(key string) (string, error) {
	ckey := C.CString(key)
	defer C.free(unsafe.Pointer(ckey))
	return stringOut(func(buf *C.char, cap C.size_t, n *C.size_t) C.int32_t {
		return C.llm_model_meta_string(m.handle(), ckey, buf, cap, n)
	})
}

// ChatTemplate returns the model's chat template (Jinja source), or with a name the named one
// (tokenizer.chat_template.<name>). ErrNotFound (IsNotFound) when the file has none.
func (m *Model) ChatTemplate(name ...string) (string, error) {
	var cname *C.char
	if len(name) > 0 {
		cname = C.CString(name[0])
		defer C.free(unsafe.Pointer(cname))
	}
	return stringOut(func(buf *C.char, cap C.size_t, n *C.size_t) C.int32_t {
		return C.llm_model_chat_template(m.handle(), cname, buf, cap, n)
	})
}

// ChatMessage is one message of a conversation.
type ChatMessage struct {
	Role, Content string
}

func applyChatTemplate(m *Model, tmpl *string, msgs []ChatMessage, addAssistant bool) (string, error) {
	var cm *C.llm_model
	if m != nil {
		cm = m.handle()
	}
	var ctmpl *C.char
	if tmpl != nil {
		ctmpl = C.CString(*tmpl)
		defer C.free(unsafe.Pointer(ctmpl))
	}
	n := len(msgs)
	arr := (*C.llm_chat_message)(C.calloc(C.size_t(n+1), C.size_t(unsafe.Sizeof(C.llm_chat_message{}))))
	defer C.free(unsafe.Pointer(arr))
	cmsgs := unsafe.Slice(arr, n+1)
	for i, msg := range msgs {
		cmsgs[i].role = C.CString(msg.Role)
		cmsgs[i].content = C.CString(msg.Content)
	}
	defer func() {
		for i := range msgs {
			C.free(unsafe.Pointer(cmsgs[i].role))
			C.free(unsafe.Pointer(cmsgs[i].content))
		}
	}()
	return stringOut(func(buf *C.char, cap C.size_t, out *C.size_t) C.int32_t {
		return C.llm_chat_apply_template(cm, ctmpl, arr, C.size_t(n), C.bool(addAssistant), buf, cap, out)
	})
}

// ApplyChatTemplate renders msgs with the model's chat template as Hugging Face's
// apply_chat_template(tokenize=False) does; addAssistant ends with the opening of an assistant turn.
// Generate from it with a session whose ParseSpecial is set. ErrNotFound when the model has no
// template.
func (m *Model) ApplyChatTemplate(msgs []ChatMessage, addAssistant bool) (string, error) {
	return applyChatTemplate(m, nil, msgs, addAssistant)
}

// ApplyChatTemplate renders msgs with the Jinja chat template tmpl. m may be nil: bos_token and
// eos_token are then "" (else m's token texts).
func ApplyChatTemplate(m *Model, tmpl string, msgs []ChatMessage, addAssistant bool) (string, error) {
	return applyChatTemplate(m, &tmpl, msgs, addAssistant)
}

func optCString(s *string) *C.char {
	if s == nil {
		return nil
	}
	return C.CString(*s)
}

// ApplyChatTemplateJSON renders a request given as JSON in Hugging Face's apply_chat_template form
// (llm_chat_apply_template_json): {"messages": [...], "tools": [...], "documents": [...],
// "add_generation_prompt": true, ...}, messages passed as given (assistant "tool_calls", role
// "tool" with "tool_call_id" and "name"). m may be nil when tmpl is given; tmpl nil uses m's template.
func ApplyChatTemplateJSON(m *Model, tmpl *string, requestJSON string) (string, error) {
	var cm *C.llm_model
	if m != nil {
		cm = m.handle()
	}
	ctmpl := optCString(tmpl)
	defer C.free(unsafe.Pointer(ctmpl))
	creq := C.CString(requestJSON)
	defer C.free(unsafe.Pointer(creq))
	return stringOut(func(buf *C.char, cap C.size_t, out *C.size_t) C.int32_t {
		return C.llm_chat_apply_template_json(cm, ctmpl, creq, buf, cap, out)
	})
}

// ChatParse parses a model's raw output (llm_chat_parse) into JSON {"content", "reasoning_content",
// "tool_calls": [{"name", "arguments", "id"}], "format", "parsed"}, the tool-call format read off
// the template. paramsJSON (may be nil): the request's tools, messages, reasoning_format,
// enable_thinking, continue_final_message, is_partial.
func ChatParse(m *Model, tmpl *string, raw string, paramsJSON *string) (string, error) {
	var cm *C.llm_model
	if m != nil {
		cm = m.handle()
	}
	ctmpl := optCString(tmpl)
	defer C.free(unsafe.Pointer(ctmpl))
	cparams := optCString(paramsJSON)
	defer C.free(unsafe.Pointer(cparams))
	craw := C.CString(raw)
	defer C.free(unsafe.Pointer(craw))
	return stringOut(func(buf *C.char, cap C.size_t, out *C.size_t) C.int32_t {
		return C.llm_chat_parse(cm, ctmpl, craw, cparams, buf, cap, out)
	})
}

// Tokenize returns the token ids of text.
func (m *Model) Tokenize(text string, addBOS, parseSpecial bool) ([]int32, error) {
	ctext := C.CString(text)
	defer C.free(unsafe.Pointer(ctext))
	tokens := make([]int32, len(text)+8)
	for {
		var n C.int32_t
		st, err := call(func() C.int32_t {
			return C.llm_tokenize(m.handle(), ctext, C.size_t(len(text)), C.bool(addBOS), C.bool(parseSpecial),
				(*C.int32_t)(unsafe.Pointer(&tokens[0])), C.int32_t(len(tokens)), &n)
		})
		if st == ErrBufferTooSmall && int(n) > len(tokens) {
			tokens = make([]int32, int(n))
			continue
		}
		if err != nil {
			return nil, err
		}
		return tokens[:n], nil
	}
}

// TokenToPiece returns the bytes of one token as generation prints them.
func (m *Model) TokenToPiece(token int) ([]byte, error) {
	buf := make([]byte, 64)
	for {
		var n C.size_t
		st, err := call(func() C.int32_t {
			return C.llm_token_to_piece(m.handle(), C.int32_t(token), (*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), &n)
		})
		if st == ErrBufferTooSmall && int(n) > len(buf) {
			buf = make([]byte, int(n))
			continue
		}
		if err != nil {
			return nil, err
		}
		return buf[:n], nil
	}
}

// ---- session -------------------------------------------------------------------------------------

// SessionParams are the session options; DefaultSessionParams gives the library's defaults.
type SessionParams struct {
	NCtx, NThreads int
	Temperature    float32 // 0: greedy
	TopK           int
	TopP, MinP     float32
	RepeatPenalty  float32
	RepeatLastN    int
	Seed           uint64
	LogitsAll      bool
	// libllm 0.3 (session params version 2)
	ParseSpecial bool   // Generate tokenizes control-token text in the prompt as those tokens
	KVTypeK      KVType // element type of the cached keys; default KVF16
	KVTypeV      KVType // element type of the cached values; default KVF16
	ContextShift bool   // drop the oldest positions after NKeep instead of ErrContextFull
	NKeep        int    // positions context shift never drops
	// libllm 0.4 (version 3): llama.cpp's penalties over the repeat_last_n history
	PresencePenalty  float32
	FrequencyPenalty float32
}

// DefaultSessionParams returns llm_session_params_init's values.
func DefaultSessionParams() SessionParams {
	var p C.llm_session_params
	C.llm_session_params_init(&p, C.LLM_SESSION_PARAMS_VERSION)
	return SessionParams{
		NCtx: int(p.n_ctx), NThreads: int(p.n_threads), Temperature: float32(p.temperature), TopK: int(p.top_k),
		TopP: float32(p.top_p), MinP: float32(p.min_p), RepeatPenalty: float32(p.repeat_penalty),
		RepeatLastN: int(p.repeat_last_n), Seed: uint64(p.seed), LogitsAll: bool(p.logits_all),
		ParseSpecial: bool(p.parse_special), KVTypeK: KVType(p.kv_type_k), KVTypeV: KVType(p.kv_type_v),
		ContextShift: bool(p.context_shift), NKeep: int(p.n_keep),
		PresencePenalty: float32(p.presence_penalty), FrequencyPenalty: float32(p.frequency_penalty),
	}
}

// Session is one conversation (KV cache + sampler) on a Model. Close it before the model.
type Session struct {
	model *Model
	mu    sync.Mutex // Cancel vs Close: no cancel may reach a freed handle
	ptr   *C.llm_session
	piece []byte
	// the last Generate or Next ended at a stop string (LLM_STOPPED)
	stopped bool
}

// NewSession creates a session; params may be nil for the defaults.
func (m *Model) NewSession(params *SessionParams) (*Session, error) {
	p := DefaultSessionParams()
	if params != nil {
		p = *params
	}
	var cp C.llm_session_params
	C.llm_session_params_init(&cp, C.LLM_SESSION_PARAMS_VERSION)
	cp.n_ctx = C.int32_t(p.NCtx)
	cp.n_threads = C.int32_t(p.NThreads)
	cp.temperature = C.float(p.Temperature)
	cp.top_k = C.int32_t(p.TopK)
	cp.top_p = C.float(p.TopP)
	cp.min_p = C.float(p.MinP)
	cp.repeat_penalty = C.float(p.RepeatPenalty)
	cp.repeat_last_n = C.int32_t(p.RepeatLastN)
	cp.seed = C.uint64_t(p.Seed)
	cp.logits_all = C.bool(p.LogitsAll)
	cp.parse_special = C.bool(p.ParseSpecial)
	cp.kv_type_k = C.int32_t(p.KVTypeK)
	cp.kv_type_v = C.int32_t(p.KVTypeV)
	cp.context_shift = C.bool(p.ContextShift)
	cp.n_keep = C.int32_t(p.NKeep)
	cp.presence_penalty = C.float(p.PresencePenalty)
	cp.frequency_penalty = C.float(p.FrequencyPenalty)
	m.mu.Lock()
	defer m.mu.Unlock()
	var out *C.llm_session
	if _, err := call(func() C.int32_t { return C.llm_session_create(m.handle(), &cp, &out) }); err != nil {
		return nil, err
	}
	m.sessions++
	return &Session{model: m, ptr: out, piece: make([]byte, pieceBufferCapacity)}, nil
}

// Close frees the session. It must not run while another goroutine is inside a call on s (Cancel
// is fine). Idempotent.
func (s *Session) Close() {
	s.mu.Lock()
	p := s.ptr
	s.ptr = nil
	s.mu.Unlock()
	if p == nil {
		return
	}
	C.llm_session_free(p)
	s.model.mu.Lock()
	s.model.sessions--
	s.model.mu.Unlock()
}

func (s *Session) handle() *C.llm_session {
	if s == nil || s.ptr == nil {
		panic("llm: use of a closed Session")
	}
	return s.ptr
}

// Cancel makes the running (or next) evaluation on s fail with ErrCancelled. Any goroutine.
func (s *Session) Cancel() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ptr != nil {
		C.llm_session_cancel(s.ptr)
	}
}

// Reset forgets all tokens and clears a pending cancel.
func (s *Session) Reset() error {
	_, err := call(func() C.int32_t { return C.llm_session_reset(s.handle()) })
	return err
}

// NPast is the number of tokens in the context.
func (s *Session) NPast() int { return int(C.llm_session_n_past(s.handle())) }

// Truncate drops the context from position nPast on (to edit or regenerate a turn); Prefill or
// Accept before sampling again.
func (s *Session) Truncate(nPast int) error {
	_, err := call(func() C.int32_t { return C.llm_session_truncate(s.handle(), C.int32_t(nPast)) })
	return err
}

// Tokens returns the tokens in the context (NPast of them), in order.
func (s *Session) Tokens() ([]int32, error) {
	var n C.int32_t
	st, err := call(func() C.int32_t { return C.llm_session_tokens(s.handle(), nil, 0, &n) })
	for {
		if st != ErrBufferTooSmall && err != nil {
			return nil, err
		}
		tokens := make([]int32, int(n)+1) // +1: never a zero-length slice to take the address of
		st, err = call(func() C.int32_t {
			return C.llm_session_tokens(s.handle(), (*C.int32_t)(unsafe.Pointer(&tokens[0])), C.int32_t(len(tokens)), &n)
		})
		if st == ErrBufferTooSmall {
			continue
		}
		if err != nil {
			return nil, err
		}
		return tokens[:n], nil
	}
}

// Save writes the conversation (tokens, KV cache, sampler and RNG state) to path, atomically.
func (s *Session) Save(path string) error {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	_, err := call(func() C.int32_t { return C.llm_session_save(s.handle(), cpath) })
	return err
}

// Load restores a conversation saved by Save on the same model file; on failure s is unchanged.
func (s *Session) Load(path string) error {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	_, err := call(func() C.int32_t { return C.llm_session_load(s.handle(), cpath) })
	return err
}

// SaveTo writes what Save would write to w (through llm_writer, on this goroutine's thread).
func (s *Session) SaveTo(w io.Writer) error {
	state := &callbackState{onWrite: func(b []byte) error { _, err := w.Write(b); return err }}
	h := cgo.NewHandle(state)
	defer h.Delete()
	_, err := call(func() C.int32_t { return C.llm_go_session_save_io(s.handle(), C.uintptr_t(h)) })
	if state.panicked != nil {
		panic(state.panicked)
	}
	if state.err != nil && err != nil {
		return fmt.Errorf("%w (writer: %v)", err, state.err)
	}
	return err
}

// LoadFrom restores a conversation from the size bytes of r (what SaveTo or Save wrote).
func (s *Session) LoadFrom(r io.ReaderAt, size int64) error {
	state := &callbackState{readAt: r, size: size}
	h := cgo.NewHandle(state)
	defer h.Delete()
	_, err := call(func() C.int32_t { return C.llm_go_session_load_io(s.handle(), C.uintptr_t(h)) })
	if state.panicked != nil {
		panic(state.panicked)
	}
	if state.err != nil && err != nil {
		return fmt.Errorf("%w (reader: %v)", err, state.err)
	}
	return err
}

// Prefill runs tokens through the model, appending them to the context.
func (s *Session) Prefill(tokens []int32) error {
	if len(tokens) == 0 {
		return &Error{Status: ErrInvalidArgument, Msg: "Prefill: no tokens"}
	}
	_, err := call(func() C.int32_t {
		return C.llm_session_prefill(s.handle(), (*C.int32_t)(unsafe.Pointer(&tokens[0])), C.size_t(len(tokens)))
	})
	return err
}

// Logits returns a copy of the last evaluated position's logits.
func (s *Session) Logits() ([]float32, error) {
	var p *C.float
	var n C.int32_t
	if _, err := call(func() C.int32_t { return C.llm_session_logits(s.handle(), &p, &n) }); err != nil {
		return nil, err
	}
	out := make([]float32, int(n))
	copy(out, unsafe.Slice((*float32)(unsafe.Pointer(p)), int(n)))
	return out, nil
}

// Sample draws a token from the current logits (without appending it).
func (s *Session) Sample() (int, error) {
	var t C.int32_t
	_, err := call(func() C.int32_t { return C.llm_session_sample(s.handle(), &t) })
	return int(t), err
}

// Accept appends one token and runs it.
func (s *Session) Accept(token int) error {
	_, err := call(func() C.int32_t { return C.llm_session_accept(s.handle(), C.int32_t(token)) })
	return err
}

// Next is one step of the pull API: it samples, accepts and returns a token and its bytes; done is
// true (and nothing accepted) at an end-of-generation token. Needs a prior Prefill or Accept.
func (s *Session) Next() (token int, piece []byte, done bool, err error) {
	var t C.int32_t
	var n C.size_t
	st, err := call(func() C.int32_t {
		return C.llm_session_next(s.handle(), &t, (*C.char)(unsafe.Pointer(&s.piece[0])), C.size_t(len(s.piece)), &n)
	})
	s.stopped = false
	if st == ErrBufferTooSmall { // accepted; only the bytes did not fit (with stop strings they stay held)
		if piece, err = s.FlushHeld(); err != nil || len(piece) > 0 {
			return int(t), piece, false, err
		}
		piece, err = s.model.TokenToPiece(int(t))
		return int(t), piece, false, err
	}
	if err != nil {
		return 0, nil, false, err
	}
	if st == Done || st == Stopped { // with stop strings, the text held back comes with the end
		s.stopped = st == Stopped
		if n == 0 {
			return int(t), nil, true, nil
		}
		return int(t), append([]byte(nil), s.piece[:n]...), true, nil
	}
	return int(t), append([]byte(nil), s.piece[:n]...), false, nil
}

// Stopped reports whether the last Generate or Next ended at a stop string (SetStop).
func (s *Session) Stopped() bool { return s.stopped }

// FlushHeld hands out (and forgets) the text held back for stop strings: a pull loop that ends
// before done takes it here.
func (s *Session) FlushHeld() ([]byte, error) {
	var n C.size_t
	st, err := call(func() C.int32_t { return C.llm_session_flush_held(s.handle(), nil, 0, &n) })
	if st != ErrBufferTooSmall {
		return nil, err
	}
	buf := make([]byte, int(n))
	_, err = call(func() C.int32_t {
		return C.llm_session_flush_held(s.handle(), (*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), &n)
	})
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// SetGrammar constrains sampling to the GBNF grammar gbnf (llama.cpp's syntax) from rule root (""
// for "root"), from the next token on; end-of-generation only where the language may end. An
// empty gbnf removes it. A bad grammar is ErrInvalidArgument saying where (line, column).
func (s *Session) SetGrammar(gbnf, root string) error {
	var cg, cr *C.char
	if gbnf != "" {
		cg = C.CString(gbnf)
		defer C.free(unsafe.Pointer(cg))
	}
	if root != "" {
		cr = C.CString(root)
		defer C.free(unsafe.Pointer(cr))
	}
	_, err := call(func() C.int32_t { return C.llm_session_set_grammar(s.handle(), cg, cr) })
	return err
}

// SetJSONSchema is SetGrammar with the grammar of a JSON schema (its JSON text): the output is JSON
// the schema accepts. "" removes it; an unsupported keyword is ErrUnsupported naming it.
func (s *Session) SetJSONSchema(schema string) error {
	var cs *C.char
	if schema != "" {
		cs = C.CString(schema)
		defer C.free(unsafe.Pointer(cs))
	}
	_, err := call(func() C.int32_t { return C.llm_session_set_json_schema(s.handle(), cs) })
	return err
}

// SetStop makes Generate and Next end at the first occurrence of any of stops (Stopped() then
// reports it); the stop text is neither handed out nor left in the context. None turns them off.
func (s *Session) SetStop(stops ...string) error {
	arr := (**C.char)(C.calloc(C.size_t(len(stops)+1), C.size_t(unsafe.Sizeof((*C.char)(nil)))))
	defer C.free(unsafe.Pointer(arr))
	ptrs := unsafe.Slice(arr, len(stops)+1)
	for i, x := range stops {
		ptrs[i] = C.CString(x)
	}
	defer func() {
		for i := range stops {
			C.free(unsafe.Pointer(ptrs[i]))
		}
	}()
	_, err := call(func() C.int32_t { return C.llm_session_set_stop(s.handle(), arr, C.size_t(len(stops))) })
	return err
}

// SetLogitBias adds bias[token] to that token's logit for every later sample (float32(math.Inf(-1))
// bans it); replaces the previous map, nil or empty removes it.
func (s *Session) SetLogitBias(bias map[int]float32) error {
	toks := make([]C.int32_t, 0, len(bias)+1)
	vals := make([]C.float, 0, len(bias)+1)
	for t, b := range bias {
		toks = append(toks, C.int32_t(t))
		vals = append(vals, C.float(b))
	}
	toks, vals = append(toks, 0), append(vals, 0) // never empty: &x[0] must exist
	_, err := call(func() C.int32_t {
		return C.llm_session_set_logit_bias(s.handle(), &toks[0], &vals[0], C.size_t(len(bias)))
	})
	return err
}

// TokenLogprob is a token and its log-probability.
type TokenLogprob struct {
	Token   int
	Logprob float32
}

// SetLogprobs makes every later sample compute its log-probability and the nTop most likely
// alternatives (read them with Logprobs); nTop < 0 turns them off.
func (s *Session) SetLogprobs(nTop int) error {
	if nTop < 0 {
		_, err := call(func() C.int32_t { return C.llm_session_set_logprobs(s.handle(), nil) })
		return err
	}
	var p C.llm_logprobs_params
	C.llm_logprobs_params_init(&p, C.LLM_LOGPROBS_PARAMS_VERSION)
	p.n_top = C.int32_t(nTop)
	_, err := call(func() C.int32_t { return C.llm_session_set_logprobs(s.handle(), &p) })
	return err
}

// Logprobs gives the last sampled token, its log-probability and its top alternatives (most likely
// first).
func (s *Session) Logprobs() (token int, logprob float32, top []TokenLogprob, err error) {
	var t, n C.int32_t
	var lp C.float
	var arr *C.llm_token_logprob
	if _, err = call(func() C.int32_t { return C.llm_session_logprobs(s.handle(), &t, &lp, &arr, &n) }); err != nil {
		return 0, 0, nil, err
	}
	if n > 0 {
		for _, x := range unsafe.Slice(arr, int(n)) {
			top = append(top, TokenLogprob{Token: int(x.token), Logprob: float32(x.logprob)})
		}
	}
	return int(t), float32(lp), top, nil
}

// Generate tokenizes prompt (BOS into an empty context), prefills it and generates up to maxTokens
// tokens, calling onToken (may be nil) for each on the calling goroutine; onToken returns false to
// stop (with stop strings, text held back comes in a last call with token -1). It returns done =
// true at an end-of-generation token; Stopped() tells a stop string. When ctx is cancelled during the call,
// a watcher goroutine calls llm_session_cancel and Generate returns an *Error with Status
// ErrCancelled (the tokens accepted so far stay in the context). A panic in onToken stops
// generation and is re-raised here.
func (s *Session) Generate(ctx context.Context, prompt string, maxTokens int, onToken func(token int, piece []byte) bool) (done bool, err error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if err := ctx.Err(); err != nil {
		return false, &Error{Status: ErrCancelled, Msg: err.Error()}
	}
	if onToken == nil {
		onToken = func(int, []byte) bool { return true }
	}
	state := &callbackState{onToken: onToken}
	h := cgo.NewHandle(state)
	defer h.Delete()
	cprompt := C.CString(prompt)
	defer C.free(unsafe.Pointer(cprompt))

	stop := make(chan struct{})
	watcherDone := make(chan struct{})
	go func() {
		defer close(watcherDone)
		select {
		case <-ctx.Done():
			s.Cancel()
		case <-stop:
		}
	}()
	st, err := call(func() C.int32_t {
		return C.llm_go_generate(s.handle(), cprompt, C.int32_t(maxTokens), C.uintptr_t(h))
	})
	close(stop)
	<-watcherDone
	if state.panicked != nil {
		panic(state.panicked)
	}
	if e, ok := err.(*Error); ok && e.Status == ErrCancelled && ctx.Err() != nil {
		e.Msg = e.Msg + " (" + ctx.Err().Error() + ")"
	}
	s.stopped = st == Stopped
	return st == Done, err
}

// Stats are llm_stats counters.
type Stats struct {
	PromptTokens, GeneratedTokens uint64
	PrefillSeconds, DecodeSeconds float64
	BytesRead, ReadCalls          uint64
	IOWaitSeconds                 float64
	// libllm 0.4 (llm_stats version 2); zero when Version is 1 (an older library)
	Passes         uint64 // evaluation passes (a prefill chunk, an accept, a verify or batched pass)
	DraftedTokens  uint64 // tokens proposed by speculation
	AcceptedTokens uint64 // of those, the ones kept
	Version        int    // the llm_stats version the library filled in
}

// Stats returns the counters since creation/reset and of the last call. A library older than 0.4
// refuses llm_stats version 2: then version 1 is used, Version is 1 and the 0.4 counters are zero.
func (s *Session) Stats() (total, lastCall Stats, err error) {
	var t, l C.llm_stats
	version := C.uint32_t(C.LLM_STATS_VERSION)
	if C.llm_stats_init(&t, version) == ErrInvalidArgument {
		version = 1 // its llm_stats ends before passes
	}
	C.llm_stats_init(&t, version)
	C.llm_stats_init(&l, version)
	if _, err = call(func() C.int32_t { return C.llm_session_stats(s.handle(), &t, &l) }); err != nil {
		return
	}
	conv := func(c *C.llm_stats) Stats {
		out := Stats{PromptTokens: uint64(c.prompt_tokens), GeneratedTokens: uint64(c.generated_tokens),
			PrefillSeconds: float64(c.prefill_seconds), DecodeSeconds: float64(c.decode_seconds),
			BytesRead: uint64(c.bytes_read), ReadCalls: uint64(c.read_calls),
			IOWaitSeconds: float64(c.io_wait_seconds), Version: int(c.version)}
		if c.version >= 2 {
			out.Passes = uint64(c.passes)
			out.DraftedTokens = uint64(c.drafted_tokens)
			out.AcceptedTokens = uint64(c.accepted_tokens)
		}
		return out
	}
	return conv(&t), conv(&l), nil
}

// ---- more than one token per pass (libllm 0.4) ---------------------------------------------------

// SpeculationParams are the options of Session.SetSpeculation; DefaultSpeculationParams gives the
// library's defaults (no draft, NDraft 8, LookupNgram 0, DraftPMin 0).
type SpeculationParams struct {
	Draft       *Model  // proposes tokens; needs the session model's vocabulary. nil: no draft model
	NDraft      int     // most tokens proposed per pass, 1..64
	LookupNgram int     // prompt lookup n-gram size; 0: off
	DraftPMin   float32 // the draft stops below this probability of its own next token; 0: always NDraft
}

// DefaultSpeculationParams returns llm_speculation_params_init's values.
func DefaultSpeculationParams() SpeculationParams {
	var p C.llm_speculation_params
	C.llm_speculation_params_init(&p, C.LLM_SPECULATION_PARAMS_VERSION)
	return SpeculationParams{NDraft: int(p.n_draft), LookupNgram: int(p.lookup_ngram), DraftPMin: float32(p.draft_p_min)}
}

// SetSpeculation turns on speculative decoding for Generate and Next from now on: the draft model
// and/or prompt lookup propose tokens that one evaluation pass checks. Lossless: greedy output is
// identical to generating without it. p nil (or neither a Draft nor LookupNgram > 0) turns it off.
// The library keeps its own reference to the draft model, so p.Draft may be closed afterwards (it
// does not count as one of the draft's sessions).
func (s *Session) SetSpeculation(p *SpeculationParams) error {
	if p == nil {
		_, err := call(func() C.int32_t { return C.llm_session_set_speculation(s.handle(), nil) })
		return err
	}
	var cp C.llm_speculation_params
	C.llm_speculation_params_init(&cp, C.LLM_SPECULATION_PARAMS_VERSION)
	cp.n_draft = C.int32_t(p.NDraft)
	cp.lookup_ngram = C.int32_t(p.LookupNgram)
	cp.draft_p_min = C.float(p.DraftPMin)
	if p.Draft != nil {
		p.Draft.mu.Lock() // no Close of the draft during the call; afterwards the library holds it
		defer p.Draft.mu.Unlock()
		cp.draft = p.Draft.handle()
	}
	_, err := call(func() C.int32_t { return C.llm_session_set_speculation(s.handle(), &cp) })
	return err
}

// BatchResult is one session's outcome of NextBatch: Status is OK (Token accepted), Done (an
// end-of-generation token, not accepted) or an LLM_ERR_* code for that session alone.
type BatchResult struct {
	Token  int
	Status int
}

// NextBatch advances every session (distinct, all on one model) by one token in one evaluation
// pass, each sampling as Next would (use Model.TokenToPiece for the bytes). The results are in the
// order of sessions. The error is an *Error only when the whole call failed and no session changed
// (no sessions, a repeated one, sessions on different models, ErrCancelled). Speculation settings
// are not used. No other call on any of the sessions may run meanwhile.
func NextBatch(sessions []*Session) ([]BatchResult, error) {
	n := len(sessions)
	size := n
	if size == 0 {
		size = 1 // never a zero-length slice to take the address of
	}
	handles := make([]*C.llm_session, size) // holds C pointers only: fine to pass to C
	for i, s := range sessions {
		handles[i] = s.handle()
	}
	tokens := make([]C.int32_t, size)
	statuses := make([]C.int32_t, size)
	if _, err := call(func() C.int32_t {
		return C.llm_session_next_batch(&handles[0], C.int32_t(n), &tokens[0], &statuses[0])
	}); err != nil {
		return nil, err
	}
	out := make([]BatchResult, n)
	for i := range out {
		out[i] = BatchResult{Token: int(tokens[i]), Status: int(statuses[i])}
	}
	return out, nil
}

// StatsJSON returns the session's counters as JSON.
func (s *Session) StatsJSON() string { return C.GoString(C.llm_session_stats_json(s.handle())) }

// Embed returns per text its pooled final-norm hidden state (llm_session_embed): one vector of the
// model's width, or with PoolingNone every token's row one after another (len = n_tokens * dim).
// pooling is a Pooling* value (PoolingUnspecified: the file's pooling_type, else none); normalize
// L2-normalises every row. All texts share the evaluation passes; the session's context is left as
// it was.
func (s *Session) Embed(texts []string, pooling int, normalize bool) ([][]float32, error) {
	if len(texts) == 0 {
		return nil, &Error{Status: ErrInvalidArgument, Msg: "Embed: no texts"}
	}
	ctexts := make([]*C.char, len(texts)) // C pointers only: fine to pass to C
	for i, t := range texts {
		ctexts[i] = C.CString(t)
	}
	defer func() {
		for _, p := range ctexts {
			C.free(unsafe.Pointer(p))
		}
	}()
	var p C.llm_embed_params
	C.llm_embed_params_init(&p, C.LLM_EMBED_PARAMS_VERSION)
	p.pooling = C.int32_t(pooling)
	p.normalize = C.bool(normalize)
	rows := make([]C.int32_t, len(texts))
	var n C.size_t
	var dim C.int32_t
	st, err := call(func() C.int32_t {
		return C.llm_session_embed(s.handle(), &ctexts[0], C.size_t(len(texts)), &p, nil, 0, &n, &dim, &rows[0])
	})
	if err != nil && st != ErrBufferTooSmall {
		return nil, err
	}
	out := make([]float32, int(n)+1) // +1: never a zero-length slice to take the address of
	if _, err := call(func() C.int32_t {
		return C.llm_session_embed(s.handle(), &ctexts[0], C.size_t(len(texts)), &p, (*C.float)(unsafe.Pointer(&out[0])),
			n, &n, &dim, &rows[0])
	}); err != nil {
		return nil, err
	}
	result := make([][]float32, len(texts))
	at := 0
	for i, r := range rows {
		size := int(r) * int(dim)
		result[i] = out[at : at+size : at+size]
		at += size
	}
	return result, nil
}
