//! `roll-flow import-roll`'s mapping of a worker's `model_args` to its model: `dtype` as
//! `precision:` (a bad one refused), `disable_gradient_checkpointing` as
//! `gradient_checkpointing:` (LoRA dropout or not).

mod import_roll_fixtures;

use roll_flow::engine::spec;
use roll_flow::operators::catalog::RollFlow;

use import_roll_fixtures::{fixtures_with, import_roll, stderr, DEMO};

#[test]
fn disable_gradient_checkpointing_decides_the_policys_checkpointing() {
    let dir = tempfile::tempdir().unwrap();
    let demo = std::fs::read_to_string(DEMO).unwrap();
    assert!(
        demo.contains("    lora_alpha: 32\n") && !demo.contains("disable_gradient_checkpointing")
    );
    let import_with = |name: &str, extra: &str| {
        let text = demo.replace(
            "    lora_alpha: 32\n",
            &format!("    lora_alpha: 32\n{extra}"),
        );
        let path = fixtures_with(dir.path(), &format!("agentic_demo/gc_{name}.yaml"), &text);
        let out = dir.path().join(format!("gc_{name}.ron"));
        let result = import_roll(&[path.to_str().unwrap(), "-o", out.to_str().unwrap()]);
        assert!(result.status.success(), "{name}: {}", stderr(&result));
        let p = spec::load::<RollFlow>(&out, &[])
            .unwrap_or_else(|d| panic!("{d:?}"))
            .pipeline;
        (
            p.models.get("policy").unwrap().gradient_checkpointing,
            stderr(&result),
        )
    };
    // ROLL's default (absent, or false) checkpoints its training workers.
    assert!(import_with("absent", "").0);
    assert!(import_with("false", "    disable_gradient_checkpointing: false\n").0);
    assert!(!import_with("true", "    disable_gradient_checkpointing: true\n").0);
    // LoRA dropout too (its masks are drawn again in the second run), with no notice.
    let (on, report) = import_with("dropout", "    lora_dropout: 0.05\n");
    assert!(on);
    assert!(
        !report.contains("disable_gradient_checkpointing"),
        "{report}"
    );
}

#[test]
fn model_args_dtype_becomes_the_models_precision_and_a_bad_one_is_refused() {
    use roll_flow::model::spec::Precision;
    let dir = tempfile::tempdir().unwrap();
    let demo = std::fs::read_to_string(DEMO).unwrap();
    let import_with = |dtype: Option<&str>| {
        let text = match dtype {
            Some(d) => demo.replace("    dtype: bf16\n", &format!("    dtype: {d}\n")),
            None => demo.replace("    dtype: bf16\n", ""),
        };
        let name = format!("agentic_demo/dtype_{}.yaml", dtype.unwrap_or("absent"));
        let path = fixtures_with(dir.path(), &name, &text);
        let out = dir
            .path()
            .join(format!("dtype_{}.ron", dtype.unwrap_or("absent")));
        (
            import_roll(&[path.to_str().unwrap(), "-o", out.to_str().unwrap()]),
            out,
        )
    };
    // ROLL's default (absent) is bf16, as the file's own value.
    for (dtype, want) in [
        (Some("bf16"), Precision::Bf16),
        (None, Precision::Bf16),
        (Some("fp16"), Precision::F16),
        (Some("fp32"), Precision::F32),
        (Some("null"), Precision::F32),
    ] {
        let (result, out) = import_with(dtype);
        assert!(result.status.success(), "{dtype:?}: {}", stderr(&result));
        let p = spec::load::<RollFlow>(&out, &[])
            .unwrap_or_else(|d| panic!("{d:?}"))
            .pipeline;
        assert_eq!(p.models.get("policy").unwrap().precision, want, "{dtype:?}");
    }
    for (dtype, notice) in [
        ("null", "not supported: actor_train.model_args.dtype: null"),
        ("fp16", "not supported: actor_train.model_args.dtype: fp16: written as `precision: F16`, without the loss scaling"),
    ] {
        let (result, _) = import_with(Some(dtype));
        assert!(stderr(&result).contains(notice), "{}", stderr(&result));
    }
    let (result, out) = import_with(Some("fp8"));
    assert!(!result.status.success() && !out.exists());
    let report = stderr(&result);
    assert!(
        report.contains("actor_train.model_args.dtype")
            && report.contains("`fp8` is not one of ROLL's dtypes")
            && report.contains("write fp32, bf16 or fp16"),
        "{report}"
    );
}
