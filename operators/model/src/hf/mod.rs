//! Hugging Face model directories: safetensors weights in and out, and whole-directory
//! loading (config, weights, tokenizer).

pub mod model_dir;
pub mod peft_adapter;
pub mod safetensors_errors;
pub mod safetensors_load;
pub mod safetensors_save;

pub use model_dir::{load_causal_lm, load_model_dir, read_config, save_causal_lm};
pub use peft_adapter::{read_peft_settings, save_peft_adapter};
pub use safetensors_load::SafetensorsSource;
pub use safetensors_save::save_model_dir;
