//! The CLI's subcommands; each file maps its arguments onto library calls.

pub mod generate;
