//! Envs served over the env-server protocol, through the binary: `roll-flow env-server`
//! in place of the native env gives the same run; a server that crashes, hangs or writes
//! bad replies loses its groups and the run goes on, counting them; one that keeps failing
//! stops the run with a clear error; no server outlives the run.

mod common;

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{assert_ok, metrics, run, untimed};

const FILE: &str = "pipelines/frozen_lake_starpo.ron";
const LAKE: &str = "FrozenLake(size: 4, p: 0.8, slippery: false)";

fn ron_list(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| format!("{i:?}")).collect();
    format!("[{}]", quoted.join(", "))
}

/// How the faulty server misbehaves: once, on one instance's first turn, or on every
/// request from a process's `at`-th reset on.
#[derive(Clone, Copy)]
enum When {
    Once { instance: u64 },
    Every { at: usize },
}

/// The faulty server's command; `state` is its once-file, `marker` finds its processes.
fn faulty(fault: &str, when: When, state: &Path, marker: &str) -> String {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/env_servers/faulty.py"
    );
    let state = state.display().to_string();
    let python = common::python_with(&[]);
    let mut command = vec![python.as_str(), script, "--fault", fault, "--state", &state];
    let number;
    match when {
        When::Once { instance } => {
            number = instance.to_string();
            command.extend(["--instance", &number]);
        }
        When::Every { at } => {
            number = at.to_string();
            command.extend(["--every", "--at", &number]);
        }
    }
    command.extend(["--marker", marker]);
    ron_list(&command)
}

/// Processes whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(marker) {
            found.push(pid);
        }
    }
    found
}

#[test]
fn the_env_server_in_place_of_the_native_env_gives_the_same_run() {
    let dir = tempfile::tempdir().unwrap();
    let (native, served) = (dir.path().join("native"), dir.path().join("served"));
    assert_ok(&run(FILE, &native, &["--steps", "4"]));
    let server = ron_list(&[env!("CARGO_BIN_EXE_roll-flow"), "env-server", LAKE]);
    let process = format!("Process(command: {server})");
    let out = run(
        FILE,
        &served,
        &[
            "--steps",
            "4",
            "--set",
            &format!("envs.train.env={process}"),
            "--set",
            &format!("envs.val.env={process}"),
        ],
    );
    assert_ok(&out);
    assert_eq!(untimed(&native), untimed(&served));
    assert_eq!(metrics(&served)[0]["rollout/env_errors"], 0.0);
}

/// Runs the tiny pipeline (2 groups of 2) for 3 steps with the faulty server as `train`
/// and more Process `settings`; returns the output.
fn run_faulty(dir: &Path, fault: &str, when: When, settings: &str) -> std::process::Output {
    let marker = format!("marker-{fault}-{}", std::process::id());
    let state = dir.join("fault-state");
    let command = faulty(fault, when, &state, &marker);
    let process = format!("Process(command: {command}, timeout_s: 2.0, {settings})");
    let out = run(
        FILE,
        &dir.join("run"),
        &[
            "--steps",
            "3",
            "--set",
            &format!("envs.train.env={process}"),
        ],
    );
    assert_gone(&marker, "a server outlived the run");
    out
}

#[test]
fn every_fault_loses_its_group_and_the_run_goes_on() {
    let faults = [
        "crash",
        "exit",
        "hang",
        "malformed",
        "non_utf8",
        "huge",
        "missing",
        "string_reward",
        "nan_reward",
        "inf_reward",
        "error",
        "wrong_id",
    ];
    for fault in faults {
        let tmp = tempfile::tempdir().unwrap();
        // One process per env (the run's pre-flight env holds instance 0, the manager's
        // probe env 1; the step's four envs are 2 to 5, on processes 2, 3, 0, 1), so a
        // fault that kills a process loses only instance 2's episode.
        let out = run_faulty(
            tmp.path(),
            fault,
            When::Once { instance: 2 },
            "processes: 4",
        );
        assert_ok(&out);
        let dir = tmp.path().join("run");
        let records = metrics(&dir);
        assert_eq!(records.len(), 3, "{fault}: every step is recorded");
        let errors: f64 = records
            .iter()
            .map(|r| r["rollout/env_errors"].as_f64().unwrap())
            .sum();
        let dropped: f64 = records
            .iter()
            .map(|r| r["rollout/dropped_groups"].as_f64().unwrap())
            .sum();
        assert_eq!(
            (errors, dropped),
            (1.0, 1.0),
            "{fault}: one episode and its group lost"
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("lost to env faults"), "{fault}: {stderr}");
        if fault == "wrong_id" {
            // Named at once, not waited out as a missing reply.
            assert!(
                stderr.contains("replied with `id` 0, which no request is waiting for")
                    && !stderr.contains("no reply within"),
                "{stderr}"
            );
        }
        for step in 1..=3 {
            assert!(
                dir.join(format!("checkpoints/step_{step}")).is_dir(),
                "{fault}: checkpoint {step}"
            );
        }
    }
}

#[test]
fn a_server_that_keeps_failing_stops_the_run_with_its_stderr() {
    let tmp = tempfile::tempdir().unwrap();
    // One process per env, each resetting once a step: the first step's calls succeed,
    // then every call fails, and the second failed call in a row (two processes crashed)
    // stops the run.
    let out = run_faulty(
        tmp.path(),
        "crash",
        When::Every { at: 2 },
        "processes: 4, max_failures: 2",
    );
    let dir = tmp.path().join("run");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for expected in [
        "env `train`",
        "faulty.py",
        "calls in a row (the env's `max_failures`)",
        "reset of instance",
        "committing fault `crash`",
    ] {
        assert!(
            stderr.contains(expected),
            "missing {expected:?} in:\n{stderr}"
        );
    }
    let records = metrics(&dir);
    assert!(
        !records.is_empty(),
        "the steps before the failure are recorded"
    );
    let last = records.len();
    assert!(dir.join(format!("checkpoints/step_{last}")).is_dir());
}

#[test]
fn a_killed_or_interrupted_run_takes_its_servers_with_it() {
    // SIGINT to roll-flow alone is Ctrl-C's hard case: a terminal also signals the servers.
    for signal in ["-KILL", "-INT"] {
        let dir = tempfile::tempdir().unwrap();
        let marker = format!("marker-kill{signal}-{}", std::process::id());
        let state = dir.path().join("fault-state");
        let command = faulty("hang", When::Every { at: 1 }, &state, &marker);
        let mut roll_flow = Command::new(env!("CARGO_BIN_EXE_roll-flow"));
        roll_flow
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["run", FILE, "--steps", "2", "--out"])
            .arg(dir.path().join("run"))
            .args(common::tiny(FILE))
            .args([
                "--set",
                &format!("envs.train.env=Process(command: {command}, timeout_s: 600.0)"),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // Ctrl-C's default action, whatever this test inherited: a shell's background job
        // (`cargo test &`) ignores SIGINT, and its children would too, the run never ending.
        // SAFETY: between fork and exec only signal(2), async-signal-safe, is called.
        unsafe {
            roll_flow.pre_exec(|| {
                libc::signal(libc::SIGINT, libc::SIG_DFL);
                Ok(())
            });
        }
        let mut child = roll_flow.spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while processes_with(&marker).is_empty() {
            assert!(Instant::now() < deadline, "the server never started");
            std::thread::sleep(Duration::from_millis(50));
        }
        // The server hangs on its first reset: the run waits on it when signalled.
        std::thread::sleep(Duration::from_millis(500));
        let sent = Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        child.wait().unwrap();
        assert_gone(
            &marker,
            &format!("a server outlived kill {signal} of roll-flow"),
        );
    }
}

/// Waits up to 5 s (the kernel's kill is not instant) for the marked processes to end.
fn assert_gone(marker: &str, message: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !processes_with(marker).is_empty() {
        assert!(
            Instant::now() < deadline,
            "{message}: {:?}",
            processes_with(marker)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
