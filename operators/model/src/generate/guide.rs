//! Guided decoding: the reply is constrained to one of a fixed set of token sequences (vLLM's
//! `guided_choice`, outlines' choice constraint).
//!
//! A model trained from scratch almost never writes an exact answer such as
//! `<answer>Left</answer><|im_end|>` by chance, so reinforcement learning would never see a
//! reward. With a guide, every token is drawn from the model's distribution renormalised over
//! the tokens that keep the reply on a path of the [`AnswerChoices`] trie: at prefix `y<i`,
//! `π_guided(y_i | y<i) = softmax(z / T)` restricted to `allowed(y<i)`. The constraint is part
//! of the policy, not a filter around it. The generator reports this guided log-prob as the
//! behaviour log-prob, and [`crate::logprob::response_logprobs_guided`] recomputes it
//! with the same allowed sets, so the old, reference and current log-probs are all log-probs
//! of one proper distribution over the choices, and the PPO ratio starts at exactly 1. A
//! token that is the only one allowed ("forced") has guided log-prob 0, entropy 0 and no
//! gradient: only the real decisions between choices are trained.

use super::super::error::ModelError;
use super::super::tokenizer::TextTokenizer;

/// A set of allowed completions stored as a token trie.
///
/// No choice may be a strict prefix of another: after the shorter one the reply could either
/// stop or go on, and stopping is not a token, so that decision would have no log-prob for
/// training to recompute. Ending every choice with a stop token (as [`Self::from_texts`]
/// does) rules it out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AnswerChoices {
    /// Node 0 is the root (the empty prefix).
    nodes: Vec<Node>,
    choices: Vec<Vec<u32>>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Node {
    /// The tokens that may follow, sorted.
    next: Vec<u32>,
    /// The node after each token of `next`.
    child: Vec<usize>,
    /// Whether the path to this node is a whole choice (then it has no children).
    complete: bool,
}

impl AnswerChoices {
    /// The choices `sequences` (each a non-empty token sequence; none a prefix of another).
    pub fn new(sequences: Vec<Vec<u32>>) -> Result<Self, ModelError> {
        let bad = |message: String| Err(ModelError::Request { message });
        if sequences.is_empty() {
            return bad("guided choice: the set of allowed answers is empty".into());
        }
        if let Some(i) = sequences.iter().position(Vec::is_empty) {
            return bad(format!("guided choice: answer {i} has no tokens"));
        }
        let mut sorted: Vec<(usize, &Vec<u32>)> = sequences.iter().enumerate().collect();
        sorted.sort_by(|a, b| a.1.cmp(b.1));
        // In sorted order a prefix comes right before a sequence it is a prefix of.
        for pair in sorted.windows(2) {
            let ((i, short), (j, long)) = (pair[0], pair[1]);
            if long.starts_with(short) {
                if short.len() == long.len() {
                    return bad(format!(
                        "guided choice: answers {i} and {j} are the same sequence {short:?}"
                    ));
                }
                return bad(format!(
                    "guided choice: answer {i} {short:?} is a prefix of answer {j}; after it \
                     the reply could either stop or continue, and stopping is not a token the \
                     policy can give a log-prob to (end every answer with the stop token)"
                ));
            }
        }
        let mut nodes = vec![Node::default()];
        for sequence in &sequences {
            let mut at = 0;
            for &token in sequence {
                at = match nodes[at].next.binary_search(&token) {
                    Ok(k) => nodes[at].child[k],
                    Err(k) => {
                        let new = nodes.len();
                        nodes[at].next.insert(k, token);
                        nodes[at].child.insert(k, new);
                        nodes.push(Node::default());
                        new
                    }
                };
            }
            nodes[at].complete = true;
        }
        Ok(AnswerChoices {
            nodes,
            choices: sequences,
        })
    }

    /// The tokenizer's encoding of each text followed by `stop` (e.g. `<|im_end|>`), so that
    /// generation ends right after a whole answer.
    pub fn from_texts(
        tokenizer: &TextTokenizer,
        texts: &[String],
        stop: u32,
    ) -> Result<Self, ModelError> {
        let sequences = texts
            .iter()
            .map(|text| {
                let mut ids = tokenizer.encode(text)?;
                ids.push(stop);
                Ok(ids)
            })
            .collect::<Result<Vec<_>, ModelError>>()?;
        Self::new(sequences)
    }

    /// The allowed sequences, as given.
    pub fn choices(&self) -> &[Vec<u32>] {
        &self.choices
    }

    /// Length of the longest choice. A request whose `max_new_tokens` is smaller may end
    /// with `FinishReason::Length` before completing a choice.
    pub fn longest(&self) -> usize {
        self.choices.iter().map(Vec::len).max().unwrap_or(0)
    }

    /// The tokens that may follow `prefix`, sorted and never empty; `None` when `prefix` is
    /// not a proper prefix of a choice (it left the trie, or it already is a whole choice).
    pub fn allowed(&self, prefix: &[u32]) -> Option<&[u32]> {
        let node = &self.nodes[self.walk(prefix)?];
        (!node.complete).then_some(node.next.as_slice())
    }

    /// Whether `prefix` is exactly one of the choices.
    pub fn is_complete(&self, prefix: &[u32]) -> bool {
        self.walk(prefix).is_some_and(|n| self.nodes[n].complete)
    }

    /// For each position `i` of a generated `response`, the tokens allowed at
    /// `response[..i]` (what [`Self::allowed`] gives, in one pass): the per-token constraint
    /// that log-prob recomputation applies.
    pub fn allowed_along(&self, response: &[u32]) -> Vec<Option<&[u32]>> {
        let mut at = Some(0);
        response
            .iter()
            .map(|&token| {
                let node = &self.nodes[at?];
                if node.complete {
                    at = None;
                    return None;
                }
                at = node.next.binary_search(&token).ok().map(|k| node.child[k]);
                Some(node.next.as_slice())
            })
            .collect()
    }

    /// The node `prefix` leads to, if it stays in the trie.
    fn walk(&self, prefix: &[u32]) -> Option<usize> {
        prefix.iter().try_fold(0, |at, token| {
            let node = &self.nodes[at];
            node.next.binary_search(token).ok().map(|k| node.child[k])
        })
    }
}

#[cfg(test)]
#[path = "guide_tests.rs"]
mod tests;
