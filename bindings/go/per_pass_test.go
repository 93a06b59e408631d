package llm

import (
	"context"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

// libllm 0.4: speculation, batched sessions and stats version 2. While the library answers
// ErrUnsupported for a call these tests skip, on exactly that status; any other error fails them.

func skipIfUnsupported(t *testing.T, what string, err error) {
	t.Helper()
	var e *Error
	if errors.As(err, &e) && e.Status == ErrUnsupported {
		t.Skipf("libllm returns LLM_ERR_UNSUPPORTED for %s (not implemented yet): %s", what, e.Msg)
	}
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func greedySession(t *testing.T, m *Model) *Session {
	p := DefaultSessionParams()
	p.Temperature = 0
	p.NCtx = 256
	s, err := m.NewSession(&p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// pull prefills text and returns up to n greedy tokens of the pull API.
func pull(t *testing.T, s *Session, text string, n int) []int {
	toks, err := s.model.Tokenize(text, true, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Prefill(toks); err != nil {
		t.Fatal(err)
	}
	var out []int
	for len(out) < n {
		tok, _, done, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		if done {
			break
		}
		out = append(out, tok)
	}
	return out
}

func solo(t *testing.T, m *Model, text string, n int) []int {
	s := greedySession(t, m)
	defer s.Close()
	return pull(t, s, text, n)
}

func loadStories(t *testing.T) *Model {
	m, err := LoadModel(modelPath(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestSpeculationWithLookupIsLossless(t *testing.T) {
	m := loadStories(t)
	defer m.Close()
	want := solo(t, m, prompt, 48)
	s := greedySession(t, m)
	defer s.Close()
	p := DefaultSpeculationParams()
	p.LookupNgram = 3
	skipIfUnsupported(t, "llm_session_set_speculation", s.SetSpeculation(&p))
	if got := pull(t, s, prompt, 48); !reflect.DeepEqual(got, want) {
		t.Fatalf("with lookup %v, without %v", got, want)
	}
	total, _, err := s.Stats()
	if err != nil || total.AcceptedTokens > total.DraftedTokens {
		t.Fatalf("stats %+v %v", total, err)
	}
}

func TestSpeculationWithSameFileDraftIsLossless(t *testing.T) {
	m := loadStories(t)
	defer m.Close()
	want := solo(t, m, prompt, 32)
	s := greedySession(t, m)
	defer s.Close()
	draft := loadStories(t)
	p := DefaultSpeculationParams()
	p.Draft = draft
	p.NDraft = 4
	err := s.SetSpeculation(&p)
	if cerr := draft.Close(); cerr != nil { // the session keeps the library's own reference
		t.Fatal(cerr)
	}
	skipIfUnsupported(t, "llm_session_set_speculation", err)
	if got := pull(t, s, prompt, 32); !reflect.DeepEqual(got, want) {
		t.Fatalf("with a draft %v, without %v", got, want)
	}
	total, _, _ := s.Stats()
	if total.AcceptedTokens == 0 || total.AcceptedTokens > total.DraftedTokens {
		t.Fatalf("a draft with the model's own weights: its proposals are kept; stats %+v", total)
	}
}

func TestSpeculationBadArgumentsCarryTheLibraryMessage(t *testing.T) {
	m := loadStories(t)
	defer m.Close()
	s := greedySession(t, m)
	defer s.Close()
	p := DefaultSpeculationParams()
	p.LookupNgram = 2
	p.NDraft = 0
	err := s.SetSpeculation(&p)
	var e *Error
	if !errors.As(err, &e) || e.Msg == "" {
		t.Fatalf("n_draft 0: want an *Error with the library's message, got %v", err)
	}
	if e.Status == ErrUnsupported {
		skipIfUnsupported(t, "llm_session_set_speculation", err)
	}
	if e.Status != ErrInvalidArgument || !strings.Contains(e.Msg, "n_draft") {
		t.Fatalf("n_draft 0: %v", err)
	}
	if path := os.Getenv("LLM_CHAT_MODEL"); path != "" { // the same size, two token texts differ
		other, err := LoadModel(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		q := DefaultSpeculationParams()
		q.Draft = other
		if err := s.SetSpeculation(&q); !errors.As(err, &e) || e.Status != ErrInvalidArgument || e.Msg == "" {
			t.Fatalf("a draft with another vocabulary: %v", err)
		}
	}
}

func TestNextBatchEqualsSolo(t *testing.T) {
	m := loadStories(t)
	defer m.Close()
	prompts := []string{prompt, "Lily and Ben"}
	want := [][]int{solo(t, m, prompts[0], 16), solo(t, m, prompts[1], 16)}
	sessions := []*Session{greedySession(t, m), greedySession(t, m)}
	defer sessions[0].Close()
	defer sessions[1].Close()
	for i, s := range sessions {
		toks, _ := m.Tokenize(prompts[i], true, false)
		if err := s.Prefill(toks); err != nil {
			t.Fatal(err)
		}
	}
	got := [][]int{nil, nil}
	done := []bool{false, false}
	for step := 0; step < 16; step++ {
		res, err := NextBatch(sessions)
		skipIfUnsupported(t, "llm_session_next_batch", err)
		if len(res) != 2 {
			t.Fatalf("%d results", len(res))
		}
		for i, r := range res {
			switch {
			case done[i]:
			case r.Status == OK:
				got[i] = append(got[i], r.Token)
			case r.Status == Done:
				done[i] = true
			default:
				t.Fatalf("session %d: status %d", i, r.Status)
			}
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("batched %v, solo %v", got, want)
	}
}

func TestNextBatchWholeCallErrors(t *testing.T) {
	m := loadStories(t)
	defer m.Close()
	s := greedySession(t, m)
	defer s.Close()
	var e *Error
	if _, err := NextBatch(nil); !errors.As(err, &e) || e.Status != ErrInvalidArgument || e.Msg == "" {
		t.Fatalf("no sessions: %v", err)
	}
	if _, err := NextBatch([]*Session{s, s}); !errors.As(err, &e) || e.Status != ErrInvalidArgument ||
		!strings.Contains(e.Msg, "repeats") {
		t.Fatalf("a repeated session: %v", err)
	}
}

func TestStatsVersion2(t *testing.T) {
	m := loadStories(t)
	defer m.Close()
	s := greedySession(t, m)
	defer s.Close()
	if _, err := s.Generate(context.Background(), prompt, 8, nil); err != nil {
		t.Fatal(err)
	}
	total, last, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if total.Version != 2 || last.Version != 2 {
		t.Fatalf("versions %d %d", total.Version, last.Version)
	}
	if total.Passes < 1+7 || total.DraftedTokens != 0 || total.AcceptedTokens != 0 || total.GeneratedTokens != 8 {
		t.Fatalf("stats %+v", total)
	}
}
