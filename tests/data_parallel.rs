//! Data-parallel training through the binary: two worker threads (`-w 2`) and two
//! processes on loopback (`-n 2`) train the shipped FrozenLake StarPO and PPO pipelines
//! (shrunk) to the weights and metrics of one worker with the same global batch, and so do
//! micro-batches cut by a token budget; the same
//! seed gives the same files; a killed or hung process stops the other, named, and so does
//! one that never starts; a resumed two-process run ends as an uninterrupted one.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{assert_ok, metrics, roll_flow, run, untimed};
use serde_json::Value;

const STARPO: &str = "pipelines/frozen_lake_starpo.ron";
const PPO: &str = "pipelines/frozen_lake_ppo.ron";

/// Four groups of two (two per worker) and micro-batches of two samples, so each worker
/// computes gradients of its own micro-batches in every mini-batch.
fn shared(file: &str, steps: &'static str) -> Vec<&'static str> {
    let mut args = vec![
        "--steps",
        steps,
        "--set",
        "envs.train.groups=4",
        "--set",
        "nodes.actor_step.micro_batch=2",
    ];
    if file == PPO {
        args.extend(["--set", "nodes.critic_step.micro_batch=2"]);
    }
    args
}

/// Every f32 tensor of a safetensors file, by name.
fn tensors(path: &Path) -> Vec<(String, Vec<f32>)> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Map<String, Value> = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let data = &bytes[8 + n..];
    let mut out: Vec<(String, Vec<f32>)> = header
        .iter()
        .filter(|(name, _)| *name != "__metadata__")
        .map(|(name, info)| {
            let range = &info["data_offsets"];
            let (a, b) = (
                range[0].as_u64().unwrap() as usize,
                range[1].as_u64().unwrap() as usize,
            );
            let values = data[a..b]
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            (name.clone(), values)
        })
        .collect();
    out.sort_by(|x, y| x.0.cmp(&y.0));
    out
}

/// The models a run's last checkpoint holds, as exported for HF.
fn final_weights(dir: &Path, step: u64) -> Vec<(String, Vec<f32>)> {
    let step_dir = dir.join(format!("checkpoints/step_{step}"));
    let mut all = tensors(&step_dir.join("models/policy/hf/model.safetensors"));
    let critic = step_dir.join("critics/critic/hf/model.safetensors");
    if critic.exists() {
        all.extend(
            tensors(&critic)
                .into_iter()
                .map(|(n, v)| (format!("critic.{n}"), v)),
        );
    }
    all
}

/// The weights within relative 1e-5 (‖a − b‖ / ‖a‖ over all of them): the gradients are
/// summed in another order, nothing else differs.
fn assert_close_weights(a: &Path, b: &Path, step: u64) {
    let (wa, wb) = (final_weights(a, step), final_weights(b, step));
    assert_eq!(wa.len(), wb.len());
    let (mut diff, mut norm) = (0.0, 0.0);
    for ((name, x), (other, y)) in wa.iter().zip(&wb) {
        assert_eq!(name, other);
        diff += x
            .iter()
            .zip(y)
            .map(|(p, q)| f64::from(p - q).powi(2))
            .sum::<f64>();
        norm += x.iter().map(|p| f64::from(*p).powi(2)).sum::<f64>();
    }
    let relative = (diff / norm).sqrt();
    assert!(relative < 1e-5, "relative difference {relative:e}");
}

/// The same records apart from timing, numbers equal up to f32 rounding (relative 1e-5,
/// absolute 1e-6 for values near 0 such as a KL of 2e-8).
fn assert_same_metrics(a: &Path, b: &Path) {
    // Only a run of several workers reports the bytes they sent each other.
    let exchanged = |records: Vec<Vec<(String, Value)>>| -> Vec<Vec<(String, Value)>> {
        (records.into_iter())
            .map(|r| {
                r.into_iter()
                    .filter(|(k, _)| !k.ends_with("sent_bytes"))
                    .collect()
            })
            .collect()
    };
    let (ra, rb) = (exchanged(untimed(a)), exchanged(untimed(b)));
    assert_eq!(ra.len(), rb.len());
    for (x, y) in ra.iter().zip(&rb) {
        let keys = |r: &Vec<(String, Value)>| r.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
        assert_eq!(keys(x), keys(y));
        for ((key, p), (_, q)) in x.iter().zip(y) {
            match (p.as_f64(), q.as_f64()) {
                (Some(p), Some(q)) => assert!(
                    (p - q).abs() <= 1e-5 * p.abs().max(q.abs()) + 1e-6,
                    "{key}: {p} against {q}"
                ),
                _ => assert_eq!(p, q, "{key}"),
            }
        }
    }
}

fn with(base: &[&'static str], more: &[&'static str]) -> Vec<&'static str> {
    base.iter().chain(more).copied().collect()
}

fn one_worker_equals_two(file: &str) {
    let dir = tempfile::tempdir().unwrap();
    let base = shared(file, "3");
    let one = dir.path().join("one");
    assert_ok(&run(file, &one, &base));
    let threads = dir.path().join("threads");
    assert_ok(&run(file, &threads, &with(&base, &["-w", "2"])));
    let processes = dir.path().join("processes");
    assert_ok(&run(file, &processes, &with(&base, &["-n", "2"])));
    for two in [&threads, &processes] {
        assert_close_weights(&one, two, 3);
        assert_same_metrics(&one, two);
    }
    // Two processes with the same seed write the same files.
    let again = dir.path().join("again");
    assert_ok(&run(file, &again, &with(&base, &["-n", "2"])));
    assert_eq!(untimed(&processes), untimed(&again));
    assert!(final_weights(&processes, 3) == final_weights(&again, 3));
}

#[test]
fn two_workers_or_processes_train_starpo_as_one_worker_does() {
    one_worker_equals_two(STARPO);
}

#[test]
fn two_workers_or_processes_train_ppo_as_one_worker_does() {
    one_worker_equals_two(PPO);
}

/// `max_tokens_per_micro_batch` in place of `micro_batch`: other micro-batches (packed by
/// length within the budget, shared by two workers), the same update.
#[test]
fn a_token_budget_cuts_other_micro_batches_to_the_same_weights() {
    let dir = tempfile::tempdir().unwrap();
    let base = shared(STARPO, "3");
    let (count, budget) = (dir.path().join("count"), dir.path().join("budget"));
    assert_ok(&run(STARPO, &count, &base));
    let tokens = [
        "--set",
        "nodes.actor_step.micro_batch=None",
        "--set",
        "nodes.actor_step.max_tokens_per_micro_batch=200",
        "-w",
        "2",
    ];
    assert_ok(&run(STARPO, &budget, &with(&base, &tokens)));
    assert_close_weights(&count, &budget, 3);
    let passes = |dir: &Path| -> Vec<(f64, f64)> {
        (metrics(dir).iter())
            .map(|r| {
                let n = |key: &str| r[key].as_f64().unwrap();
                (n("actor_step/samples"), n("actor_step/micro_batches"))
            })
            .collect()
    };
    for ((samples, by_count), (_, by_tokens)) in passes(&count).into_iter().zip(passes(&budget)) {
        // Two samples a pass; 200 tokens hold fewer of these 90- to 260-token chats.
        assert_eq!(by_count, (samples / 2.0).ceil());
        assert!(
            by_tokens > by_count,
            "{by_tokens} passes, {by_count} by count"
        );
    }
}

#[test]
fn a_resumed_two_process_run_ends_as_an_uninterrupted_one() {
    let dir = tempfile::tempdir().unwrap();
    let base = with(&shared(STARPO, "6"), &["-n", "2"]);
    let (whole, split) = (dir.path().join("whole"), dir.path().join("split"));
    assert_ok(&run(STARPO, &whole, &base));
    assert_ok(&run(STARPO, &split, &with(&base, &["--stop-after", "3"])));
    assert_eq!(metrics(&split).len(), 3);
    let split_arg = split.to_str().unwrap();
    assert_ok(&roll_flow(&["run", "--resume", split_arg, "-n", "2"]));
    assert_eq!(untimed(&split), untimed(&whole));
    assert!(final_weights(&split, 6) == final_weights(&whole, 6));
}

/// Two processes of a long StarPO run, started by hand (`-p`, a hostfile of free ports) into
/// `out`, with `more` arguments each; returned once a checkpoint is in place.
///
/// The ports are found free here and bound by the processes a moment later, so something
/// else on the machine can take one in between: process 0 then stops with "Address already
/// in use" (and process 1 may have connected to the port's new owner). That start is tried
/// again on other ports; any other failure to start says what both processes printed.
fn two_processes(dir: &Path, out: &Path, more: &[&str]) -> (Child, Child) {
    for _ in 0..3 {
        match start_two(dir, out, more) {
            Ok(processes) => return processes,
            Err(printed) if printed.contains("Address already in use") => {
                let _ = std::fs::remove_dir_all(out);
            }
            Err(printed) => panic!("the two processes did not start: {printed}"),
        }
    }
    panic!("three starts in a row found a port taken");
}

/// One try of [`two_processes`]: the processes, or what they printed once one of them
/// ended (or two minutes passed) without a checkpoint.
fn start_two(dir: &Path, out: &Path, more: &[&str]) -> Result<(Child, Child), String> {
    let ports: Vec<u16> = (0..2)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect::<Vec<_>>()
        .iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect();
    let hostfile = dir.join("hosts.txt");
    let hosts = format!("127.0.0.1:{}\n127.0.0.1:{}\n", ports[0], ports[1]);
    std::fs::write(&hostfile, hosts).unwrap();
    let start = |process: &str| {
        let mut args: Vec<String> = vec!["run".into(), STARPO.into(), "--out".into()];
        args.push(out.display().to_string());
        args.extend(common::tiny(STARPO));
        args.extend(["--steps", "400", "-n", "2", "-p", process, "--hostfile"].map(String::from));
        args.push(hostfile.display().to_string());
        args.extend(more.iter().map(|a| a.to_string()));
        Command::new(env!("CARGO_BIN_EXE_roll-flow"))
            .args(&args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (mut first, mut second) = (start("0"), start("1"));
    // Every step writes a checkpoint.
    let began = Instant::now();
    while !out.join("checkpoints/step_2").exists() {
        let one_ended = [&mut first, &mut second]
            .iter_mut()
            .any(|p| p.try_wait().unwrap().is_some());
        if one_ended || began.elapsed() > Duration::from_secs(120) {
            let printed = [("0", first), ("1", second)].map(|(index, mut process)| {
                let _ = process.kill();
                let output = process.wait_with_output().unwrap();
                let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
                format!("process {index} ({}): {stderr}", output.status)
            });
            return Err(printed.join("\n"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok((first, second))
}

/// Waits for `first` to end; its stderr and how long that took.
fn ended(first: Child, since: Instant) -> (String, Duration) {
    let ended = first.wait_with_output().unwrap();
    let waited = since.elapsed();
    assert!(!ended.status.success(), "process 0 ended well");
    (String::from_utf8_lossy(&ended.stderr).into_owned(), waited)
}

#[test]
fn a_killed_process_stops_the_other_with_an_error_and_the_run_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let (first, mut second) = two_processes(dir.path(), &out, &[]);
    second.kill().unwrap();
    let (err, waited) = ended(first, Instant::now());
    let _ = second.wait();
    assert!(
        waited < Duration::from_secs(60),
        "process 0 took {waited:?} to stop"
    );
    assert!(
        err.contains("the connection to process 1 of the run broke"),
        "{err}"
    );
    // The error is said once, without the network threads' panics before it.
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains("--resume"), "says how to go on: {err}");
    assert!(
        err.contains(" -n 2` continues"),
        "with the processes: {err}"
    );
    // Nothing of the last checkpoint is lost: a resumed run goes on from it.
    let done = metrics(&out).len();
    assert!(done >= 2);
    let until = (done + 1).to_string();
    let resumed = [
        "run",
        "--resume",
        out.to_str().unwrap(),
        "-n",
        "2",
        "--stop-after",
        &until,
    ];
    assert_ok(&roll_flow(&resumed));
    assert_eq!(metrics(&out).len(), done + 1);
}

/// A process that hangs (here stopped by SIGSTOP: its connections stay open, so timely
/// alone would wait for ever) is named once its heartbeats have been missing for the peer
/// timeout.
#[cfg(unix)]
#[test]
fn a_hung_process_stops_the_other_after_the_peer_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let (first, mut second) = two_processes(dir.path(), &out, &["--peer-timeout", "2"]);
    let signal = |name: &str| {
        let pid = second.id().to_string();
        let status = Command::new("kill").args([name, &pid]).status().unwrap();
        assert!(status.success(), "kill {name} {pid}");
    };
    signal("-STOP");
    let (err, waited) = ended(first, Instant::now());
    signal("-CONT");
    second.kill().unwrap();
    let _ = second.wait();
    assert!(
        waited < Duration::from_secs(30),
        "process 0 took {waited:?} to stop"
    );
    assert!(
        err.contains("worker 1 (process 1) has not been heard from for"),
        "{err}"
    );
    assert!(err.contains(" -n 2` continues"), "says how to go on: {err}");
}

/// A process started by hand whose process 0 never comes stops once the connect timeout has
/// passed, naming process 0, its address and how to start it, and writes nothing.
#[test]
fn a_process_whose_peer_never_starts_stops_after_the_connect_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = free.local_addr().unwrap().to_string();
    drop(free);
    let hostfile = dir.path().join("hosts.txt");
    std::fs::write(&hostfile, format!("{address}\n127.0.0.1:0\n")).unwrap();
    let out = dir.path().join("run");
    let args = [
        "run",
        STARPO,
        "--out",
        out.to_str().unwrap(),
        "-n",
        "2",
        "-p",
        "1",
        "--hostfile",
        hostfile.to_str().unwrap(),
        "--connect-timeout",
        "2",
    ];
    let began = Instant::now();
    let ended = roll_flow(&args);
    let waited = began.elapsed();
    let err = String::from_utf8_lossy(&ended.stderr);
    assert_eq!(ended.status.code(), Some(1), "{err}");
    assert!(waited < Duration::from_secs(30), "took {waited:?}");
    assert!(
        err.contains(&format!(
            "process 1 could not reach process 0 at {address} within 2 s"
        )),
        "{err}"
    );
    assert!(err.contains("`-p 0` with the same --hostfile"), "{err}");
    assert!(!out.exists(), "process 1 wrote {}", out.display());
}

/// `--hostfile` belongs to a process started by hand (`-p`): with `-n N` alone the
/// processes start here on a hostfile of their own, so a given one is refused at once
/// (each child would otherwise get two, fail, and leave process 0 waiting).
#[test]
fn a_hostfile_without_a_process_index_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let hostfile = dir.path().join("hosts.txt");
    std::fs::write(&hostfile, "127.0.0.1:1\n127.0.0.1:2\n").unwrap();
    let out = dir.path().join("run");
    let args = ["run", STARPO, "--out", out.to_str().unwrap(), "-n", "2"];
    let ended = roll_flow(&[&args[..], &["--hostfile", hostfile.to_str().unwrap()]].concat());
    let err = String::from_utf8_lossy(&ended.stderr);
    assert_eq!(ended.status.code(), Some(2), "{err}");
    assert!(err.contains("--process"), "{err}");
    assert!(!out.exists(), "wrote {}", out.display());
}

/// More workers than a rollout's env set has groups is refused before anything loads: each
/// worker plays whole groups, and the others would hold every model and play nothing.
#[test]
fn more_workers_than_groups_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(STARPO, dir.path(), &["-w", "3"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "3 workers (-w × -n), but env set `train` that the rollout plays has 2 groups"
        ) && stderr.contains("use at most 2 workers, or more `groups`"),
        "{stderr}"
    );
    assert!(!dir.path().join("metrics.jsonl").exists(), "nothing ran");
}
