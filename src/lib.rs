//! roll-flow as a library: run a pipeline from your own Rust program, with your own
//! environments. The `roll-flow` binary is a thin command line over this.
//!
//! ```no_run
//! use roll_flow::run::Run;
//! let summary = Run::from_file("pipelines/frozen_lake_starpo.ron".as_ref(), &[])?
//!     .stop_after(10)
//!     .execute()?;
//! println!("{} steps into {}", summary.steps_done, summary.out_dir.display());
//! # Ok::<(), roll_flow::run::RunError>(())
//! ```
//!
//! A custom env implements [`envs::env::Env`] and is registered with [`run::Run::env`];
//! `examples/custom_env/` trains on one. [`roll_import`] turns a ROLL
//! agentic config into a pipeline file. The crates, lowest layer first:
//! [`kernels`], [`engine`], [`envs`], [`model`], [`algo`], [`operators`] (see
//! `docs/ARCHITECTURE.md`).

pub use roll_flow_algo as algo;
pub use roll_flow_engine as engine;
pub use roll_flow_envs as envs;
pub use roll_flow_kernels as kernels;
pub use roll_flow_model as model;
pub use roll_flow_operators as operators;
pub use roll_flow_operators::run;

pub mod roll_import;
