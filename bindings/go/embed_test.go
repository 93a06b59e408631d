package llm

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// TestEmbed compares Session.Embed with llama.cpp's mean vectors of the qwen3 fixture
// ($LLM_SHARED_DIR/embeddings), raw and normalised, and a batch with each text alone.
func TestEmbed(t *testing.T) {
	shared := filepath.Dir(filepath.Dir(modelPath(t)))
	qwen3 := filepath.Join(shared, "fixtures", "models", "qwen3.f32.gguf")
	if _, err := os.Stat(qwen3); err != nil {
		t.Skip("no qwen3 fixture")
	}
	raw, err := os.ReadFile(filepath.Join(shared, "embeddings", "qwen3.f32.mean.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Prompts []struct {
			Text string `json:"text"`
		} `json:"prompts"`
		Files struct {
			Raw string `json:"raw"`
		} `json:"files"`
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	bytes, err := os.ReadFile(filepath.Join(shared, "embeddings", g.Files.Raw))
	if err != nil {
		t.Fatal(err)
	}
	ref := make([]float32, len(bytes)/4)
	for i := range ref {
		ref[i] = math.Float32frombits(binary.LittleEndian.Uint32(bytes[4*i:]))
	}
	mp := DefaultModelParams()
	m, err := LoadModel(qwen3, &mp)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	sp := DefaultSessionParams()
	sp.NCtx = 256
	sp.KVTypeK = KVF32
	sp.KVTypeV = KVF32
	s, err := m.NewSession(&sp)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	texts := make([]string, len(g.Prompts))
	for i, p := range g.Prompts {
		texts[i] = p.Text
	}
	vecs, err := s.Embed(texts, PoolingMean, false)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vecs {
		if len(v) != 256 {
			t.Fatalf("vector %d has %d floats", i, len(v))
		}
		for e := range v {
			if d := math.Abs(float64(v[e] - ref[i*256+e])); d > 1e-4 {
				t.Fatalf("vector %d [%d]: %g vs %g", i, e, v[e], ref[i*256+e])
			}
		}
	}
	unit, err := s.Embed(texts, PoolingMean, true)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range unit {
		var dot, rr float64
		for e := range v {
			dot += float64(v[e]) * float64(ref[i*256+e])
			rr += float64(ref[i*256+e]) * float64(ref[i*256+e])
		}
		if c := dot / math.Sqrt(rr); c < 0.99999 {
			t.Fatalf("cosine %d = %g", i, c)
		}
		alone, err := s.Embed(texts[i:i+1], PoolingMean, true)
		if err != nil {
			t.Fatal(err)
		}
		for e := range v {
			if alone[0][e] != v[e] {
				t.Fatalf("text %d alone differs at %d", i, e)
			}
		}
	}
	if _, err := s.Embed([]string{"ok", ""}, PoolingMean, false); err == nil || err.(*Error).Status != ErrInvalidArgument {
		t.Fatalf("empty text: %v", err)
	}
	if _, err := s.Embed([]string{"ok"}, PoolingRank, false); err == nil || err.(*Error).Status != ErrUnsupported {
		t.Fatalf("rank: %v", err)
	}
	if _, err := s.Embed([]string{"ok"}, 9, false); err == nil || err.(*Error).Status != ErrInvalidArgument {
		t.Fatalf("bad pooling: %v", err)
	}
}
