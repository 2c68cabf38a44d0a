//! Test doubles: `Scripted`, a Generator whose vocabulary is interned words plus the 7B
//! model's reflection ids, answering with scripted continuations; `Library`, a Retriever.

use std::cell::RefCell;
use std::collections::HashMap;

use selfrag_core::{
    Answer, BackendError, GenerateRequest, GeneratedToken, Generation, Generator, Passage,
    Progress, REFLECTION_TOKENS, Retriever, Settings, StopReason, TokenId, Tokenizer,
};

pub const BOS: TokenId = 1;
pub const EOS: TokenId = 2;
/// Plain words get ids from here on, in order of first sight.
const FIRST_WORD: TokenId = 100;

/// One scripted position: the token chosen and the probabilities of other tokens there.
#[derive(Debug, Clone)]
pub struct Step {
    pub token: String,
    pub logprob: f32,
    pub probs: Vec<(String, f32)>,
}

/// A continuation the model will produce, cut by the request's stop ids and token limit.
#[derive(Debug, Clone, Default)]
pub struct Script {
    pub steps: Vec<Step>,
}

pub const EOS_TOKEN: &str = "</s>";

/// The log-probability of a special token written without a watched probability of its own.
pub const SPECIAL_LOGPROB: f32 = -0.01;

/// p_LM over every generated token from their log-probabilities: exp(mean).
pub fn p_lm_of(logprobs: &[f32]) -> f32 {
    (logprobs.iter().sum::<f32>() / logprobs.len() as f32).exp()
}

impl Script {
    pub fn new() -> Self {
        Self::default()
    }

    /// A special token (reflection, `</s>`) with the given watched probabilities. Its own
    /// log-probability is ln of its watched probability where that is given and positive, as a
    /// model's would be, else -0.01.
    pub fn special(mut self, token: &str, probs: &[(&str, f32)]) -> Self {
        let own = probs
            .iter()
            .find(|(t, p)| *t == token && *p > 0.0)
            .map_or(SPECIAL_LOGPROB, |(_, p)| p.ln());
        self.steps.push(Step {
            token: token.to_string(),
            logprob: own,
            probs: probs.iter().map(|(t, p)| (t.to_string(), *p)).collect(),
        });
        self
    }

    /// Whitespace-separated words, each with `logprob`.
    pub fn text(mut self, text: &str, logprob: f32) -> Self {
        for word in text.split_whitespace() {
            self.steps.push(Step {
                token: word.to_string(),
                logprob,
                probs: Vec::new(),
            });
        }
        self
    }

    /// `[Relevant]`/`[Irrelevant]` (the likelier one) with p(Relevant) = rel, p(Irrelevant) = irr.
    pub fn isrel(self, rel: f32, irr: f32) -> Self {
        let token = if irr > rel {
            "[Irrelevant]"
        } else {
            "[Relevant]"
        };
        self.special(token, &[("[Relevant]", rel), ("[Irrelevant]", irr)])
    }

    /// The likeliest IsSup token, with (fully, partially, no support).
    pub fn issup(self, p: [f32; 3]) -> Self {
        let names = [
            "[Fully supported]",
            "[Partially supported]",
            "[No support / Contradictory]",
        ];
        let best = argmax(&p);
        let probs: Vec<(&str, f32)> = names.iter().copied().zip(p).collect();
        self.special(names[best], &probs)
    }

    /// The likeliest utility token, with p(Utility:1..5).
    pub fn isuse(self, p: [f32; 5]) -> Self {
        let names = [
            "[Utility:1]",
            "[Utility:2]",
            "[Utility:3]",
            "[Utility:4]",
            "[Utility:5]",
        ];
        let best = argmax(&p);
        let probs: Vec<(&str, f32)> = names.iter().copied().zip(p).collect();
        self.special(names[best], &probs)
    }

    pub fn eos(self) -> Self {
        self.special(EOS_TOKEN, &[])
    }

    /// The usual retrieved candidate: `[Relevant]text[Fully supported][Utility:5]</s>`.
    pub fn candidate(text: &str, rel: (f32, f32), sup: [f32; 3], usefulness: [f32; 5]) -> Self {
        Self::new()
            .isrel(rel.0, rel.1)
            .text(text, -0.1)
            .issup(sup)
            .isuse(usefulness)
            .eos()
    }
}

fn argmax(p: &[f32]) -> usize {
    let mut best = 0;
    for (i, v) in p.iter().enumerate() {
        if *v > p[best] {
            best = i;
        }
    }
    best
}

type Responder = Box<dyn FnMut(&str) -> Script>;
type Decider = Box<dyn FnMut(&str) -> (f32, f32)>;

/// A Generator driven by closures over the decoded prompt.
pub struct Scripted {
    words: RefCell<HashMap<String, TokenId>>,
    names: RefCell<Vec<String>>,
    pub context: usize,
    /// (p([Retrieval]), p([No Retrieval])) after a decoded prompt.
    pub decide: Decider,
    /// The continuation of a decoded prompt.
    pub respond: Responder,
    /// Every `generate_batch` call: its prompts and request.
    pub batches: Vec<(Vec<Vec<TokenId>>, GenerateRequest)>,
    /// Every `next_token_probs` prompt.
    pub decisions: Vec<Vec<TokenId>>,
    /// Tokens the vocabulary lacks (for MissingReflectionTokens).
    pub lacks: Vec<&'static str>,
    /// `generate_batch` call (0-based) that fails, as a server that stops answering does.
    pub fail_batch: Option<usize>,
    /// Another token's probability after every prompt (plain text the model would rather
    /// write than either Retrieve token).
    pub other_next: Option<(TokenId, f32)>,
}

impl Scripted {
    pub fn new(
        decide: impl FnMut(&str) -> (f32, f32) + 'static,
        respond: impl FnMut(&str) -> Script + 'static,
    ) -> Self {
        Self {
            words: RefCell::new(HashMap::new()),
            names: RefCell::new(Vec::new()),
            context: 4096,
            decide: Box::new(decide),
            respond: Box::new(respond),
            batches: Vec::new(),
            decisions: Vec::new(),
            lacks: Vec::new(),
            fail_batch: None,
            other_next: None,
        }
    }

    /// Fixed retrieve probabilities, one continuation per prompt chosen by `respond`.
    pub fn fixed(
        p_retrieval: f32,
        p_no: f32,
        respond: impl FnMut(&str) -> Script + 'static,
    ) -> Self {
        Self::new(move |_| (p_retrieval, p_no), respond)
    }

    fn special_id(&self, token: &str) -> Option<TokenId> {
        if self.lacks.contains(&token) {
            return None;
        }
        if token == EOS_TOKEN {
            return Some(EOS);
        }
        let index = REFLECTION_TOKENS.iter().position(|t| *t == token)?;
        Some(32000 + index as TokenId)
    }

    fn word_id(&self, word: &str) -> TokenId {
        let mut words = self.words.borrow_mut();
        if let Some(id) = words.get(word) {
            return *id;
        }
        let mut names = self.names.borrow_mut();
        let id = FIRST_WORD + names.len() as TokenId;
        names.push(word.to_string());
        words.insert(word.to_string(), id);
        id
    }

    fn step_id(&self, token: &str) -> TokenId {
        self.special_id(token)
            .unwrap_or_else(|| self.word_id(token))
    }

    /// Decodes ids, specials as their strings glued, words space-separated.
    pub fn render(&self, ids: &[TokenId]) -> String {
        let names = self.names.borrow();
        let mut out = String::new();
        for &id in ids {
            if id == BOS {
                out.push_str("<s>");
            } else if id == EOS {
                out.push_str(EOS_TOKEN);
            } else if (32000..32016).contains(&id) {
                out.push_str(REFLECTION_TOKENS[(id - 32000) as usize]);
            } else if id >= FIRST_WORD {
                out.push(' ');
                out.push_str(&names[(id - FIRST_WORD) as usize]);
            } else {
                out.push_str("<unk>");
            }
        }
        out
    }

    /// The prompts of batch call `call`, decoded.
    pub fn batch_prompts(&self, call: usize) -> Vec<String> {
        self.batches[call]
            .0
            .iter()
            .map(|p| self.render(p))
            .collect()
    }
}

impl Tokenizer for Scripted {
    fn token_id(&self, token: &str) -> Option<TokenId> {
        self.special_id(token).filter(|&id| id != EOS)
    }
    fn tokenize(&self, text: &str) -> Result<Vec<TokenId>, BackendError> {
        // Plain text only: "[Fully supported]" becomes the words "[Fully" and "supported]".
        Ok(text.split_whitespace().map(|w| self.word_id(w)).collect())
    }
    fn tokenize_after_special(&self, text: &str) -> Result<Vec<TokenId>, BackendError> {
        // Words carry no space marker: text reads the same wherever it starts.
        self.tokenize(text)
    }
    fn decode(&self, ids: &[TokenId]) -> Result<String, BackendError> {
        Ok(self.render(ids))
    }
    fn bos_id(&self) -> TokenId {
        BOS
    }
    fn eos_id(&self) -> TokenId {
        EOS
    }
    fn vocab_size(&self) -> usize {
        32016
    }
}

impl Generator for Scripted {
    fn tokenizer(&self) -> &dyn Tokenizer {
        self
    }
    fn context_length(&self) -> usize {
        self.context
    }
    fn next_token_probs(
        &mut self,
        prompt: &[TokenId],
        watch_ids: &[TokenId],
    ) -> Result<Vec<f32>, BackendError> {
        self.decisions.push(prompt.to_vec());
        let text = self.render(prompt);
        let (yes, no) = (self.decide)(&text);
        let retrieval = self.special_id("[Retrieval]");
        let no_retrieval = self.special_id("[No Retrieval]");
        Ok(watch_ids
            .iter()
            .map(|&id| {
                if Some(id) == retrieval {
                    yes
                } else if Some(id) == no_retrieval {
                    no
                } else {
                    self.other_next
                        .filter(|&(other, _)| other == id)
                        .map_or(0.0, |(_, p)| p)
                }
            })
            .collect())
    }
    fn generate_batch(
        &mut self,
        prompts: &[Vec<TokenId>],
        request: &GenerateRequest,
    ) -> Result<Vec<Generation>, BackendError> {
        self.batches.push((prompts.to_vec(), request.clone()));
        if self.fail_batch == Some(self.batches.len() - 1) {
            return Err("the server at http://gpu-box:8080 closed the connection".into());
        }
        let mut out = Vec::new();
        for prompt in prompts {
            let text = self.render(prompt);
            let script = (self.respond)(&text);
            let mut tokens = Vec::new();
            let mut stop = StopReason::Length;
            for step in script.steps {
                if tokens.len() == request.max_new_tokens {
                    break;
                }
                let id = self.step_id(&step.token);
                let probs: HashMap<TokenId, f32> = step
                    .probs
                    .iter()
                    .map(|(t, p)| (self.step_id(t), *p))
                    .collect();
                let watched = request
                    .watch_ids
                    .iter()
                    .map(|w| probs.get(w).copied().unwrap_or(0.0))
                    .collect();
                tokens.push(GeneratedToken {
                    id,
                    logprob: step.logprob,
                    watched,
                });
                if id == EOS {
                    stop = StopReason::EndOfSequence;
                    break;
                }
                if request.stops_at(id, tokens[..tokens.len() - 1].iter().map(|t| t.id)) {
                    stop = StopReason::StopToken;
                    break;
                }
            }
            out.push(Generation { tokens, stop });
        }
        Ok(out)
    }
}

/// A Retriever over fixed passages; records every query.
pub struct Library {
    pub passages: Vec<Passage>,
    pub queries: Vec<(String, usize)>,
}

impl Library {
    pub fn new(texts: &[&str]) -> Self {
        Self {
            passages: texts
                .iter()
                .enumerate()
                .map(|(i, t)| passage(i, t))
                .collect(),
            queries: Vec::new(),
        }
    }
}

pub fn passage(i: usize, text: &str) -> Passage {
    Passage {
        id: format!("p{i}"),
        title: format!("Doc{i}"),
        path: format!("/lib/doc{i}.pdf"),
        page: Some(i as u32 + 1),
        page_label: None,
        ocr_confidence: None,
        text: text.to_string(),
        work: None,
    }
}

impl Retriever for Library {
    fn search(&mut self, query: &str, k: usize) -> Result<Vec<Passage>, BackendError> {
        self.queries.push((query.to_string(), k));
        Ok(self.passages.iter().take(k).cloned().collect())
    }
}

/// Runs `answer` collecting progress, never cancelled.
pub fn run(
    question: &str,
    settings: &Settings,
    generator: &mut Scripted,
    library: &mut Library,
) -> (Answer, Vec<Progress>) {
    let mut events = Vec::new();
    let answer = selfrag_core::answer(
        question,
        settings,
        generator,
        library,
        &mut |p| events.push(p),
        &(),
    )
    .unwrap();
    (answer, events)
}

/// Every text a user can see in an answer.
pub fn visible_texts(answer: &Answer) -> Vec<String> {
    let mut texts = vec![answer.answer.clone()];
    for segment in &answer.segments {
        texts.push(segment.text.clone());
        for c in &segment.candidates {
            texts.push(c.text.clone());
        }
    }
    texts
}

/// Asserts no reflection token, `<pad>` or `</s>` string is in any visible text.
pub fn assert_clean(answer: &Answer) {
    for text in visible_texts(answer) {
        for token in REFLECTION_TOKENS.iter().chain(&[EOS_TOKEN]) {
            assert!(!text.contains(token), "{token} in {text:?}");
        }
    }
}

pub fn close(a: f32, b: f32) -> bool {
    (a - b).abs() < 1e-5
}

/// Candidate `i` is whatever `scripts[i]` says, matched by the passage word `passageI` of
/// [`numbered_library`] in its prompt.
pub fn by_passage(scripts: Vec<Script>) -> impl FnMut(&str) -> Script {
    move |prompt| {
        for (i, s) in scripts.iter().enumerate() {
            if prompt.contains(&format!(" passage{i} "))
                || prompt.ends_with(&format!(" passage{i}</paragraph>"))
            {
                return s.clone();
            }
        }
        Script::new().text("no passage", -1.0).eos()
    }
}

/// `k` passages whose texts are `passage0 text`, `passage1 text`, …
pub fn numbered_library(k: usize) -> Library {
    let texts: Vec<String> = (0..k).map(|i| format!("passage{i} text")).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    Library::new(&refs)
}
