//! What the training nodes share: the walk over a batch in epochs, mini-batches and
//! micro-batches with gradient accumulation ([`epochs`]), and the refusal to train on
//! several workers before gradients are averaged across them ([`workers`]). The nodes
//! themselves (`ActorStep`, `CriticStep`, `LogProb`, `Values`) live in `crate::nodes`.

pub mod epochs;
pub mod workers;
