//! libllm 0.4: speculation, batched sessions and stats version 2, against stories260K. Any error
//! fails them (LLM_ERR_UNSUPPORTED too: the library implements 0.4).
use libllm_runtime as llm;
use std::path::PathBuf;

const PROMPT: &str = "Once upon a time";

fn model_path() -> PathBuf {
    let shared = std::env::var_os("LLM_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"));
    shared.join("models/stories260K.gguf")
}

fn load() -> llm::Model {
    llm::Model::load(model_path(), &llm::ModelParams::default()).expect("load stories260K")
}

fn greedy() -> llm::SessionParams {
    let mut p = llm::SessionParams::default();
    p.temperature = 0.0;
    p.n_ctx = 256;
    p
}

fn tokenize(model: &llm::Model, text: &str) -> Vec<i32> {
    model.tokenize(text, true, false).unwrap()
}

// The greedy tokens of `prompt` with the pull API, optionally after set_speculation.
fn pull(s: &mut llm::Session<'_>, prompt: &str, n: usize) -> Vec<i32> {
    s.prefill(&tokenize(s.model(), prompt)).unwrap();
    let mut out = Vec::new();
    while out.len() < n {
        match s.next_token().unwrap() {
            Some((t, _)) => out.push(t),
            None => break,
        }
    }
    out
}

fn plain(model: &llm::Model, prompt: &str, n: usize) -> Vec<i32> {
    let mut s = llm::Session::new(model, &greedy()).unwrap();
    pull(&mut s, prompt, n)
}

fn last_error() -> String {
    unsafe { std::ffi::CStr::from_ptr(llm::sys::llm_last_error()) }.to_string_lossy().into_owned()
}

#[test]
fn speculation_with_lookup_is_lossless() {
    let model = load();
    let want = plain(&model, PROMPT, 48);
    let mut s = llm::Session::new(&model, &greedy()).unwrap();
    let p = llm::SpeculationParams { lookup_ngram: 3, ..Default::default() };
    s.set_speculation(&p).expect("llm_session_set_speculation");
    assert_eq!(pull(&mut s, PROMPT, 48), want);
    let (total, _) = s.stats().unwrap();
    assert!(total.accepted_tokens <= total.drafted_tokens);
}

#[test]
fn speculation_with_same_file_draft_is_lossless() {
    let model = load();
    let want = plain(&model, PROMPT, 32);
    let mut s = llm::Session::new(&model, &greedy()).unwrap();
    {
        let draft = load();
        let p = llm::SpeculationParams { draft: Some(&draft), n_draft: 4, ..Default::default() };
        s.set_speculation(&p).expect("llm_session_set_speculation");
        // the draft is dropped here: the session keeps the library's own reference
    }
    assert_eq!(pull(&mut s, PROMPT, 32), want);
    let (total, _) = s.stats().unwrap();
    // The same weights draft what they verify: proposals are kept (a batched verify pass may round
    // differently from one-token drafting, so not necessarily all).
    assert!(total.accepted_tokens > 0 && total.accepted_tokens <= total.drafted_tokens, "{total:?}");
}

#[test]
fn speculation_bad_arguments_carry_the_library_message() {
    let model = load();
    let mut s = llm::Session::new(&model, &greedy()).unwrap();
    let p = llm::SpeculationParams { lookup_ngram: 2, n_draft: 0, ..Default::default() };
    let e = s.set_speculation(&p).unwrap_err();
    assert!(!e.message.is_empty());
    assert_eq!(e.message, last_error());
    assert_eq!(e.status, llm::sys::LLM_ERR_INVALID_ARGUMENT);
    assert!(e.message.contains("n_draft"), "{e}");
}

#[test]
fn next_batch_of_two_equals_their_solo_tokens() {
    let model = load();
    let prompts = [PROMPT, "Lily and Ben"];
    let want: Vec<Vec<i32>> = prompts.iter().map(|p| plain(&model, p, 16)).collect();
    let mut a = llm::Session::new(&model, &greedy()).unwrap();
    let mut b = llm::Session::new(&model, &greedy()).unwrap();
    a.prefill(&tokenize(&model, prompts[0])).unwrap();
    b.prefill(&tokenize(&model, prompts[1])).unwrap();
    let mut got = vec![Vec::new(), Vec::new()];
    let mut done = [false, false];
    for _ in 0..16 {
        let steps = llm::next_batch(&mut [&mut a, &mut b]).expect("llm_session_next_batch");
        assert_eq!(steps.len(), 2);
        for (i, &(token, status)) in steps.iter().enumerate() {
            if done[i] {
                continue;
            }
            match status {
                llm::sys::LLM_OK => got[i].push(token),
                llm::sys::LLM_DONE => done[i] = true,
                other => panic!("session {i}: status {other}"),
            }
        }
    }
    assert_eq!(got, want);
    assert_eq!(a.n_past() as usize, tokenize(&model, prompts[0]).len() + got[0].len());
}

#[test]
fn next_batch_whole_call_error() {
    let e = llm::next_batch(&mut []).unwrap_err();
    assert_eq!(e.status, llm::sys::LLM_ERR_INVALID_ARGUMENT);
    assert!(!e.message.is_empty());
    assert_eq!(e.message, last_error());
}

#[test]
fn stats_version_2_counters() {
    let model = load();
    let mut s = llm::Session::new(&model, &greedy()).unwrap();
    s.generate_text(PROMPT, 8).unwrap();
    let (total, last) = s.stats().unwrap();
    assert_eq!(total.version, 2);
    assert_eq!(last.version, 2);
    assert!(total.passes >= 1 + 7, "passes {}", total.passes); // the prompt's chunk, one per accept
    assert_eq!((total.drafted_tokens, total.accepted_tokens), (0, 0));
    assert_eq!(total.generated_tokens, 8);
}
