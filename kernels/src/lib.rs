//! roll-flow's fused kernels (the kernels milestone fills this crate).
//!
//! It will hold the hot numeric paths as CubeCL kernels for the `wgpu` and `cuda` features
//! (fused token log-prob + entropy, the GAE reverse scan, the clipped PPO loss, each with
//! its backward pass), their fused multi-threaded CPU twins, and the burn backend extension
//! that routes tensors to them. The unfused burn formulations in `roll-flow-operators`
//! (`model::logprob`, `algo::gae`, `algo::ppo_loss`) are the oracles they are tested
//! against. Until then the crate only fixes the feature wiring (`wgpu`, `cuda`) so the
//! workspace builds the same way it will ship.
