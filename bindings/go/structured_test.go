package llm

import (
	"context"
	"encoding/json"
	"math"
	"regexp"
	"strings"
	"testing"
)

// A bounded object: every draw must close it within a few dozen tokens; then only the end remains.
const personSchema = `{"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
  "age": {"type": "integer", "minimum": 0, "maximum": 120}}, "required": ["name", "age"],
  "additionalProperties": false}`

// fitsPerson checks the schema by hand. JSON Schema's integer is any number without a fraction.
func fitsPerson(v map[string]any) bool {
	name, ok1 := v["name"].(string)
	age, ok2 := v["age"].(float64)
	return len(v) == 2 && ok1 && ok2 && len([]rune(name)) <= 8 && age == math.Trunc(age) && age >= 0 && age <= 120
}

func TestJSONSchemaGenerationParsesAndFits(t *testing.T) {
	m := load(t)
	defer m.Close()
	for seed := uint64(0); seed < 5; seed++ {
		p := DefaultSessionParams()
		p.Temperature = 1
		p.Seed = seed
		s, err := m.NewSession(&p)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SetJSONSchema(personSchema); err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		done, err := s.Generate(context.Background(), prompt, 200, func(_ int, piece []byte) bool {
			out.Write(piece)
			return true
		})
		s.Close()
		if err != nil || !done {
			t.Fatalf("seed %d: done %v err %v text %q", seed, done, err, out.String())
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(out.String()), &v); err != nil || !fitsPerson(v) {
			t.Fatalf("seed %d: %q does not fit the schema (%v)", seed, out.String(), err)
		}
	}
	s, _ := m.NewSession(nil)
	defer s.Close()
	if err := s.SetJSONSchema(`{"type": "object", "not": {}}`); err == nil || err.(*Error).Status != ErrUnsupported {
		t.Fatalf("'not' accepted: %v", err)
	}
	if err := s.SetJSONSchema(""); err != nil {
		t.Fatal(err)
	}
}

func TestGrammarPullAndErrors(t *testing.T) {
	m := load(t)
	defer m.Close()
	p := DefaultSessionParams()
	p.Temperature = 1
	p.Seed = 3
	s, err := m.NewSession(&p)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.SetGrammar("root ::= \"Lily\" (\" was\" | \" ran\"){1,3} \".\"\n", ""); err != nil {
		t.Fatal(err)
	}
	toks, _ := m.Tokenize(prompt, true, false)
	if err := s.Prefill(toks); err != nil {
		t.Fatal(err)
	}
	var text []byte
	for i := 0; i < 50; i++ {
		_, piece, done, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		text = append(text, piece...)
		if done {
			break
		}
	}
	if !regexp.MustCompile(`^Lily( was| ran){1,3}\.$`).Match(text) {
		t.Fatalf("%q is not a sentence of the grammar", text)
	}
	err = s.SetGrammar("root ::= [a-\n", "")
	if e, ok := err.(*Error); !ok || e.Status != ErrInvalidArgument || !strings.Contains(e.Msg, "line 2, column 1") {
		t.Fatalf("bad grammar: %v", err)
	}
	if err := s.SetGrammar("", ""); err != nil {
		t.Fatal(err)
	}
}

func TestStopStrings(t *testing.T) {
	m := load(t)
	defer m.Close()
	gen := func(s *Session) string {
		var b strings.Builder
		if _, err := s.Generate(context.Background(), prompt, 40, func(_ int, piece []byte) bool {
			b.Write(piece)
			return true
		}); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	s, _ := m.NewSession(greedy())
	full := gen(s)
	s.Close()
	cut := full[:strings.Index(full, " Lily")]
	s, _ = m.NewSession(greedy())
	defer s.Close()
	if err := s.SetStop(" Lily", "never there"); err != nil {
		t.Fatal(err)
	}
	if got := gen(s); got != cut || !s.Stopped() {
		t.Fatalf("got %q (stopped %v), want %q", got, s.Stopped(), cut)
	}
	// the pull side: the same text, the last of it with done
	s2, _ := m.NewSession(greedy())
	defer s2.Close()
	_ = s2.SetStop(" Lily")
	toks, _ := m.Tokenize(prompt, true, false)
	_ = s2.Prefill(toks)
	var text []byte
	for i := 0; i < 40; i++ {
		_, piece, done, err := s2.Next()
		if err != nil {
			t.Fatal(err)
		}
		text = append(text, piece...)
		if done {
			break
		}
	}
	if string(text) != cut || !s2.Stopped() {
		t.Fatalf("pull: %q (stopped %v), want %q", text, s2.Stopped(), cut)
	}
	if err := s2.SetStop(""); err == nil {
		t.Fatal("an empty stop string was accepted")
	}
	if err := s2.SetStop(); err != nil {
		t.Fatal(err)
	}
}

func TestLogprobsBiasAndPenalties(t *testing.T) {
	m := load(t)
	defer m.Close()
	s, _ := m.NewSession(greedy())
	defer s.Close()
	if err := s.SetLogprobs(3); err != nil {
		t.Fatal(err)
	}
	toks, _ := m.Tokenize(prompt, true, false)
	_ = s.Prefill(toks)
	tok, _ := s.Sample()
	got, lp, top, err := s.Logprobs()
	if err != nil || got != tok || len(top) != 3 || top[0].Token != tok || lp >= 0 {
		t.Fatalf("logprobs: %d %v %v %v (sampled %d)", got, lp, top, err, tok)
	}
	_ = s.SetLogitBias(map[int]float32{tok: float32(math.Inf(-1))})
	if t2, _ := s.Sample(); t2 == tok {
		t.Fatal("a banned token was sampled")
	}
	_ = s.SetLogitBias(nil)
	if t2, _ := s.Sample(); t2 != tok {
		t.Fatal("removing the bias did not give the token back")
	}
	if err := s.SetLogitBias(map[int]float32{m.NVocab(): 1}); err == nil {
		t.Fatal("a token out of range was accepted")
	}
	_ = s.SetLogprobs(-1)
	if _, _, _, err := s.Logprobs(); err == nil {
		t.Fatal("logprobs while off")
	}
	run := func(p *SessionParams) string {
		s, _ := m.NewSession(p)
		defer s.Close()
		var b strings.Builder
		_, _ = s.Generate(context.Background(), prompt, 60, func(_ int, piece []byte) bool { b.Write(piece); return true })
		return b.String()
	}
	pen := greedy()
	pen.PresencePenalty, pen.FrequencyPenalty = 2, 1
	if run(greedy()) == run(pen) {
		t.Fatal("penalties changed nothing")
	}
}
