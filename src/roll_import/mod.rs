//! `roll-flow import-roll`: a ROLL agentic config (YAML, composed by Hydra) as a roll-flow
//! pipeline file.
//!
//! The config is composed ([`hydra_compose`]: the `defaults:` list from the same folder,
//! `${...}` interpolations, the resolvers ROLL uses as stated constants), mapped key by key
//! ([`pipeline_mapping`], [`env_mapping`], [`gem_env`], [`webshop_env`],
//! [`prompt_templates`], [`training_mapping`], [`batch_mapping`], [`policy_loss`], [`precision_mapping`], [`checkpointing_mapping`]), and every key is accounted
//! for ([`config_reader`]): mapped, known but not used here ([`roll_keys`]: ignored on this
//! engine or not supported, each with why), or refused as unknown with its path.
//! docs/roll-import.md holds the three classes.

pub mod batch_mapping;
pub mod checkpointing_mapping;
pub mod config_reader;
pub mod env_mapping;
pub mod gem_env;
pub mod hydra_compose;
pub mod hydra_defaults;
pub mod import_error;
pub mod lora_mapping;
pub mod omegaconf_resolvers;
pub mod pipeline_mapping;
pub mod policy_loss;
pub mod precision_mapping;
pub mod prompt_templates;
pub mod roll_keys;
pub mod rollout_only_mapping;
pub mod training_mapping;
pub mod unsupported_envs;
pub mod webshop_env;
pub mod yaml_value;

use std::path::Path;

use config_reader::{ConfigReader, Notice};
use import_error::ImportError;
use roll_keys::NoticeKind;

/// How strictly to import.
#[derive(Clone, Copy, Debug, Default)]
pub struct ImportOptions {
    /// Refuse the config when it has keys ROLL reads that the pipeline would not use.
    pub strict: bool,
}

/// An imported pipeline: its RON text and what it does not carry over.
#[derive(Clone, Debug)]
pub struct Imported {
    /// The pipeline file, a header comment first.
    pub ron: String,
    /// The keys not used (not supported, ignored, not read by ROLL either), the resolvers
    /// replaced by constants and the warnings, sorted in that order.
    pub notices: Vec<Notice>,
}

/// The header's heading for each kind of notice.
fn heading(kind: NoticeKind) -> &'static str {
    match kind {
        NoticeKind::NotSupported => {
            "Not supported (ROLL reads these; here the run differs from ROLL's):"
        }
        NoticeKind::Ignored => "Ignored on this engine (ROLL reads these for its own machinery):",
        NoticeKind::Unread => "Not read by ROLL either:",
        NoticeKind::Resolver => "Resolvers, replaced by stated constants:",
        NoticeKind::Warning => "Warnings:",
    }
}

/// Imports the ROLL config at `path`.
pub fn import_roll(path: &Path, options: ImportOptions) -> Result<Imported, ImportError> {
    let composed = hydra_compose::compose(path)?;
    let mut reader = ConfigReader::new(path, composed);
    let mapped = if rollout_only_mapping::is_rollout_only(&reader) {
        rollout_only_mapping::map_rollout_only(&mut reader)?
    } else {
        pipeline_mapping::map_pipeline(&mut reader)?
    };
    let notices = reader.finish()?;
    if options.strict {
        let keys: Vec<(String, String)> = notices
            .iter()
            .filter(|n| n.kind.known_unused())
            .map(|n| (n.key.clone(), n.message.clone()))
            .collect();
        if !keys.is_empty() {
            return Err(ImportError::KnownUnused {
                file: path.to_path_buf(),
                keys,
            });
        }
    }
    let mut ron = format!(
        "// Imported from the ROLL config {} by `roll-flow import-roll`.\n",
        path.display()
    );
    let mut last = None;
    for notice in &notices {
        if last != Some(notice.kind) {
            ron.push_str(&format!("// {}\n", heading(notice.kind)));
            last = Some(notice.kind);
        }
        ron.push_str(&format!(
            "//   {}: {}\n",
            notice.key,
            one_line(&notice.message)
        ));
    }
    ron.push_str(&mapped.body);
    Ok(Imported { ron, notices })
}

/// A message as one comment line.
fn one_line(message: &str) -> String {
    message.replace('\n', "\\n")
}
