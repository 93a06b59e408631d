package llm

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// A short ChatML template and what Python's Jinja2 renders for chatMessages (trim_blocks, lstrip_blocks).
const (
	chatML = "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}" +
		"{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
	chatMLRendered = "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n"
)

var chatMessages = []ChatMessage{{"system", "You are terse."}, {"user", "Hi!"}}

func TestMetaString(t *testing.T) {
	m := load(t)
	defer m.Close()
	if v, err := m.MetaString("general.architecture"); err != nil || v != "llama" {
		t.Fatalf("general.architecture: %q, %v", v, err)
	}
	if v, err := m.MetaString("llama.block_count"); err != nil || v != "5" {
		t.Fatalf("llama.block_count: %q, %v", v, err)
	}
	_, err := m.MetaString("general.no_such_key")
	if !IsNotFound(err) || !errors.Is(err, &Error{Status: ErrNotFound}) || errors.Is(err, &Error{Status: ErrIO}) {
		t.Fatalf("a missing key must be ErrNotFound, got %v", err)
	}
	// stories260K has no chat template
	if _, err := m.ChatTemplate(); !IsNotFound(err) {
		t.Fatalf("ChatTemplate: want ErrNotFound, got %v", err)
	}
	if _, err := m.ChatTemplate("tool_use"); !IsNotFound(err) {
		t.Fatalf("ChatTemplate(tool_use): want ErrNotFound, got %v", err)
	}
	if _, err := m.ApplyChatTemplate(chatMessages, true); !IsNotFound(err) {
		t.Fatalf("ApplyChatTemplate without a template: want ErrNotFound, got %v", err)
	}
}

func TestApplyChatTemplate(t *testing.T) {
	if out, err := ApplyChatTemplate(nil, chatML, chatMessages, true); err != nil || out != chatMLRendered {
		t.Fatalf("got %q, %v", out, err)
	}
	want := strings.TrimSuffix(chatMLRendered, "<|im_start|>assistant\n")
	if out, err := ApplyChatTemplate(nil, chatML, chatMessages, false); err != nil || out != want {
		t.Fatalf("without the assistant turn: got %q, %v", out, err)
	}
	m := load(t)
	defer m.Close()
	if out, err := ApplyChatTemplate(m, "{{ bos_token }}"+chatML, chatMessages, true); err != nil || out != "<s>"+chatMLRendered {
		t.Fatalf("with the model's BOS: got %q, %v", out, err)
	}
	_, err := ApplyChatTemplate(nil, "{% for m in messages %}", chatMessages, true)
	if e, ok := err.(*Error); !ok || e.Status != ErrFormat {
		t.Fatalf("an unterminated for: want ErrFormat, got %v", err)
	}
}

func TestSessionParamsV2(t *testing.T) {
	d := DefaultSessionParams()
	if d.ParseSpecial || d.ContextShift || d.NKeep != 0 || d.KVTypeK != KVF16 || d.KVTypeV != KVF16 {
		t.Fatalf("defaults: %+v", d)
	}
	m := load(t)
	defer m.Close()
	eos := int32(m.TokenEOS())
	want, _ := m.Tokenize(prompt, true, false)
	want = append(want, eos)
	for _, special := range []bool{true, false} {
		p := greedy()
		p.ParseSpecial = special
		s, err := m.NewSession(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Generate(context.Background(), prompt+"</s>", 1, nil); err != nil {
			t.Fatal(err)
		}
		toks, err := s.Tokens()
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got := reflect.DeepEqual(toks[:6], want); got != special {
			t.Fatalf("parse_special %v: context %v, want EOS at 5: %v", special, toks, special)
		}
	}
	p := greedy()
	p.KVTypeK, p.KVTypeV = KVF32, KVF32
	p.ContextShift, p.NKeep = true, 4
	s, err := m.NewSession(p)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var text []byte
	if _, err := s.Generate(context.Background(), prompt, 8, func(_ int, b []byte) bool { text = append(text, b...); return true }); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(text), story[:20]) {
		t.Fatalf("F32 KV: %q", text)
	}
}

func TestTruncateAndTokens(t *testing.T) {
	m := load(t)
	defer m.Close()
	s, err := m.NewSession(greedy())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if toks, err := s.Tokens(); err != nil || len(toks) != 0 {
		t.Fatalf("empty session: %v, %v", toks, err)
	}
	toks, _ := m.Tokenize(prompt, true, false)
	if err := s.Prefill(toks); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Tokens(); err != nil || !reflect.DeepEqual(got, toks) {
		t.Fatalf("after prefill: %v, %v; want %v", got, err, toks)
	}
	if err := s.Truncate(2); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Tokens(); err != nil || !reflect.DeepEqual(got, toks[:2]) || s.NPast() != 2 {
		t.Fatalf("after truncate(2): %v, %v", got, err)
	}
	if err := s.Truncate(3); err == nil || err.(*Error).Status != ErrInvalidArgument {
		t.Fatalf("truncate past n_past: %v", err)
	}
	if err := s.Prefill(toks[2:]); err != nil {
		t.Fatal(err)
	}
	var text []byte
	if _, err := s.Generate(context.Background(), "", 32, func(_ int, b []byte) bool { text = append(text, b...); return true }); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(text), story) {
		t.Fatalf("regenerated: %q", text)
	}
}

func TestSaveLoad(t *testing.T) {
	m := load(t)
	defer m.Close()
	gen := func(s *Session, p string, n int) string {
		var text []byte
		if _, err := s.Generate(context.Background(), p, n, func(_ int, b []byte) bool { text = append(text, b...); return true }); err != nil {
			t.Fatal(err)
		}
		return string(text)
	}
	a, _ := m.NewSession(greedy())
	defer a.Close()
	gen(a, prompt, 8)
	path := filepath.Join(t.TempDir(), "s.llmstate")
	if err := a.Save(path); err != nil {
		t.Fatal(err)
	}
	var blob bytes.Buffer
	if err := a.SaveTo(&blob); err != nil {
		t.Fatal(err)
	}
	if file, _ := os.ReadFile(path); !bytes.Equal(file, blob.Bytes()) {
		t.Fatal("Save and SaveTo differ")
	}
	rest := gen(a, "", 16)
	b, _ := m.NewSession(greedy())
	defer b.Close()
	if err := b.Load(path); err != nil || b.NPast() != 5+8 || gen(b, "", 16) != rest {
		t.Fatalf("Load: %v", err)
	}
	c, _ := m.NewSession(greedy())
	defer c.Close()
	if err := c.LoadFrom(bytes.NewReader(blob.Bytes()), int64(blob.Len())); err != nil || gen(c, "", 16) != rest {
		t.Fatalf("LoadFrom: %v", err)
	}
	d, _ := m.NewSession(greedy())
	defer d.Close()
	half := blob.Bytes()[:blob.Len()/2]
	if err := d.LoadFrom(bytes.NewReader(half), int64(len(half))); err == nil || d.NPast() != 0 {
		t.Fatalf("a truncated state must fail and leave the session empty: %v", err)
	}
}

// TestTwoTurnChat is the README's two-turn chat on the ChatML copy of stories260K that run_tests.sh
// writes (bindings/chat_fixture.py, $LLM_CHAT_MODEL): the model's template, ParseSpecial, and only
// the new suffix evaluated on the second turn.
func TestTwoTurnChat(t *testing.T) {
	path := os.Getenv("LLM_CHAT_MODEL")
	if path == "" {
		t.Skip("LLM_CHAT_MODEL (written by run_tests.sh with bindings/chat_fixture.py) is not set")
	}
	m, err := LoadModel(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	specials, _ := m.Tokenize("<|im_start|><|im_end|>", false, true)
	imStart, imEnd := specials[0], specials[1]
	if int32(m.TokenEOS()) != imEnd {
		t.Fatalf("EOS %d, <|im_end|> %d", m.TokenEOS(), imEnd)
	}
	if tmpl, err := m.ChatTemplate(); err != nil || !strings.Contains(tmpl, "<|im_start|>") {
		t.Fatalf("ChatTemplate: %q, %v", tmpl, err)
	}
	if tmpl, err := m.ChatTemplate("tool_use"); err != nil || !strings.HasPrefix(tmpl, "{{ bos_token }}") {
		t.Fatalf("ChatTemplate(tool_use): %q, %v", tmpl, err)
	}
	p := greedy()
	p.NCtx, p.ParseSpecial = 512, true
	s, err := m.NewSession(p)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	gen := func(text string) string {
		var out []byte
		if _, err := s.Generate(context.Background(), text, 16, func(_ int, b []byte) bool { out = append(out, b...); return true }); err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	chat := []ChatMessage{{"system", "You tell stories."}, {"user", prompt}}
	prompt1, err := m.ApplyChatTemplate(chat, true)
	if want := "<|im_start|>system\nYou tell stories.<|im_end|>\n<|im_start|>user\n" + prompt + "<|im_end|>\n<|im_start|>assistant\n"; err != nil || prompt1 != want {
		t.Fatalf("turn 1: %q, %v", prompt1, err)
	}
	reply1 := gen(prompt1)
	want1, _ := m.Tokenize(prompt1, true, true)
	toks, _ := s.Tokens()
	starts := 0
	for _, tok := range want1 {
		if tok == imStart {
			starts++
		}
	}
	if !reflect.DeepEqual(toks[:len(want1)], want1) || starts != 3 {
		t.Fatalf("turn 1 context %v, want a prefix %v with 3 <|im_start|>", toks, want1)
	}
	chat = append(chat, ChatMessage{"assistant", reply1}, ChatMessage{"user", "Tell me more."})
	prompt2, err := m.ApplyChatTemplate(chat, true)
	if err != nil || !strings.HasPrefix(prompt2, prompt1+reply1) {
		t.Fatalf("turn 2 does not extend turn 1: %q, %v", prompt2, err)
	}
	suffix := prompt2[len(prompt1+reply1):]
	want2, _ := m.Tokenize(suffix, false, true)
	before := s.NPast()
	if want2[0] != imEnd || gen(suffix) == "" {
		t.Fatalf("suffix tokens %v", want2)
	}
	_, last, _ := s.Stats()
	toks, _ = s.Tokens()
	if last.PromptTokens != uint64(len(want2)) || !reflect.DeepEqual(toks[before:before+len(want2)], want2) {
		t.Fatalf("turn 2 evaluated %d prompt tokens, want only the %d of the suffix", last.PromptTokens, len(want2))
	}
}

func TestToolsRoundTrip(t *testing.T) {
	// Render with tools, parse the model's call, render the call and its result (JSON in and out).
	tmpl := "{% for m in messages %}<{{ m.role }}>{% if m.tool_calls %}<tool_call>" +
		"{{ m.tool_calls[0].function|tojson }}</tool_call>{% else %}{{ m.content }}{% endif %}{% endfor %}" +
		"{% if tools %}[{{ tools[0].function.name }}]{% endif %}{% if add_generation_prompt %}<assistant>{% endif %}"
	tools := `[{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]`
	req := `{"messages": [{"role": "user", "content": "Paris?"}], "tools": ` + tools + `, "add_generation_prompt": true}`
	if out, err := ApplyChatTemplateJSON(nil, &tmpl, req); err != nil || out != "<user>Paris?[get_weather]<assistant>" {
		t.Fatalf("render: %q, %v", out, err)
	}
	params := `{"tools": ` + tools + `}`
	reply := `Let me look.<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>`
	want := `{"content":"Let me look.","reasoning_content":"","tool_calls":[{"name":"get_weather","arguments":"{\"city\":\"Paris\"}","id":""}],"format":"hermes","parsed":true}`
	if out, err := ChatParse(nil, &tmpl, reply, &params); err != nil || out != want {
		t.Fatalf("parse: %q, %v", out, err)
	}
	req = `{"messages": [{"role": "user", "content": "Paris?"}, {"role": "assistant", "content": null,
		"tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
		{"role": "tool", "name": "get_weather", "content": "12C"}], "add_generation_prompt": true}`
	want = `<user>Paris?<assistant><tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call><tool>12C<assistant>`
	if out, err := ApplyChatTemplateJSON(nil, &tmpl, req); err != nil || out != want {
		t.Fatalf("render the call: %q, %v", out, err)
	}
	var e *Error
	if _, err := ApplyChatTemplateJSON(nil, &tmpl, `{"messages": 3}`); !errors.As(err, &e) || e.Status != ErrInvalidArgument {
		t.Fatalf("bad request: %v", err)
	}
	bad := `{"tools": 3}`
	if _, err := ChatParse(nil, &tmpl, "x", &bad); err == nil {
		t.Fatal("bad params: no error")
	}
}
