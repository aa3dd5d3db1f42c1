//! `trained.safetensors` against the model it came from: a LoRA model's adapters (values
//! and parameter ids) come back bit for bit into a freshly built model, the frozen base is
//! untouched, and a file that does not fit (another rank, another base) is refused by name
//! with the model left as it was.

use std::path::Path;

use burn::module::{AutodiffModule, Module};

use super::*;
use crate::runtime::backend::TrainBackend;
use crate::runtime::trainable::lora_tests::params;
use roll_flow_model::lora::attach_lora;
use roll_flow_model::lora_spec::{LoraSpec, TARGET_NAMES};
use roll_flow_model::CpuBackend;

type Model = roll_flow_model::Qwen2CausalLm<TrainBackend<CpuBackend>>;

fn lora(rank: usize) -> LoraSpec {
    LoraSpec {
        rank,
        alpha: 4.0,
        targets: TARGET_NAMES.iter().map(|t| t.to_string()).collect(),
        dropout: 0.0,
    }
}

/// The small test model with adapters drawn from `seed`.
fn with_adapters(rank: usize, seed: u64) -> Model {
    attach_lora(
        crate::runtime::concurrent::tests::model(),
        &lora(rank),
        seed,
    )
}

#[test]
fn adapters_and_their_ids_come_back_into_a_fresh_model() {
    let trained = with_adapters(2, 5);
    let bytes = encode_trained(&trained).unwrap();
    let fresh = with_adapters(2, 6);
    assert_ne!(
        params(&fresh),
        params(&trained),
        "other adapters, other ids"
    );
    let restored = decode_trained(fresh.clone(), &bytes, Path::new("t.safetensors")).unwrap();
    // Every parameter: the adapters (ids too) as trained, the base as built.
    let (restored, trained_all) = (params(&restored), params(&trained));
    let base = params(&fresh);
    let mut adapters = 0;
    for (i, (id, values)) in restored.iter().enumerate() {
        if base[i].0 == *id {
            assert_eq!(values, &base[i].1, "frozen tensor {i}");
        } else {
            assert_eq!((id, values), (&trained_all[i].0, &trained_all[i].1));
            adapters += 1;
        }
    }
    // One decoder layer, 7 targets, A and B each; they still train, the base does not.
    assert_eq!(adapters, 14);
    let restored = decode_trained(fresh, &bytes, Path::new("t")).unwrap();
    assert!(has_frozen(&restored));
    let mut trained_count = 0;
    for_each_param(&restored, Params::Trained, |_, _, _| trained_count += 1);
    assert_eq!(trained_count, 14);
    // 14 tensors of rank 2 against 16 or 40 features, as F32, plus the header.
    assert!(
        bytes.len() < 14 * 2 * 40 * 4 + 4096,
        "{} bytes",
        bytes.len()
    );
}

#[test]
fn a_file_of_another_rank_or_base_is_refused_by_name() {
    let bytes = encode_trained(&with_adapters(2, 5)).unwrap();
    let path = Path::new("run/trained.safetensors");
    let Err(err) = decode_trained(with_adapters(4, 5), &bytes, path) else {
        panic!("rank 4 took rank-2 adapters");
    };
    assert!(
        err.starts_with("run/trained.safetensors: trained tensor 0 is F32 [16, 2]")
            && err.ends_with("use the `lora:` the run was started with"),
        "{err}"
    );
    let fewer = LoraSpec {
        targets: vec!["q_proj".into()],
        ..lora(2)
    };
    let model = attach_lora(crate::runtime::concurrent::tests::model(), &fewer, 5);
    let Err(err) = decode_trained(model, &bytes, path) else {
        panic!("one target took seven");
    };
    assert!(
        err.contains("holds 14 trained tensors, the model has 2"),
        "{err}"
    );
    // The same adapters on a base of other weights (another seed draws it).
    let other_base = crate::runtime::concurrent::tests::model().map(&mut Scale(2.0));
    let other = attach_lora(other_base, &lora(2), 5);
    let Err(err) = decode_trained(other, &bytes, path) else {
        panic!("another base was accepted");
    };
    assert!(
        err.contains("the frozen weights differ from those the run trained on"),
        "{err}"
    );
}

#[test]
fn a_damaged_file_is_refused_with_the_fix() {
    let bytes = encode_trained(&with_adapters(2, 5)).unwrap();
    let file = SafeTensors::deserialize(&bytes).unwrap();
    let (_, header) = SafeTensors::read_metadata(&bytes).unwrap();
    let mut metadata = header.metadata().clone().unwrap();
    let first = metadata[IDS_KEY].split(',').next().unwrap().to_string();
    metadata.insert(IDS_KEY.into(), vec![first; file.len()].join(","));
    let damaged = safetensors::serialize(file.tensors(), Some(metadata)).unwrap();
    let Err(err) = decode_trained(with_adapters(2, 5), &damaged, Path::new("t")) else {
        panic!("14 tensors under one id were accepted");
    };
    let fix = "the file is damaged: move this checkpoint's folder out of checkpoints/ to use \
               the one before it";
    assert_eq!(
        err,
        format!("t: `param_ids` lists 14 ids (1 distinct) for 14 tensors; {fix}")
    );
    for cut in [0, 7, bytes.len() / 2] {
        let Err(err) = decode_trained(with_adapters(2, 5), &bytes[..cut], Path::new("t")) else {
            panic!("a file cut at byte {cut} was accepted");
        };
        assert!(
            err.starts_with("t: not a readable safetensors file (") && err.ends_with(fix),
            "{err}"
        );
    }
}

/// Multiplies every float parameter by a constant.
struct Scale(f32);

impl<B: Backend> ModuleMapper<B> for Scale {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        let factor = self.0;
        param.map(|t| t.mul_scalar(factor))
    }
}

#[test]
fn the_fingerprint_of_all_parameters_sees_every_bit() {
    let model = with_adapters(2, 5);
    let all = fingerprint(&model, Params::All);
    assert_eq!(all, fingerprint(&model.clone(), Params::All));
    assert_ne!(all, fingerprint(&with_adapters(2, 6), Params::All));
    assert_eq!(
        fingerprint(&model, Params::Frozen),
        fingerprint(&with_adapters(2, 6), Params::Frozen)
    );
}

#[test]
fn a_saved_lora_policy_merges_as_the_trained_one() {
    let spec: roll_flow_model::spec::ModelSpec = roll_flow_engine::spec::ron_options()
        .from_str(
            r#"(arch: Tiny(layers: 2, dim: 32, heads: 4), optim: AdamW(lr: 1e-2),
            lora: (rank: 2, alpha: 4, targets: ["q_proj", "v_proj", "down_proj"]))"#,
        )
        .unwrap();
    let device = Default::default();
    let build = || {
        let built = roll_flow_model::build::build_causal_lm::<TrainBackend<CpuBackend>>(
            &spec,
            Path::new("."),
            7,
            &device,
        );
        built.unwrap().0
    };
    let mut train = crate::runtime::trainable::Trainable::<Model, CpuBackend>::new(
        build(),
        spec.optim.clone(),
        4,
    )
    .unwrap();
    // One step on the sum of the logits of a short sequence: every B leaves zero.
    let tokens = Tensor::<TrainBackend<CpuBackend>, 2, burn::tensor::Int>::from_data(
        TensorData::new(vec![3i64, 17, 5, 40], [1, 4]),
        &device,
    );
    let layout = roll_flow_model::qwen2::AttentionLayout::right_padded(1, 4);
    let loss = train.module().forward(tokens.clone(), &layout, None).sum();
    let grads = burn::optim::GradientsParams::from_grads(loss.backward(), train.module());
    train.accumulate(grads);
    assert!(!train.apply(0).unwrap().skipped);
    let dir = tempfile::tempdir().unwrap();
    train.save(dir.path()).unwrap();
    let peft = dir.path().join(crate::run_layout::PEFT_DIR);
    roll_flow_model::hf::save_peft_adapter(train.module(), &peft, "Tiny").unwrap();
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(names.contains(&TRAINED_FILE.to_string()), "{names:?}");
    assert!(!names.contains(&crate::run_layout::MODEL_FILE.to_string()));

    let merged = crate::runtime::models::merged_policy(&spec, 7, true, dir.path()).unwrap();
    let expected = roll_flow_model::lora::merge_lora(&train.module().valid());
    let values = |m: &roll_flow_model::Qwen2CausalLm<CpuBackend>| {
        let mut all = Vec::new();
        for_each_param(m, Params::All, |_, shape, data| {
            all.push((shape, data.to_vec::<f32>().unwrap()))
        });
        all
    };
    assert_eq!(values(&merged), values(&expected));
    // And into a run's Trainable: the adapters, their optimizer state and ids come back.
    let mut resumed = crate::runtime::trainable::Trainable::<Model, CpuBackend>::new(
        build(),
        spec.optim.clone(),
        4,
    )
    .unwrap();
    resumed.load(dir.path(), &device).unwrap();
    assert_eq!(resumed.fingerprint(), train.fingerprint());
    let adapters = |m: &Model| {
        let mut all = Vec::new();
        for_each_param(m, Params::Trained, |id, _, data| {
            all.push((id, data.to_vec::<f32>().unwrap()))
        });
        all
    };
    assert_eq!(adapters(resumed.module()), adapters(train.module()));
    // A second step from each: equal only if the AdamW moments came back under the ids.
    for t in [&mut train, &mut resumed] {
        let logits = t.module().forward(tokens.clone(), &layout, None);
        let grads = burn::optim::GradientsParams::from_grads(logits.sum().backward(), t.module());
        t.accumulate(grads);
        assert!(!t.apply(1).unwrap().skipped);
    }
    assert_eq!(adapters(resumed.module()), adapters(train.module()));
}
