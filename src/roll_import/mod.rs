//! `roll-flow import-roll`: a ROLL agentic config (YAML, composed by Hydra) as a roll-flow
//! pipeline file.
//!
//! The config is composed ([`hydra_compose`]: the `defaults:` list from the same folder,
//! `${...}` interpolations), mapped key by key ([`pipeline_mapping`], [`env_mapping`],
//! [`training_mapping`]), and every key is accounted for ([`config_reader`]): mapped,
//! ignored on this engine or not supported ([`roll_keys`]), or refused as unknown with its
//! path. docs/roll-import.md holds the mapping table.

pub mod config_reader;
pub mod env_mapping;
pub mod hydra_compose;
pub mod import_error;
pub mod pipeline_mapping;
pub mod roll_keys;
pub mod training_mapping;
pub mod yaml_value;

use std::path::Path;

use config_reader::{ConfigReader, Notice};
use import_error::ImportError;
use roll_keys::NoticeKind;

/// An imported pipeline: its RON text and what it does not carry over.
#[derive(Clone, Debug)]
pub struct Imported {
    /// The pipeline file, a header comment first.
    pub ron: String,
    /// The keys not supported or ignored, sorted (not supported first).
    pub notices: Vec<Notice>,
}

/// Imports the ROLL config at `path`.
pub fn import_roll(path: &Path) -> Result<Imported, ImportError> {
    let composed = hydra_compose::compose(path)?;
    let mut reader = ConfigReader::new(path, composed);
    let mapped = pipeline_mapping::map_pipeline(&mut reader)?;
    let notices = reader.finish()?;
    let mut ron = format!(
        "// Imported from the ROLL config {} by `roll-flow import-roll`.\n",
        path.display()
    );
    let unsupported: Vec<&Notice> = notices
        .iter()
        .filter(|n| n.kind == NoticeKind::NotSupported)
        .collect();
    if !unsupported.is_empty() {
        ron.push_str("// Not supported (here the run differs from ROLL's):\n");
        for notice in unsupported {
            ron.push_str(&format!("//   {}: {}\n", notice.key, notice.message));
        }
    }
    let ignored = notices.len()
        - notices
            .iter()
            .filter(|n| n.kind == NoticeKind::NotSupported)
            .count();
    if ignored > 0 {
        ron.push_str(&format!(
            "// Ignored on this engine: {ignored} key group(s) of ROLL's machinery (placement, strategies, logging); the import lists them.\n"
        ));
    }
    ron.push_str(&mapped.body);
    Ok(Imported { ron, notices })
}
