//! Structured output through the Rust binding on stories260K: JSON out of a schema (parsed here and
//! checked against it), a GBNF grammar, stop strings, log-probabilities, logit bias and penalties.
use libllm_runtime as llm;
use std::collections::BTreeMap;
use std::path::PathBuf;

const PROMPT: &str = "Once upon a time";
// A bounded object: every draw must close it within a few dozen tokens; then only the end remains.
const PERSON: &str = r#"{"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
    "age": {"type": "integer", "minimum": 0, "maximum": 120}}, "required": ["name", "age"],
    "additionalProperties": false}"#;

fn load() -> llm::Model {
    let shared = std::env::var_os("LLM_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"));
    llm::Model::load(shared.join("models/stories260K.gguf"), &llm::ModelParams::default()).expect("load stories260K")
}

// Just enough JSON (no crates: the tests build offline) to check the output against PERSON.
#[derive(Debug, PartialEq)]
enum Json {
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    Arr(Vec<Json>),
    Obj(BTreeMap<String, Json>),
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && b" \t\r\n".contains(&self.s[self.i]) {
            self.i += 1;
        }
    }
    fn eat(&mut self, c: u8) -> Option<()> {
        self.ws();
        (self.s.get(self.i) == Some(&c)).then(|| self.i += 1)
    }
    fn string(&mut self) -> Option<String> {
        self.eat(b'"')?;
        let mut out = Vec::new();
        loop {
            let c = *self.s.get(self.i)?;
            self.i += 1;
            match c {
                b'"' => return String::from_utf8(out).ok(),
                b'\\' => {
                    let e = *self.s.get(self.i)?;
                    self.i += 1;
                    match e {
                        b'n' => out.push(b'\n'),
                        b't' => out.push(b'\t'),
                        b'r' => out.push(b'\r'),
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'u' => {
                            let hex = std::str::from_utf8(self.s.get(self.i..self.i + 4)?).ok()?;
                            self.i += 4;
                            let ch = char::from_u32(u32::from_str_radix(hex, 16).ok()?).unwrap_or('\u{fffd}');
                            out.extend_from_slice(ch.to_string().as_bytes());
                        }
                        b'"' | b'\\' | b'/' => out.push(e),
                        _ => return None,
                    }
                }
                c if c < 0x20 => return None,
                c => out.push(c),
            }
        }
    }
    fn value(&mut self) -> Option<Json> {
        self.ws();
        let rest = &self.s[self.i..];
        for (word, v) in [("null", Json::Null), ("true", Json::Bool(true)), ("false", Json::Bool(false))] {
            if rest.starts_with(word.as_bytes()) {
                self.i += word.len();
                return Some(v);
            }
        }
        match *rest.first()? {
            b'"' => self.string().map(Json::Str),
            b'[' => {
                self.i += 1;
                let mut items = Vec::new();
                if self.eat(b']').is_some() {
                    return Some(Json::Arr(items));
                }
                loop {
                    items.push(self.value()?);
                    if self.eat(b']').is_some() {
                        return Some(Json::Arr(items));
                    }
                    self.eat(b',')?;
                }
            }
            b'{' => {
                self.i += 1;
                let mut map = BTreeMap::new();
                if self.eat(b'}').is_some() {
                    return Some(Json::Obj(map));
                }
                loop {
                    self.ws();
                    let k = self.string()?;
                    self.eat(b':')?;
                    if map.insert(k, self.value()?).is_some() {
                        return None; // a repeated key: not what the schema's grammar should give
                    }
                    if self.eat(b'}').is_some() {
                        return Some(Json::Obj(map));
                    }
                    self.eat(b',')?;
                }
            }
            _ => {
                let start = self.i;
                while self.i < self.s.len() && b"+-0123456789.eE".contains(&self.s[self.i]) {
                    self.i += 1;
                }
                let text = std::str::from_utf8(&self.s[start..self.i]).ok()?;
                // JSON's grammar, stricter than Rust's f64 parser: no leading '+', no bare '.5'
                let ok = !text.starts_with('+') && !text.starts_with('.') && !text.ends_with('.');
                ok.then(|| text.parse().ok().map(Json::Num)).flatten()
            }
        }
    }
}

fn parse_json(text: &str) -> Option<Json> {
    let mut p = Parser { s: text.as_bytes(), i: 0 };
    let v = p.value()?;
    p.ws();
    (p.i == p.s.len()).then_some(v)
}

// JSON Schema's integer is any number without a fraction (12.0 is one).
fn fits_person(v: &Json) -> bool {
    let Json::Obj(m) = v else { return false };
    let name_ok = matches!(m.get("name"), Some(Json::Str(n)) if n.chars().count() <= 8);
    let age_ok = matches!(m.get("age"), Some(Json::Num(a)) if a.fract() == 0.0 && (0.0..=120.0).contains(a));
    m.len() == 2 && name_ok && age_ok
}

#[test]
fn json_schema_generation_parses_and_fits() {
    let model = load();
    for seed in 0..5u64 {
        let mut p = llm::SessionParams::default();
        p.temperature = 1.0;
        p.seed = seed;
        let mut s = llm::Session::new(&model, &p).unwrap();
        s.set_json_schema(Some(PERSON)).unwrap();
        let text = s.generate_text(PROMPT, 200).unwrap();
        assert_eq!(s.last_finish(), Some(llm::Finish::EndOfGeneration), "seed {seed}: {text}");
        let v = parse_json(&text).unwrap_or_else(|| panic!("seed {seed}: not JSON: {text}"));
        assert!(fits_person(&v), "seed {seed}: {text}");
    }
    let mut s = llm::Session::new(&model, &llm::SessionParams::default()).unwrap();
    let err = s.set_json_schema(Some(r#"{"type": "object", "not": {}}"#)).unwrap_err();
    assert_eq!(err.status, llm::sys::LLM_ERR_UNSUPPORTED);
    s.set_json_schema(None).unwrap();
}

#[test]
fn grammar_pull_and_errors() {
    let model = load();
    let mut p = llm::SessionParams::default();
    p.temperature = 1.0;
    p.seed = 3;
    let mut s = llm::Session::new(&model, &p).unwrap();
    s.set_grammar(Some("root ::= \"Lily\" (\" was\" | \" ran\"){1,3} \".\"\n"), None).unwrap();
    s.prefill(&model.tokenize(PROMPT, true, false).unwrap()).unwrap();
    let mut text = Vec::new();
    while let Some((_, piece)) = s.next_token().unwrap() {
        text.extend_from_slice(&piece);
    }
    assert_eq!(s.last_finish(), Some(llm::Finish::EndOfGeneration));
    let text = String::from_utf8(text).unwrap();
    let words: Vec<&str> = text.strip_prefix("Lily").and_then(|t| t.strip_suffix('.')).unwrap().split(' ').collect();
    assert!(words[0].is_empty() && (2..=4).contains(&words.len()), "{text}");
    assert!(words[1..].iter().all(|w| *w == "was" || *w == "ran"), "{text}");
    let err = s.set_grammar(Some("root ::= [a-\n"), None).unwrap_err();
    assert_eq!(err.status, llm::sys::LLM_ERR_INVALID_ARGUMENT);
    assert!(err.message.contains("line 2, column 1"), "{}", err.message);
    s.set_grammar(None, None).unwrap();
}

#[test]
fn stop_strings() {
    let model = load();
    let mut p = llm::SessionParams::default();
    p.temperature = 0.0;
    let full = llm::Session::new(&model, &p).unwrap().generate_text(PROMPT, 40).unwrap();
    let cut = &full[..full.find(" Lily").expect("the story names Lily")];
    let mut s = llm::Session::new(&model, &p).unwrap();
    s.set_stop(&[" Lily", "never there"]).unwrap();
    assert_eq!(s.generate_text(PROMPT, 40).unwrap(), cut);
    assert_eq!(s.last_finish(), Some(llm::Finish::StopString));
    // The pull side: the same text, the held part taken at the end.
    let mut s = llm::Session::new(&model, &p).unwrap();
    s.set_stop(&[" Lily"]).unwrap();
    s.prefill(&model.tokenize(PROMPT, true, false).unwrap()).unwrap();
    let mut text = Vec::new();
    for _ in 0..40 {
        match s.next_token().unwrap() {
            Some((_, piece)) => text.extend_from_slice(&piece),
            None => break,
        }
    }
    text.extend(s.flush_held().unwrap());
    assert_eq!((String::from_utf8(text).unwrap().as_str(), s.last_finish()), (cut, Some(llm::Finish::StopString)));
    assert_eq!(s.set_stop(&[""]).unwrap_err().status, llm::sys::LLM_ERR_INVALID_ARGUMENT);
    s.set_stop::<&str>(&[]).unwrap();
}

#[test]
fn logprobs_bias_and_penalties() {
    let model = load();
    let mut p = llm::SessionParams::default();
    p.temperature = 0.0;
    let mut s = llm::Session::new(&model, &p).unwrap();
    s.set_logprobs(Some(3)).unwrap();
    s.prefill(&model.tokenize(PROMPT, true, false).unwrap()).unwrap();
    let tok = s.sample().unwrap();
    let (t, lp, top) = s.logprobs().unwrap();
    assert_eq!((t, top.len(), top[0].token), (tok, 3, tok));
    assert!(lp < 0.0);
    s.set_logit_bias(&[(tok, f32::NEG_INFINITY)]).unwrap();
    assert_ne!(s.sample().unwrap(), tok);
    s.set_logit_bias(&[]).unwrap();
    assert_eq!(s.sample().unwrap(), tok);
    assert!(s.set_logit_bias(&[(model.n_vocab(), 1.0)]).is_err());
    s.set_logprobs(None).unwrap();
    assert!(s.logprobs().is_err());

    let plain = llm::Session::new(&model, &p).unwrap().generate_text(PROMPT, 60).unwrap();
    p.presence_penalty = 2.0;
    p.frequency_penalty = 1.0;
    let penalized = llm::Session::new(&model, &p).unwrap().generate_text(PROMPT, 60).unwrap();
    assert_ne!(plain, penalized);
}
