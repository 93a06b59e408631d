//! The Rust binding against the real library and stories260K ($LLM_SHARED_DIR, default
//! ../../../shared relative to this crate).
use libllm_runtime as llm;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread;

const PROMPT: &str = "Once upon a time";
const STORY: &str = ", there was a little girl named Lily. She loved to play outside in the park. One day, she saw";

fn model_path() -> PathBuf {
    let shared = std::env::var_os("LLM_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"));
    shared.join("models/stories260K.gguf")
}

// "MAJOR.MINOR.PATCH" of include/llm.h: the library reports the header it was built from.
fn header_version() -> String {
    let header = std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../include/llm.h")).unwrap();
    let part = |name: &str| {
        let tag = format!("#define LLM_VERSION_{name} ");
        let line = header.lines().find(|l| l.starts_with(&tag)).unwrap();
        line[tag.len()..].trim().to_string()
    };
    format!("{}.{}.{}", part("MAJOR"), part("MINOR"), part("PATCH"))
}

fn greedy() -> llm::SessionParams {
    let mut p = llm::SessionParams::default();
    p.temperature = 0.0;
    p.n_ctx = 256;
    p
}

fn load() -> llm::Model {
    llm::Model::load(model_path(), &llm::ModelParams::default()).expect("load stories260K")
}

fn assert_send_sync<T: Send + Sync>() {}
fn assert_send<T: Send>() {}

#[test]
fn threading_markers() {
    assert_send_sync::<llm::Model>();
    assert_send::<llm::Session<'static>>();
    assert_send_sync::<llm::Canceller>();
}

#[test]
fn struct_layouts_match_the_lp64_table() {
    use std::mem::size_of;
    assert_eq!(size_of::<llm::sys::llm_model_params>(), 48);
    assert_eq!(size_of::<llm::sys::llm_session_params>(), 80);
    assert_eq!(size_of::<llm::sys::llm_logprobs_params>(), 24);
    assert_eq!(size_of::<llm::sys::llm_token_logprob>(), 8);
    assert_eq!(size_of::<llm::sys::llm_chat_message>(), 16);
    assert_eq!(size_of::<llm::sys::llm_writer>(), 24);
    assert_eq!(size_of::<llm::sys::llm_io>(), 40);
    assert_eq!(size_of::<llm::sys::llm_memory_plan>(), 80);
    assert_eq!(size_of::<llm::sys::llm_stats>(), 88);
    assert_eq!(size_of::<llm::sys::llm_speculation_params>(), 32);
    let p = llm::ModelParams::default();
    assert_eq!(p.version, llm::sys::LLM_MODEL_PARAMS_VERSION);
    // A version newer than the library's is refused.
    let mut q = std::mem::MaybeUninit::<llm::sys::llm_model_params>::zeroed();
    let st = unsafe { llm::sys::llm_model_params_init(q.as_mut_ptr(), llm::sys::LLM_MODEL_PARAMS_VERSION + 1) };
    assert_eq!(st, llm::sys::LLM_ERR_INVALID_ARGUMENT);
}

#[test]
fn errors_carry_status_and_message() {
    let err = llm::Model::load("/nonexistent/model.gguf", &llm::ModelParams::default()).err().unwrap();
    assert_eq!(err.status, llm::sys::LLM_ERR_IO);
    assert!(!err.message.is_empty());
    assert!(err.to_string().contains(&err.message));

    let err = llm::Model::load_with_progress(model_path(), &llm::ModelParams::default(), |_| false).err().unwrap();
    assert_eq!(err.status, llm::sys::LLM_ERR_CANCELLED);
}

#[test]
fn progress_panic_is_resumed_after_the_load() {
    let r = std::panic::catch_unwind(|| {
        let _ = llm::Model::load_with_progress(model_path(), &llm::ModelParams::default(), |_| panic!("in progress"));
    });
    assert!(r.is_err());
}

#[test]
fn generates_the_story() {
    let mut fractions = Vec::new();
    let model = llm::Model::load_with_progress(model_path(), &llm::ModelParams::default(), |f| {
        fractions.push(f);
        true
    })
    .unwrap();
    assert!(!fractions.is_empty());
    assert_eq!(llm::version(), header_version());
    assert_eq!(model.n_vocab(), 512);
    assert_eq!(model.token_bos(), Some(1));
    assert!(model.info_json().contains("\"arch\":\"llama\""));
    assert_eq!(model.tokenize(PROMPT, true, false).unwrap().len(), 5);
    assert!(model.memory_plan(256).unwrap().kv_cache_bytes > 0);

    let mut s = llm::Session::new(&model, &greedy()).unwrap();
    let mut n = 0;
    let mut text = Vec::new();
    let finish = s
        .generate(PROMPT, 32, |_, piece| {
            n += 1;
            text.extend_from_slice(piece);
            true
        })
        .unwrap();
    assert_eq!(finish, llm::Finish::Stopped);
    assert_eq!(n, 32);
    let text = String::from_utf8(text).unwrap();
    assert!(text.starts_with(STORY), "{text}");
    let (total, _) = s.stats().unwrap();
    assert_eq!(total.generated_tokens, 32);
    assert!(s.stats_json().contains("\"generated_tokens\":32"));
}

#[test]
fn pull_api_matches_generate() {
    let model = load();
    let mut s = llm::Session::new(&model, &greedy()).unwrap();
    let prompt = model.tokenize(PROMPT, true, false).unwrap();
    s.prefill(&prompt).unwrap();
    assert_eq!(s.logits().unwrap().len(), 512);
    let mut text = Vec::new();
    for _ in 0..32 {
        match s.next_token().unwrap() {
            Some((_, piece)) => text.extend(piece),
            None => break,
        }
    }
    assert!(String::from_utf8_lossy(&text).starts_with(STORY));
    assert_eq!(s.n_past(), 5 + 32);
}

#[test]
fn callback_stop_and_panic() {
    let model = load();
    let mut s = llm::Session::new(&model, &greedy()).unwrap();
    s.generate(PROMPT, 32, |_, _| false).unwrap();
    assert_eq!(s.n_past(), 6);
    s.reset().unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = s.generate(PROMPT, 32, |_, _| panic!("in the token callback"));
    }));
    assert!(r.is_err());
    // the session is still usable
    s.reset().unwrap();
    assert!(s.generate_text(PROMPT, 32).unwrap().starts_with(STORY));
}

#[test]
fn cancel_from_another_thread() {
    let model = load();
    let mut s = llm::Session::new(&model, &greedy()).unwrap();
    let canceller = s.canceller();
    let (started_tx, started_rx) = std::sync::mpsc::channel::<()>();
    let (cancelled_tx, cancelled_rx) = std::sync::mpsc::channel::<()>();
    let th = thread::spawn(move || {
        started_rx.recv().unwrap();
        canceller.cancel();
        cancelled_tx.send(()).unwrap();
    });
    let mut first = true;
    let err = s
        .generate(PROMPT, 64, |_, _| {
            if first {
                first = false;
                started_tx.send(()).unwrap();
                cancelled_rx.recv().unwrap(); // hold generation until the cancel is in
            }
            true
        })
        .unwrap_err();
    th.join().unwrap();
    assert_eq!(err.status, llm::sys::LLM_ERR_CANCELLED);
    s.reset().unwrap();
    assert!(s.generate_text(PROMPT, 32).unwrap().starts_with(STORY));
    // a canceller that outlives its session is a harmless no-op
    let late = s.canceller();
    drop(s);
    late.cancel();
}

#[test]
fn sessions_on_threads_share_one_model() {
    let model = Arc::new(load());
    let handles: Vec<_> = (0..3)
        .map(|_| {
            let model = Arc::clone(&model);
            thread::spawn(move || {
                let mut s = llm::Session::new(&model, &greedy()).unwrap();
                s.generate_text(PROMPT, 32).unwrap()
            })
        })
        .collect();
    for h in handles {
        assert!(h.join().unwrap().starts_with(STORY));
    }
    // a session moves to another thread (Send), scoped so it cannot outlive the model
    let model = load();
    let mut s = llm::Session::new(&model, &greedy()).unwrap();
    thread::scope(|sc| {
        sc.spawn(move || assert!(!s.generate_text(PROMPT, 8).unwrap().is_empty()));
    });
}
