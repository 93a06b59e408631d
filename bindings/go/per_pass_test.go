package llm

import (
	"context"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

// libllm 0.4: speculation, batched sessions and stats version 2. Any error fails them
// (ErrUnsupported too: the library implements 0.4).

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

// loadStories loads stories260K and frees it when the test ends (t.Cleanup runs after the test's
// deferred Session.Close calls; closing it earlier is fine too).
func loadStories(t *testing.T) *Model {
	m, err := LoadModel(modelPath(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// speculationIsLossless checks that n greedy tokens of prompt on a session of m with speculation p
// are a plain session's; after (if not nil) runs right after SetSpeculation, before it is checked.
// It returns the speculating session's total stats.
func speculationIsLossless(t *testing.T, m *Model, n int, p *SpeculationParams, after func()) Stats {
	t.Helper()
	want := solo(t, m, prompt, n)
	s := greedySession(t, m)
	defer s.Close()
	err := s.SetSpeculation(p)
	if after != nil {
		after()
	}
	if err != nil {
		t.Fatalf("llm_session_set_speculation: %v", err)
	}
	if got := pull(t, s, prompt, n); !reflect.DeepEqual(got, want) {
		t.Fatalf("with speculation %+v: %v, without %v", *p, got, want)
	}
	total, _, err := s.Stats()
	if err != nil {
		t.Fatalf("stats: %v", err)
	}
	return total
}

func TestSpeculationWithLookupIsLossless(t *testing.T) {
	m := loadStories(t)
	p := DefaultSpeculationParams()
	p.LookupNgram = 3
	if total := speculationIsLossless(t, m, 48, &p, nil); total.AcceptedTokens > total.DraftedTokens {
		t.Fatalf("stats %+v", total)
	}
}

func TestSpeculationWithSameFileDraftIsLossless(t *testing.T) {
	m := loadStories(t)
	draft := loadStories(t)
	p := DefaultSpeculationParams()
	p.Draft = draft
	p.NDraft = 4
	total := speculationIsLossless(t, m, 32, &p, func() {
		if err := draft.Close(); err != nil { // the session keeps the library's own reference
			t.Fatal(err)
		}
	})
	if total.AcceptedTokens == 0 || total.AcceptedTokens > total.DraftedTokens {
		t.Fatalf("a draft with the model's own weights: its proposals are kept; stats %+v", total)
	}
}

func TestSpeculationBadArgumentsCarryTheLibraryMessage(t *testing.T) {
	m := loadStories(t)
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
		if err != nil {
			t.Fatalf("llm_session_next_batch: %v", err)
		}
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
