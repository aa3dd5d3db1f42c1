//! The `roll-flow` command line. Everything it does lives in the library crates; this
//! binary parses arguments and prints.

mod allocator;
mod cli;

use std::process::ExitCode;

use clap::Parser;

#[global_allocator]
static ALLOCATOR: allocator::BinaryAllocator = allocator::BinaryAllocator::new();

fn main() -> ExitCode {
    if ALLOCATOR.uses_system() {
        roll_flow::kernels::cpu::keep_freed_buffers_for_reuse();
    }
    let args = cli::Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    match cli::dispatch(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
