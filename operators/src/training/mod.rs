//! What the training nodes share: the walk over a batch in epochs, mini-batches and
//! micro-batches with gradient accumulation, shared by several workers ([`epochs`]), and
//! what `--dump-batches` adds for `ActorStep` ([`loss_dump`]). The
//! nodes themselves (`ActorStep`, `CriticStep`, `LogProb`, `Values`) live in
//! `crate::nodes`.

pub mod epochs;
pub mod loss_dump;
