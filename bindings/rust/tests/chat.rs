//! libllm 0.3 through the Rust binding: metadata, chat templates, parse_special, truncate/tokens,
//! saved sessions (stories260K, as generate.rs).
use libllm_runtime as llm;
use std::path::PathBuf;

const PROMPT: &str = "Once upon a time";
const STORY: &str = ", there was a little girl named Lily. She loved to play outside in the park. One day, she saw";
// A short ChatML template and what Python's Jinja2 renders for MESSAGES (trim_blocks, lstrip_blocks).
const CHATML: &str = "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}\
                      {% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
const RENDERED: &str = "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n";

fn messages() -> Vec<llm::ChatMessage> {
    vec![("system", "You are terse.").into(), llm::ChatMessage::new("user", "Hi!")]
}

fn load() -> llm::Model {
    let shared = std::env::var_os("LLM_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"));
    llm::Model::load(shared.join("models/stories260K.gguf"), &llm::ModelParams::default()).expect("load stories260K")
}

fn greedy() -> llm::SessionParams {
    let mut p = llm::SessionParams::default();
    p.temperature = 0.0;
    p.n_ctx = 128;
    p
}

#[test]
fn meta_string_and_not_found() {
    let model = load();
    assert_eq!(model.meta_string("general.architecture").unwrap(), "llama");
    assert_eq!(model.meta_string("llama.block_count").unwrap(), "5");
    let err = model.meta_string("general.no_such_key").unwrap_err();
    assert_eq!(err.status, llm::sys::LLM_ERR_NOT_FOUND);
    assert!(err.is_not_found());
    // stories260K has no chat template
    assert!(model.chat_template(None).unwrap_err().is_not_found());
    assert!(model.chat_template(Some("tool_use")).unwrap_err().is_not_found());
    assert!(model.apply_chat_template(&messages(), true, None).unwrap_err().is_not_found());
}

#[test]
fn apply_chat_template_renders_as_jinja2() {
    assert_eq!(llm::apply_chat_template(CHATML, &messages(), true).unwrap(), RENDERED);
    let without = llm::apply_chat_template(CHATML, &messages(), false).unwrap();
    assert_eq!(without, RENDERED.strip_suffix("<|im_start|>assistant\n").unwrap());
    let model = load();
    let with_bos = format!("{{{{ bos_token }}}}{CHATML}");
    assert_eq!(model.apply_chat_template(&messages(), true, Some(&with_bos)).unwrap(), format!("<s>{RENDERED}"));
    let err = llm::apply_chat_template("{% for m in messages %}", &messages(), true).unwrap_err();
    assert_eq!(err.status, llm::sys::LLM_ERR_FORMAT);
}

#[test]
fn session_params_v2() {
    let model = load();
    let p = llm::SessionParams::default();
    assert_eq!(p.version, llm::sys::LLM_SESSION_PARAMS_VERSION);
    assert!(!p.parse_special && !p.context_shift);
    assert_eq!((p.presence_penalty, p.frequency_penalty), (0.0, 0.0)); // version 3
    assert_eq!(p.n_keep, 0);
    assert_eq!(p.kv_types().unwrap(), (llm::KvType::F16, llm::KvType::F16));

    // parse_special: EOS's text "</s>" in the prompt becomes the EOS token
    let eos = model.token_eos().unwrap();
    let mut p = greedy();
    p.parse_special = true;
    let mut s = llm::Session::new(&model, &p).unwrap();
    s.generate(&format!("{PROMPT}</s>"), 1, |_, _| true).unwrap();
    let mut expect = model.tokenize(PROMPT, true, false).unwrap();
    expect.push(eos);
    assert_eq!(&s.tokens().unwrap()[..6], &expect[..]);
    drop(s);
    let mut s = llm::Session::new(&model, &greedy()).unwrap();
    s.generate(&format!("{PROMPT}</s>"), 1, |_, _| true).unwrap();
    assert!(!s.tokens().unwrap().contains(&eos));
    drop(s);

    let mut p = greedy();
    p.set_kv_types(llm::KvType::F32, llm::KvType::F32);
    p.context_shift = true;
    p.n_keep = 4;
    let mut s = llm::Session::new(&model, &p).unwrap();
    assert!(s.generate_text(PROMPT, 8).unwrap().starts_with(&STORY[..20]));
}

#[test]
fn truncate_and_tokens_round_trip() {
    let model = load();
    let mut s = llm::Session::new(&model, &greedy()).unwrap();
    assert!(s.tokens().unwrap().is_empty());
    let toks = model.tokenize(PROMPT, true, false).unwrap();
    s.prefill(&toks).unwrap();
    assert_eq!(s.tokens().unwrap(), toks);
    s.truncate(2).unwrap();
    assert_eq!(s.n_past(), 2);
    assert_eq!(s.tokens().unwrap(), &toks[..2]);
    assert_eq!(s.truncate(3).unwrap_err().status, llm::sys::LLM_ERR_INVALID_ARGUMENT);
    s.prefill(&toks[2..]).unwrap();
    assert!(s.generate_text("", 32).unwrap().starts_with(STORY));
}

#[test]
fn save_and_load_continue_the_same_tokens() {
    let model = load();
    let mut a = llm::Session::new(&model, &greedy()).unwrap();
    a.generate_text(PROMPT, 8).unwrap();
    let dir = std::env::temp_dir().join(format!("llm-rust-state-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("s.llmstate");
    a.save(&path).unwrap();
    let blob = a.save_to_vec().unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), blob);
    let rest = a.generate_text("", 16).unwrap();
    let mut b = llm::Session::new(&model, &greedy()).unwrap();
    b.load(&path).unwrap();
    assert_eq!(b.n_past(), 5 + 8);
    assert_eq!(b.generate_text("", 16).unwrap(), rest);
    let mut c = llm::Session::new(&model, &greedy()).unwrap();
    c.load_from_slice(&blob).unwrap();
    assert_eq!(c.generate_text("", 16).unwrap(), rest);
    let mut d = llm::Session::new(&model, &greedy()).unwrap();
    assert!(d.load_from_slice(&blob[..blob.len() / 2]).is_err());
    assert_eq!(d.n_past(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

// The README's two-turn chat on the ChatML copy of stories260K that run_tests.sh writes
// (bindings/chat_fixture.py, $LLM_CHAT_MODEL): the model's template, parse_special, and only the new
// suffix evaluated on the second turn.
#[test]
fn two_turn_chat_on_a_chatml_model() {
    let Some(path) = std::env::var_os("LLM_CHAT_MODEL") else {
        eprintln!("SKIPPED: LLM_CHAT_MODEL (written by run_tests.sh) is not set");
        return;
    };
    let model = llm::Model::load(path, &llm::ModelParams::default()).unwrap();
    let specials = model.tokenize("<|im_start|><|im_end|>", false, true).unwrap();
    let (im_start, im_end) = (specials[0], specials[1]);
    assert_eq!(model.token_eos(), Some(im_end));
    assert!(model.chat_template(None).unwrap().contains("<|im_start|>"));
    assert!(model.chat_template(Some("tool_use")).unwrap().starts_with("{{ bos_token }}"));
    let mut p = greedy();
    p.n_ctx = 512;
    p.parse_special = true;
    let mut s = llm::Session::new(&model, &p).unwrap();
    let mut chat: Vec<llm::ChatMessage> = vec![("system", "You tell stories.").into(), ("user", PROMPT).into()];
    let prompt1 = model.apply_chat_template(&chat, true, None).unwrap();
    assert_eq!(prompt1, format!("<|im_start|>system\nYou tell stories.<|im_end|>\n<|im_start|>user\n{PROMPT}<|im_end|>\n<|im_start|>assistant\n"));
    let reply1 = s.generate_text(&prompt1, 16).unwrap();
    let want1 = model.tokenize(&prompt1, true, true).unwrap();
    assert_eq!(&s.tokens().unwrap()[..want1.len()], &want1[..]);
    assert_eq!(want1.iter().filter(|&&t| t == im_start).count(), 3);
    chat.push(("assistant", reply1.as_str()).into());
    chat.push(("user", "Tell me more.").into());
    let prompt2 = model.apply_chat_template(&chat, true, None).unwrap();
    let suffix = prompt2.strip_prefix(&format!("{prompt1}{reply1}")).expect("turn 2 extends turn 1").to_string();
    let want2 = model.tokenize(&suffix, false, true).unwrap();
    assert_eq!(want2[0], im_end);
    let before = s.n_past() as usize;
    assert!(!s.generate_text(&suffix, 16).unwrap().is_empty());
    assert_eq!(s.stats().unwrap().1.prompt_tokens, want2.len() as u64); // only the new suffix
    assert_eq!(&s.tokens().unwrap()[before..before + want2.len()], &want2[..]);
}

#[test]
fn tools_round_trip() {
    // Render with tools, parse the model's call, render the call and its result (JSON text in and out).
    let tmpl = "{% for m in messages %}<{{ m.role }}>{% if m.tool_calls %}<tool_call>\
                {{ m.tool_calls[0].function|tojson }}</tool_call>{% else %}{{ m.content }}{% endif %}{% endfor %}\
                {% if tools %}[{{ tools[0].function.name }}]{% endif %}{% if add_generation_prompt %}<assistant>{% endif %}";
    let tools = r#"[{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]"#;
    let req = format!(r#"{{"messages": [{{"role": "user", "content": "Paris?"}}], "tools": {tools}, "add_generation_prompt": true}}"#);
    assert_eq!(llm::apply_chat_template_json(None, Some(tmpl), &req).unwrap(), "<user>Paris?[get_weather]<assistant>");
    let reply = r#"Let me look.<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>"#;
    let parsed = llm::chat_parse(None, Some(tmpl), reply, Some(&format!(r#"{{"tools": {tools}}}"#))).unwrap();
    assert_eq!(
        parsed,
        r#"{"content":"Let me look.","reasoning_content":"","tool_calls":[{"name":"get_weather","arguments":"{\"city\":\"Paris\"}","id":""}],"format":"hermes","parsed":true}"#
    );
    let req = r#"{"messages": [{"role": "user", "content": "Paris?"}, {"role": "assistant", "content": null,
        "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "name": "get_weather", "content": "12C"}], "add_generation_prompt": true}"#;
    assert_eq!(
        llm::apply_chat_template_json(None, Some(tmpl), req).unwrap(),
        r#"<user>Paris?<assistant><tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call><tool>12C<assistant>"#
    );
    let err = llm::apply_chat_template_json(None, Some(tmpl), r#"{"messages": 3}"#).unwrap_err();
    assert_eq!(err.status, llm::sys::LLM_ERR_INVALID_ARGUMENT);
    assert!(llm::chat_parse(None, Some(tmpl), "x", Some(r#"{"tools": 3}"#)).is_err());
}
