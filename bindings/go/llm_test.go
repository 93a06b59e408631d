package llm

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	prompt = "Once upon a time"
	story  = ", there was a little girl named Lily. She loved to play outside in the park. One day, she saw"
)

// modelPath is stories260K in $LLM_SHARED_DIR (default ../../../shared relative to this package).
func modelPath(t *testing.T) string {
	shared := os.Getenv("LLM_SHARED_DIR")
	if shared == "" {
		shared = filepath.Join("..", "..", "..", "shared")
	}
	return filepath.Join(shared, "models", "stories260K.gguf")
}

// headerVersion is "MAJOR.MINOR.PATCH" of include/llm.h: the library reports the header it was built from.
func headerVersion(t *testing.T) string {
	header, err := os.ReadFile(filepath.Join("..", "..", "include", "llm.h"))
	if err != nil {
		t.Fatal(err)
	}
	parts := map[string]string{}
	for _, line := range strings.Split(string(header), "\n") {
		for _, name := range []string{"MAJOR", "MINOR", "PATCH"} {
			if tag := "#define LLM_VERSION_" + name + " "; strings.HasPrefix(line, tag) {
				parts[name] = strings.TrimSpace(line[len(tag):])
			}
		}
	}
	return parts["MAJOR"] + "." + parts["MINOR"] + "." + parts["PATCH"]
}

func greedy() *SessionParams {
	p := DefaultSessionParams()
	p.Temperature = 0
	p.NCtx = 256
	return &p
}

func load(t *testing.T) *Model {
	t.Helper()
	m, err := LoadModel(modelPath(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestErrors(t *testing.T) {
	_, err := LoadModel("/nonexistent/model.gguf", nil)
	e, ok := err.(*Error)
	if !ok || e.Status != ErrIO || e.Msg == "" {
		t.Fatalf("want *Error with ErrIO, got %#v", err)
	}
	p := DefaultModelParams()
	p.Progress = func(float32) bool { return false }
	if _, err := LoadModel(modelPath(t), &p); err == nil || err.(*Error).Status != ErrCancelled {
		t.Fatalf("a progress callback returning false must cancel the load, got %v", err)
	}
}

func TestGenerate(t *testing.T) {
	var fractions []float32
	p := DefaultModelParams()
	p.Progress = func(f float32) bool { fractions = append(fractions, f); return true }
	m, err := LoadModel(modelPath(t), &p)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if len(fractions) == 0 || Version() != headerVersion(t) || m.NVocab() != 512 || m.TokenBOS() != 1 {
		t.Fatalf("model: %d fractions, version %s, n_vocab %d, bos %d", len(fractions), Version(), m.NVocab(), m.TokenBOS())
	}
	if !strings.Contains(m.InfoJSON(), `"arch":"llama"`) {
		t.Fatal(m.InfoJSON())
	}
	if plan, err := m.MemoryPlan(256); err != nil || plan.KVCacheBytes == 0 {
		t.Fatal(plan, err)
	}
	s, err := m.NewSession(greedy())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := m.Close(); err == nil {
		t.Fatal("closing a model with an open session must fail")
	}
	var text []byte
	n := 0
	done, err := s.Generate(context.Background(), prompt, 32, func(tok int, piece []byte) bool {
		n++
		text = append(text, piece...)
		return true
	})
	if err != nil || done || n != 32 {
		t.Fatalf("generate: done %v, %d tokens, err %v", done, n, err)
	}
	if !strings.HasPrefix(string(text), story) {
		t.Fatalf("got %q", text)
	}
	total, _, err := s.Stats()
	if err != nil || total.GeneratedTokens != 32 {
		t.Fatal(total, err)
	}
}

func TestPullAPI(t *testing.T) {
	m := load(t)
	defer m.Close()
	s, err := m.NewSession(greedy())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	toks, err := m.Tokenize(prompt, true, false)
	if err != nil || len(toks) != 5 {
		t.Fatal(toks, err)
	}
	if err := s.Prefill(toks); err != nil {
		t.Fatal(err)
	}
	if logits, err := s.Logits(); err != nil || len(logits) != 512 {
		t.Fatal(len(logits), err)
	}
	var text []byte
	for i := 0; i < 32; i++ {
		_, piece, done, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		if done {
			break
		}
		text = append(text, piece...)
	}
	if !strings.HasPrefix(string(text), story) || s.NPast() != 37 {
		t.Fatalf("got %q, n_past %d", text, s.NPast())
	}
}

func TestContextCancel(t *testing.T) {
	m := load(t)
	defer m.Close()
	s, err := m.NewSession(greedy())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	first := true
	_, err = s.Generate(ctx, prompt, 200, func(int, []byte) bool {
		if first {
			first = false
			cancel()
			// hold generation until the watcher goroutine has seen ctx.Done and cancelled
			time.Sleep(200 * time.Millisecond)
		}
		return true
	})
	e, ok := err.(*Error)
	if !ok || e.Status != ErrCancelled {
		t.Fatalf("want ErrCancelled, got %v", err)
	}
	// an already-cancelled context never starts
	if _, err := s.Generate(ctx, prompt, 8, nil); err == nil || err.(*Error).Status != ErrCancelled {
		t.Fatal(err)
	}
	if err := s.Reset(); err != nil {
		t.Fatal(err)
	}
	var text []byte
	if _, err := s.Generate(context.Background(), prompt, 32, func(_ int, p []byte) bool { text = append(text, p...); return true }); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(text), story) {
		t.Fatalf("got %q", text)
	}
}

func TestCallbackPanicIsReraised(t *testing.T) {
	m := load(t)
	defer m.Close()
	s, err := m.NewSession(greedy())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("want the callback's panic, got %v", r)
			}
		}()
		_, _ = s.Generate(context.Background(), prompt, 8, func(int, []byte) bool { panic("boom") })
	}()
	if _, err := s.Generate(context.Background(), prompt, 1, func(int, []byte) bool { return false }); err != nil {
		t.Fatal(err)
	}
}

func TestSessionsOnGoroutinesShareTheModel(t *testing.T) {
	m := load(t)
	defer m.Close()
	var wg sync.WaitGroup
	texts := make([]string, 3)
	for i := range texts {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			runtime.Gosched()
			s, err := m.NewSession(greedy())
			if err != nil {
				t.Error(err)
				return
			}
			defer s.Close()
			var b []byte
			if _, err := s.Generate(context.Background(), prompt, 32, func(_ int, p []byte) bool { b = append(b, p...); return true }); err != nil {
				t.Error(err)
			}
			texts[i] = string(b)
		}(i)
	}
	wg.Wait()
	for _, text := range texts {
		if !strings.HasPrefix(text, story) {
			t.Fatalf("got %q", text)
		}
	}
}
