//! The generic kernel suite (`suite/mod.rs`), once per backend: the CPU backend `Flex`
//! always, the CubeCL kernels on wgpu with `--features wgpu` (Mesa's lavapipe software
//! Vulkan is enough) and on CUDA with `--features cuda` (needs an NVIDIA GPU to run).

mod suite;

macro_rules! backend_suite {
    ($name:ident, $backend:ty, $device:expr) => {
        mod $name {
            use burn::backend::Autodiff;

            type B = $backend;
            type A = Autodiff<$backend>;

            fn device() -> <B as burn::tensor::backend::BackendTypes>::Device {
                $device
            }

            #[test]
            fn logprob_entropy_forward_matches_reference() {
                super::suite::logprob::logprob_forward::<B>(&device());
            }

            #[test]
            fn logprob_entropy_forward_under_autodiff() {
                super::suite::logprob::logprob_forward::<A>(&device());
            }

            #[test]
            fn logprob_entropy_gradient_matches_autodiff_reference() {
                super::suite::logprob::logprob_backward::<A>(&device());
            }

            #[test]
            fn logprob_entropy_reads_rows_that_lie_apart() {
                super::suite::logprob_row_stride::logprob_reads_rows_apart::<A>(&device());
            }

            #[test]
            fn logprob_entropy_with_minus_infinity_logits() {
                super::suite::logprob::logprob_masked_logits::<A>(&device());
            }

            #[test]
            fn gae_matches_reference_and_oracle() {
                super::suite::gae::gae_forward::<B>(&device());
            }

            #[test]
            fn ppo_loss_weights_stats_and_gradient_match_reference() {
                super::suite::ppo::ppo_forward_backward::<A>(&device());
            }

            #[test]
            fn ppo_backward_without_the_saved_gradient_is_the_same() {
                super::suite::ppo::ppo_backward_without_the_saved_gradient::<B>(&device());
            }

            #[test]
            fn swiglu_and_its_gradients_match_reference() {
                super::suite::swiglu::swiglu_forward_backward::<A>(&device());
            }

            #[test]
            fn swiglu_reads_the_halves_of_one_product() {
                super::suite::swiglu::swiglu_reads_the_halves_of_one_product::<B>(&device());
            }

            #[test]
            fn masked_softmax_and_its_gradient_match_reference() {
                super::suite::masked_softmax::masked_softmax_forward_backward::<A>(&device());
            }

            #[test]
            fn masked_softmax_reads_an_expanded_mask_in_place() {
                super::suite::masked_softmax::masked_softmax_with_an_expanded_mask::<A>(&device());
            }

            #[test]
            fn rms_norm_and_its_gradients_match_reference() {
                super::suite::rms_norm::rms_norm_forward_backward::<A>(&device());
            }

            #[test]
            fn add_rms_norm_is_the_add_then_the_norm() {
                super::suite::rms_norm::add_rms_norm_is_add_then_rms_norm::<B>(&device());
            }

            #[test]
            fn rotate_into_cache_matches_f64_and_the_unfused_ops() {
                super::suite::rotate_into_cache::rotate_into_cache_matches_f64_and_the_unfused_ops::<B>(&device());
            }

            #[test]
            fn column_sums_match_f64() {
                super::suite::column_sums::column_sums_match_f64::<B>(&device());
            }

            #[test]
            fn linear_and_its_gradients_match_reference() {
                super::suite::linear::linear_forward_backward::<A>(&device());
            }

            #[test]
            fn matmul_and_its_gradients_match_f64() {
                super::suite::matmul::matmul_forward_backward::<A>(&device());
            }

            #[test]
            fn decode_attention_matches_f64() {
                super::suite::decode_attention::decode_attention_matches_f64::<B>(&device());
            }

            #[test]
            fn rotary_and_its_gradient_match_reference() {
                super::suite::rotary::rotary_forward_backward::<A>(&device());
            }

            #[test]
            fn contiguous_keeps_values_and_gradients() {
                super::suite::contiguous::contiguous_forward_backward::<A>(&device());
            }

            #[test]
            fn row_sampling_matches_f64_oracle() {
                super::suite::row_sampling::row_sampling_matches_oracle::<B>(&device());
            }

            #[test]
            fn row_sampling_at_the_top_of_the_mass_takes_the_last_weighted_token() {
                super::suite::row_sampling::row_sampling_at_the_top_of_the_mass::<B>(&device());
            }

            #[test]
            fn block_write_matches_reference() {
                super::suite::block_write::block_write_matches_reference::<B>(&device());
            }

            #[test]
            fn square_sums_match_f64_in_one_read() {
                super::suite::square_sums::square_sums_match_f64_in_one_read::<B>(&device());
            }

            #[test]
            fn dropout_mask_is_the_hosts_bit_for_bit() {
                super::suite::dropout_mask::dropout_mask_is_the_hosts_bit_for_bit::<B>(&device());
            }

            #[test]
            fn dropout_dense_is_dense_of_dropout() {
                super::suite::dropout_mask::dropout_dense_is_dense_of_dropout::<B>(&device());
            }

            #[test]
            fn bad_input_is_refused() {
                super::suite::refuses_bad_input::<B>(&device());
            }
        }
    };
}

backend_suite!(flex, burn::backend::Flex, Default::default());

#[cfg(feature = "wgpu")]
backend_suite!(
    wgpu,
    burn::backend::wgpu::CubeBackend<burn::backend::wgpu::WgpuRuntime, f32, i32, u32>,
    burn::backend::wgpu::WgpuDevice::default()
);

/// The log-prob kernel on f16 logits (`suite/half_logprob.rs`; lavapipe has f16 shaders).
#[cfg(feature = "wgpu")]
#[test]
fn wgpu_f16_logprob_entropy_and_gradient_match_f64() {
    type H = burn::backend::wgpu::CubeBackend<
        burn::backend::wgpu::WgpuRuntime,
        burn::tensor::f16,
        i32,
        u32,
    >;
    suite::half_logprob::half_logprob_matches_f64::<burn::backend::Autodiff<H>>(
        &Default::default(),
        (10, -14),
    );
}

/// RMSNorm, masked softmax, SwiGLU and rotary on f16 (`suite/half_model_ops.rs`).
#[cfg(feature = "wgpu")]
#[test]
fn wgpu_f16_model_ops_match_f64() {
    type H = burn::backend::wgpu::CubeBackend<
        burn::backend::wgpu::WgpuRuntime,
        burn::tensor::f16,
        i32,
        u32,
    >;
    suite::half_model_ops::half_model_ops_match_f64::<burn::backend::Autodiff<H>>(
        &Default::default(),
        (10, -14),
    );
}

/// The same ops on bf16 on CUDA device 0.
#[cfg(feature = "cuda")]
#[test]
fn cuda_bf16_model_ops_match_f64() {
    type H = burn::backend::Cuda<burn::tensor::bf16>;
    suite::half_model_ops::half_model_ops_match_f64::<burn::backend::Autodiff<H>>(
        &burn::backend::cuda::CudaDevice::default(),
        (7, -126),
    );
}

/// The same on bf16 logits on CUDA device 0.
#[cfg(feature = "cuda")]
#[test]
fn cuda_bf16_logprob_entropy_and_gradient_match_f64() {
    type H = burn::backend::Cuda<burn::tensor::bf16>;
    suite::half_logprob::half_logprob_matches_f64::<burn::backend::Autodiff<H>>(
        &burn::backend::cuda::CudaDevice::default(),
        (7, -126),
    );
}

/// Half-precision products with each cubek routine against f64 (`suite/half_matmul.rs`):
/// f16 on wgpu, where lavapipe refuses the tensor-core routines and burn's runs them.
#[cfg(feature = "wgpu")]
#[test]
fn wgpu_f16_products_with_each_routine_match_f64() {
    type H = burn::backend::wgpu::CubeBackend<
        burn::backend::wgpu::WgpuRuntime,
        burn::tensor::f16,
        i32,
        u32,
    >;
    suite::half_matmul::half_products_match_f64::<H>(&Default::default(), (10, -14));
}

/// The same on bf16 on CUDA device 0, where the routines run.
#[cfg(feature = "cuda")]
#[test]
fn cuda_bf16_products_with_each_routine_match_f64() {
    type H = burn::backend::Cuda<burn::tensor::bf16>;
    suite::half_matmul::half_products_match_f64::<H>(
        &burn::backend::cuda::CudaDevice::default(),
        (7, -126),
    );
}

/// TF32 products only when the run allows them (`suite/matmul.rs`), on CUDA device 0.
#[cfg(feature = "cuda")]
#[test]
fn cuda_f32_products_use_tf32_only_when_allowed() {
    let device = burn::backend::cuda::CudaDevice::default();
    suite::matmul::tf32_only_when_allowed::<burn::backend::Cuda>(&device);
}

// Needs an NVIDIA GPU at run time (cudarc loads the driver); builds anywhere.
#[cfg(feature = "cuda")]
backend_suite!(
    cuda,
    burn::backend::Cuda,
    burn::backend::cuda::CudaDevice::default()
);
