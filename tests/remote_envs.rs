//! Envs served over the network (`env: Remote(url: ...)`, OpenEnv's session protocol),
//! through the binary: `roll-flow env-server --listen` in place of the native env gives
//! the same run; an unchanged OpenEnv server (openenv-core and uvicorn in the tests'
//! Python, which `./test.sh` installs; `common::python`) plays through `roll-flow play`; a server that is not there fails the run before any
//! step, naming its address.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{assert_ok, metrics, play_script, run, untimed};

const FILE: &str = "pipelines/frozen_lake_starpo.ron";
const LAKE: &str = "FrozenLake(size: 4, p: 0.8, slippery: false)";

/// A server process, killed when the test ends however it ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `roll-flow env-server LAKE --listen 127.0.0.1:0` and the URL it bound.
fn listening_env_server() -> (Server, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_roll-flow"))
        .args(["env-server", LAKE, "--listen", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    (Server(child), url)
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn the_listening_env_server_in_place_of_the_native_env_gives_the_same_run() {
    let (_server, url) = listening_env_server();
    let dir = tempfile::tempdir().unwrap();
    let (native, served) = (dir.path().join("native"), dir.path().join("served"));
    assert_ok(&run(FILE, &native, &["--steps", "4"]));
    let remote = format!("Remote(url: {url:?})");
    let out = run(
        FILE,
        &served,
        &[
            "--steps",
            "4",
            "--set",
            &format!("envs.train.env={remote}"),
            "--set",
            &format!("envs.val.env={remote}"),
        ],
    );
    assert_ok(&out);
    assert_eq!(untimed(&native), untimed(&served));
    assert_eq!(metrics(&served)[3]["rollout/env_errors"], 0.0);
}

#[test]
fn a_server_that_is_not_there_fails_the_run_before_any_step_naming_its_url() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{}", free_port());
    let out = run(
        FILE,
        &dir.path().join("run"),
        &[
            "--set",
            &format!("envs.train.env=Remote(url: {url:?}, timeout_s: 2.0)"),
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "env set `train`: env server `{url}` did not answer before the run"
        )) && stderr.contains("start it first"),
        "{stderr}"
    );
    assert!(!dir.path().join("run").exists(), "the run wrote files");
}

/// The OpenEnv fixture on a free port, once `/health` answers. A server that exits
/// first fails the test at once with its last stderr line.
fn openenv_server() -> (Server, String) {
    let python = common::python_with(&[("openenv.core", "openenv-core"), ("uvicorn", "uvicorn")]);
    let port = free_port();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/env_servers/openenv_guess.py"
    );
    // Its log goes to a file, not a pipe nobody reads (a full pipe would stall it).
    let log = tempfile::NamedTempFile::new().unwrap();
    let child = Command::new(&python)
        .args([script, &port.to_string()])
        .stdout(Stdio::null())
        .stderr(log.reopen().unwrap())
        .spawn()
        .unwrap();
    let mut server = Server(child);
    let started = Instant::now();
    loop {
        if let Some(status) = server.0.try_wait().unwrap() {
            let said = std::fs::read_to_string(log.path()).unwrap_or_default();
            panic!(
                "the OpenEnv server `{python} {script}` exited ({status}) before it answered: {}",
                said.lines().last().unwrap_or("no output")
            );
        }
        if let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) {
            let _ = write!(
                stream,
                "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            );
            let mut reply = String::new();
            let _ = std::io::Read::read_to_string(&mut stream, &mut reply);
            if reply.contains("healthy") {
                return (server, format!("http://127.0.0.1:{port}"));
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the OpenEnv server did not answer /health within 120 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn an_unchanged_openenv_server_plays_through_remote() {
    let (_server, url) = openenv_server();
    let spec = format!("Remote(url: {url:?}, observation_field: \"prompt\")");
    // Seed 13: the secret is 3; 5 is too high, 3 is right.
    let out = play_script(&spec, "13", "<answer>5</answer>\n<answer>3</answer>\n");
    assert_ok(&out);
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["obs"], "Guess a digit: <answer>D</answer>.");
    assert_eq!(
        (
            &lines[1]["obs"],
            &lines[1]["reward"],
            &lines[1]["terminated"]
        ),
        (&"Lower.".into(), &0.0.into(), &false.into())
    );
    assert_eq!(
        (
            &lines[2]["obs"],
            &lines[2]["reward"],
            &lines[2]["terminated"]
        ),
        (&"Right!".into(), &1.0.into(), &true.into())
    );

    // The default field is roll-flow's `obs`: the error lists what the observation has.
    let out = play_script(&format!("Remote(url: {url:?})"), "13", "x\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("has no `obs` field (it has: guesses_left, prompt)")
            && stderr.contains("observation_field"),
        "{stderr}"
    );
    // An action field the server's Action lacks: OpenEnv's validation error, passed on.
    let spec =
        format!("Remote(url: {url:?}, observation_field: \"prompt\", action_field: \"text\")");
    let out = play_script(&spec, "13", "<answer>3</answer>\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("VALIDATION_ERROR"), "{stderr}");
}

#[test]
fn validate_handshake_greets_every_server_and_names_the_entry_that_fails() {
    let (_server, url) = listening_env_server();
    let remote = format!("envs.train.env=Remote(url: {url:?})");
    let out = common::roll_flow(&["validate", FILE, "--handshake", "--set", &remote]);
    assert_ok(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("handshake ok: env set `train` serves FrozenLake"),
        "{stdout}"
    );
    let python = common::python();
    let broken = format!(
        "envs.val.env=Process(command: [{python:?}, \"-c\", \"import sys; \
         print('no such env', file=sys.stderr)\"])"
    );
    let out = common::roll_flow(&[
        "validate",
        FILE,
        "--handshake",
        "--set",
        &remote,
        "--set",
        &broken,
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("env set `val`: env server `{python} -c"))
            && stderr.contains("| no such env"),
        "{stderr}"
    );
    // Without the flag, nothing is started: the broken command is not run.
    assert_ok(&common::roll_flow(&[
        "validate", FILE, "--set", &remote, "--set", &broken,
    ]));
}
