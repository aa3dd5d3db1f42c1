//! [`RemoteEnvConfig`]: the `Remote(...)` settings of an `envs:` entry, their checks, and
//! the server's addresses derived from `url`.

use serde::Deserialize;

use crate::error::EnvError;

/// The `Remote(...)` settings of an `envs:` entry.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RemoteEnvConfig {
    /// The server's base address, `http://HOST:PORT` (an OpenEnv server, or `roll-flow
    /// env-server --listen`); episodes run over its WebSocket at `/ws`.
    pub url: String,
    /// The action field the model's reply text goes in: `{"message": "<reply>"}` by
    /// default, OpenEnv's text envs' (echo, TextArena).
    pub action_field: String,
    /// The observation field the model reads (a string, or any JSON value, shown as
    /// compact JSON). Default `obs`, what `roll-flow env-server` sends; an empty name
    /// shows the whole observation as compact JSON.
    pub observation_field: String,
    /// Seconds to wait for one reply before the episode is lost and its session
    /// reconnected. Default 60.
    pub timeout_s: f64,
    /// Failed calls in a row after which the run stops. Default 3.
    pub max_failures: usize,
    /// The largest reply accepted, in bytes. Default 16 MiB.
    pub max_message_bytes: usize,
}

impl Default for RemoteEnvConfig {
    fn default() -> Self {
        RemoteEnvConfig {
            url: String::new(),
            action_field: "message".into(),
            observation_field: "obs".into(),
            timeout_s: 60.0,
            max_failures: 3,
            max_message_bytes: 16 << 20,
        }
    }
}

/// Where a `Remote` server answers: host:port, HTTP base and WebSocket address.
#[derive(Clone, Debug, PartialEq)]
pub struct Endpoint {
    /// `HOST:PORT`, for connecting.
    pub authority: String,
    /// `http://HOST:PORT/PREFIX`, for `/metadata`.
    pub http: String,
    /// `ws://HOST:PORT/PREFIX/ws`, for sessions.
    pub ws: String,
}

fn invalid(field: &'static str, reason: impl Into<String>) -> EnvError {
    EnvError::InvalidConfig {
        env: "Remote",
        field,
        reason: reason.into(),
    }
}

impl RemoteEnvConfig {
    /// Checks the settings without connecting.
    pub fn validate(&self) -> Result<(), EnvError> {
        self.endpoint()?;
        if self.action_field.trim().is_empty() {
            return Err(invalid(
                "action_field",
                "name the action field the reply goes in, e.g. `action_field: \"message\"`",
            ));
        }
        if !(self.timeout_s.is_finite() && self.timeout_s > 0.0) {
            return Err(invalid("timeout_s", "must be a positive number of seconds"));
        }
        if self.max_failures == 0 {
            return Err(invalid("max_failures", "must be ≥ 1"));
        }
        if self.max_message_bytes < 1024 {
            return Err(invalid("max_message_bytes", "must be ≥ 1024"));
        }
        Ok(())
    }

    /// The server's addresses: `http://` and `ws://` URLs are accepted, with or without
    /// the trailing `/ws`.
    pub fn endpoint(&self) -> Result<Endpoint, EnvError> {
        let url = self.url.trim();
        let (scheme, rest) = url.split_once("://").ok_or_else(|| {
            invalid(
                "url",
                format!("`{url}` is not a URL; write the server's address as `http://HOST:PORT`"),
            )
        })?;
        match scheme {
            "http" | "ws" => {}
            "https" | "wss" => {
                return Err(invalid(
                    "url",
                    "TLS is not built in: reach the server through a tunnel (`ssh -N -L \
                     8000:localhost:8000 HOST`) and use `http://localhost:8000`",
                ))
            }
            other => {
                return Err(invalid(
                    "url",
                    format!("unknown scheme `{other}`; use `http://HOST:PORT`"),
                ))
            }
        }
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let has_port = authority
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if !has_port {
            return Err(invalid(
                "url",
                format!("`{url}` needs a host and port, as in `http://127.0.0.1:8000`"),
            ));
        }
        let path = path.trim_end_matches('/');
        let prefix = path
            .strip_suffix("ws")
            .unwrap_or(path)
            .trim_end_matches('/');
        let prefix = match prefix {
            "" => String::new(),
            p => format!("/{p}"),
        };
        Ok(Endpoint {
            authority: authority.to_string(),
            http: format!("http://{authority}{prefix}"),
            ws: format!("ws://{authority}{prefix}/ws"),
        })
    }

    pub(crate) fn fault(&self, reason: String) -> EnvError {
        EnvError::ServerFault {
            command: self.url.clone(),
            reason,
        }
    }

    pub(crate) fn gave_up(&self, failures: usize, reason: String) -> EnvError {
        EnvError::ServerGaveUp {
            command: self.url.clone(),
            failures,
            reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(url: &str) -> Result<Endpoint, String> {
        let config = RemoteEnvConfig {
            url: url.into(),
            ..RemoteEnvConfig::default()
        };
        config.endpoint().map_err(|e| e.to_string())
    }

    #[test]
    fn http_and_ws_urls_give_the_same_endpoint() {
        let expected = Endpoint {
            authority: "10.0.0.2:8000".into(),
            http: "http://10.0.0.2:8000".into(),
            ws: "ws://10.0.0.2:8000/ws".into(),
        };
        for url in [
            "http://10.0.0.2:8000",
            "http://10.0.0.2:8000/",
            "ws://10.0.0.2:8000/ws",
        ] {
            assert_eq!(endpoint(url).unwrap(), expected, "{url}");
        }
        let behind_a_proxy = endpoint("http://gpu7:80/envs/sokoban/").unwrap();
        assert_eq!(behind_a_proxy.http, "http://gpu7:80/envs/sokoban");
        assert_eq!(behind_a_proxy.ws, "ws://gpu7:80/envs/sokoban/ws");
    }

    #[test]
    fn bad_urls_say_what_to_write() {
        assert!(endpoint("localhost:8000")
            .unwrap_err()
            .contains("http://HOST:PORT"));
        assert!(endpoint("http://localhost")
            .unwrap_err()
            .contains("host and port"));
        assert!(endpoint("https://a:1").unwrap_err().contains("ssh -N -L"));
        assert!(endpoint("ftp://a:1")
            .unwrap_err()
            .contains("unknown scheme `ftp`"));
    }
}
