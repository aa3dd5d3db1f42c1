//! Starting env-server processes so that none outlives roll-flow.
//!
//! On a normal end, an error or a panic the pool kills its processes when it is dropped,
//! and a server exits on its own when its stdin closes. That leaves `kill -9` of
//! roll-flow: on Linux every server is started with `PR_SET_PDEATHSIG = SIGKILL`, which
//! the kernel sends when the *thread* that started it ends — so all servers are started
//! by one spawner thread that lives as long as the process.

use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};

use crossbeam_channel::{bounded, unbounded, Sender};

type SpawnRequest = (Vec<String>, Sender<std::io::Result<Child>>);

static SPAWNER: OnceLock<Mutex<Sender<SpawnRequest>>> = OnceLock::new();

fn spawner() -> Sender<SpawnRequest> {
    SPAWNER
        .get_or_init(|| {
            let (requests, incoming) = unbounded::<SpawnRequest>();
            std::thread::Builder::new()
                .name("env-server-spawner".into())
                .spawn(move || {
                    for (command, reply) in incoming {
                        let _ = reply.send(start(&command));
                    }
                })
                .expect("a thread for starting env servers");
            Mutex::new(requests)
        })
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
}

/// Starts `command` with piped stdin, stdout and stderr.
pub fn spawn(command: &[String]) -> std::io::Result<Child> {
    let (reply, result) = bounded(1);
    spawner()
        .send((command.to_vec(), reply))
        .map_err(|_| std::io::Error::other("the spawner thread is gone"))?;
    result
        .recv()
        .map_err(|_| std::io::Error::other("the spawner thread is gone"))?
}

fn start(command: &[String]) -> std::io::Result<Child> {
    let Some((program, args)) = command.split_first() else {
        return Err(std::io::Error::other("the command is empty"));
    };
    let mut command = Command::new(program);
    command
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    die_with_parent(&mut command);
    command.spawn()
}

#[cfg(target_os = "linux")]
fn die_with_parent(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: between fork and exec only async-signal-safe calls are made (prctl,
    // getppid, _exit).
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent died before prctl took effect.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_command: &mut Command) {}
