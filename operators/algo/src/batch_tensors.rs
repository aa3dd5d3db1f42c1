//! Batch columns as the packed tensors the losses take, so `actor_step` and `critic_step`
//! only add the model's forward pass.
//!
//! Columns are read once per micro-batch with the same missing-column advice as graph
//! validation; what a loss does not use is not read.

use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};
use roll_flow_engine::batch::column::{
    ADVANTAGES, BEHAVIOUR_LOGPROB, REF_LOGPROB, RETURNS, VALUES,
};
use roll_flow_engine::{Batch, Column};

use super::actor_loss::KlLoss;
use super::batch_read::read_f32;
use super::error::AlgoError;
use super::packed_layout::PackedLayout;
use super::policy_loss::PolicyLoss;
use super::ppo_loss::RatioLevel;

/// A token-level f32 column as a 1-D tensor.
pub fn token_tensor<B: Backend>(
    batch: &Batch,
    node: &'static str,
    column: &Column,
    device: &B::Device,
) -> Result<Tensor<B, 1>, AlgoError> {
    let values = read_f32(batch, node, column)?.to_vec();
    let n = values.len();
    Ok(Tensor::from_data(TensorData::new(values, [n]), device))
}

/// What the actor loss reads from the batch.
#[derive(Clone, Debug)]
pub struct ActorBatch<B: Backend> {
    pub layout: PackedLayout<B>,
    /// π_old, when read from the batch (`None` when the step's own log-probs stand in).
    pub old_logprob: Option<Tensor<B, 1>>,
    pub advantages: Tensor<B, 1>,
    pub behaviour_logprob: Option<Tensor<B, 1>>,
    pub ref_logprob: Option<Tensor<B, 1>>,
}

impl<B: Backend> ActorBatch<B> {
    /// Reads the columns `loss` (and the KL term, if any) need, and π_old from the column
    /// `old` (`None`: the step's own log-probs stand in, nothing is read).
    pub fn from_batch(
        batch: &Batch,
        loss: &PolicyLoss,
        kl: Option<&KlLoss>,
        old: Option<&Column>,
        device: &B::Device,
    ) -> Result<Self, AlgoError> {
        const NODE: &str = "ActorStep";
        let turns = loss.ratio() == RatioLevel::Segment;
        let layout = PackedLayout::from_batch(batch, NODE, turns, device)?;
        let behaviour = (loss.reads_behaviour())
            .then(|| token_tensor(batch, NODE, &BEHAVIOUR_LOGPROB, device))
            .transpose()?;
        let reference = kl
            .map(|_| token_tensor(batch, NODE, &REF_LOGPROB, device))
            .transpose()?;
        Ok(ActorBatch {
            old_logprob: old
                .map(|column| token_tensor(batch, NODE, column, device))
                .transpose()?,
            advantages: token_tensor(batch, NODE, &ADVANTAGES, device)?,
            behaviour_logprob: behaviour,
            ref_logprob: reference,
            layout,
        })
    }
}

/// What the critic loss reads from the batch.
#[derive(Clone, Debug)]
pub struct CriticBatch<B: Backend> {
    pub layout: PackedLayout<B>,
    /// Rollout-time values (`values`), the centre of value clipping.
    pub old_values: Tensor<B, 1>,
    pub returns: Tensor<B, 1>,
}

impl<B: Backend> CriticBatch<B> {
    pub fn from_batch(batch: &Batch, device: &B::Device) -> Result<Self, AlgoError> {
        const NODE: &str = "CriticStep";
        Ok(CriticBatch {
            layout: PackedLayout::from_batch(batch, NODE, false, device)?,
            old_values: token_tensor(batch, NODE, &VALUES, device)?,
            returns: token_tensor(batch, NODE, &RETURNS, device)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_batches::{f32s, with_masks};
    use crate::{DecoupledPpo, PpoClip};
    use burn::backend::Flex;
    use roll_flow_engine::batch::column::OLD_LOGPROB;

    #[test]
    fn reads_what_the_loss_needs() {
        let mut b = with_masks(&[&[0, 1], &[1]]);
        f32s(&mut b, &OLD_LOGPROB, &[-1.0, -2.0, -3.0]);
        f32s(&mut b, &ADVANTAGES, &[0.0, 1.0, -1.0]);
        let dev = Default::default();
        let ppo = PolicyLoss::PpoClip(PpoClip::default());
        let a = ActorBatch::<Flex>::from_batch(&b, &ppo, None, Some(&OLD_LOGPROB), &dev).unwrap();
        assert_eq!(
            a.old_logprob.unwrap().into_data().to_vec::<f32>().unwrap(),
            vec![-1.0, -2.0, -3.0]
        );
        let unread = ActorBatch::<Flex>::from_batch(&b, &ppo, None, None, &dev).unwrap();
        assert!(unread.old_logprob.is_none());
        let err = ActorBatch::<Flex>::from_batch(&b, &ppo, None, Some(&BEHAVIOUR_LOGPROB), &dev)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "ActorStep needs column `behaviour_logprob`"
        );
        assert_eq!(a.layout.sample_counts, vec![1, 1]);
        assert!(a.behaviour_logprob.is_none() && a.ref_logprob.is_none());
        let dec = PolicyLoss::DecoupledPpo(DecoupledPpo::default());
        let err =
            ActorBatch::<Flex>::from_batch(&b, &dec, None, Some(&OLD_LOGPROB), &dev).unwrap_err();
        assert!(err.to_string().contains("`behaviour_logprob`"), "{err}");
        let err = CriticBatch::<Flex>::from_batch(&b, &dev).unwrap_err();
        assert_eq!(err.to_string(), "CriticStep needs column `values`");
    }
}
