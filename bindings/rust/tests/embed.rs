//! libllm 0.4 embeddings: Session::embed against llama.cpp's mean vectors of the qwen3 fixture
//! (shared/embeddings), raw and normalised, and a batch against each text alone.
use libllm_runtime as llm;
use std::path::PathBuf;

fn shared() -> PathBuf {
    std::env::var_os("LLM_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"))
}

fn read_f32(path: PathBuf) -> Vec<f32> {
    let b = std::fs::read(path).unwrap();
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

// The "text" values of the golden's prompts (a tiny scan: the crate has no JSON dependency).
fn prompt_texts() -> Vec<String> {
    std::fs::read_to_string(shared().join("embeddings/prompts.txt"))
        .unwrap()
        .lines()
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

#[test]
fn embed_matches_llama_cpp_and_batches_bit_for_bit() {
    let qwen3 = shared().join("fixtures/models/qwen3.f32.gguf");
    if !qwen3.exists() {
        eprintln!("no qwen3 fixture: skipped");
        return;
    }
    let model = llm::Model::load(&qwen3, &llm::ModelParams::default()).unwrap();
    let mut sp = llm::SessionParams::default();
    sp.n_ctx = 256;
    sp.set_kv_types(llm::KvType::F32, llm::KvType::F32);
    let mut s = llm::Session::new(&model, &sp).unwrap();
    let texts = prompt_texts();
    assert_eq!(texts.len(), 4);
    let raw = read_f32(shared().join("embeddings/qwen3.f32.mean.raw.f32"));
    let vecs = s.embed(&texts, Some(llm::Pooling::Mean), false).unwrap();
    for (i, v) in vecs.iter().enumerate() {
        assert_eq!(v.len(), 256);
        let worst = v.iter().zip(&raw[i * 256..(i + 1) * 256]).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(worst <= 1e-4, "vector {i}: max diff {worst}");
    }
    let unit = s.embed(&texts, Some(llm::Pooling::Mean), true).unwrap();
    for (i, v) in unit.iter().enumerate() {
        let r = &raw[i * 256..(i + 1) * 256];
        let dot: f64 = v.iter().zip(r).map(|(a, b)| *a as f64 * *b as f64).sum();
        let rr: f64 = r.iter().map(|b| *b as f64 * *b as f64).sum();
        assert!(dot / rr.sqrt() >= 0.99999);
        let alone = s.embed(&texts[i..i + 1], Some(llm::Pooling::Mean), true).unwrap();
        assert_eq!(alone[0], *v);
    }
    let err = s.embed(&["ok", ""], Some(llm::Pooling::Mean), false).unwrap_err();
    assert_eq!(err.status, llm::sys::LLM_ERR_INVALID_ARGUMENT);
    let err = s.embed(&["ok"], Some(llm::Pooling::Rank), false).unwrap_err();
    assert_eq!(err.status, llm::sys::LLM_ERR_UNSUPPORTED);
    let none = s.embed(&["Hello world"], None, false).unwrap();
    assert!(none[0].len() > 256 && none[0].len() % 256 == 0);
}
