//! A model directory's config.json and model.safetensors (the input is the two files
//! joined by a 0 byte): loading gives an error, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use roll_flow::model::hf::model_dir::load_causal_lm;
use roll_flow::model::CpuBackend;

#[path = "scratch_dir.rs"]
mod scratch_dir;

fuzz_target!(|data: &[u8]| {
    let Some(split) = data.iter().position(|&b| b == 0) else {
        return;
    };
    let dir = scratch_dir::scratch_dir("model");
    std::fs::write(dir.join("config.json"), &data[..split]).expect("config.json written");
    std::fs::write(dir.join("model.safetensors"), &data[split + 1..]).expect("weights written");
    let _ = load_causal_lm::<CpuBackend>(&dir, &Default::default());
});
