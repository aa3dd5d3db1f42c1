//! [`EnvError`]: what goes wrong building or playing an env, said so users know what to
//! change.

/// Errors of env construction and use. Messages are for users: they say what to change.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EnvError {
    /// A config parameter is out of range.
    #[error("{env}: invalid `{field}`: {reason}")]
    InvalidConfig {
        env: &'static str,
        field: &'static str,
        reason: String,
    },
    /// `step` was called before the first `reset`.
    #[error("{0}: step called before reset")]
    NotReset(&'static str),
    /// `step` was called after the episode ended.
    #[error("{0}: the episode is over (terminated or truncated); call reset")]
    EpisodeOver(&'static str),
    /// Level generation gave up (only with extreme parameters).
    #[error("{env}: could not generate a level: {reason}")]
    Generation { env: &'static str, reason: String },
    /// A custom env name that nobody registered.
    #[error("unknown custom env `{name}`; registered: {known}")]
    UnknownCustom { name: String, known: String },
    /// A custom env's parameters did not fit its config type.
    #[error("custom env `{name}`: {reason}")]
    CustomParams { name: String, reason: String },
    /// A data file the env reads is missing or malformed, or its index failed.
    #[error("{env}: {reason}")]
    Data { env: &'static str, reason: String },
    /// The env spec given on the command line or in a file did not parse.
    #[error("env spec: {0}")]
    Spec(String),
    /// Rendering or writing an image failed.
    #[error("render: {0}")]
    Render(String),
    /// An env server failed one call (crashed, hung, wrote a bad reply): the episode is
    /// lost and the server is restarted on the next call.
    #[error("env server `{command}`: {reason}")]
    ServerFault { command: String, reason: String },
    /// An env server failed `failures` calls in a row: the run stops.
    #[error(
        "env server `{command}` failed {failures} calls in a row (the env's \
         `max_failures`), so the run stops; the last: {reason}"
    )]
    ServerGaveUp {
        command: String,
        failures: usize,
        reason: String,
    },
    /// A network env server did not answer before the run started.
    #[error(
        "env server `{server}` did not answer before the run: {reason}; start it first, \
         or fix the entry's `url`"
    )]
    ServerUnreachable { server: String, reason: String },
}

impl EnvError {
    /// Whether this error loses one episode (its group is dropped and counted) rather than
    /// stopping the run.
    pub fn loses_only_the_episode(&self) -> bool {
        matches!(self, EnvError::ServerFault { .. })
    }
}
