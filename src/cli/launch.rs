//! `roll-flow run FILE -n N` without `-p`: the run's other N − 1 processes started on this
//! machine, connected over loopback.
//!
//! The processes find each other through a hostfile of free local ports (timely's `-h`),
//! written to the temp directory; each child runs the same command line with its `-p` and
//! that hostfile. This process is process 0, the one that writes the run directory. A
//! child that fails makes the run fail (one that exits before the processes have connected
//! stops process 0's wait at once, [`LocalCluster::peers_gone`]); a run that fails stops
//! its children. Across
//! machines every process is started by hand, by ssh or by Slurm with `-p` and a shared
//! `--hostfile` (README, "Several workers and machines").

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use roll_flow::engine::executor::PeersGone;

/// Each child's process index and handle.
type Children = Arc<Mutex<Vec<(usize, Child)>>>;

/// The children of a local cluster run and the hostfile they share.
pub struct LocalCluster {
    pub hostfile: PathBuf,
    children: Children,
}

impl LocalCluster {
    /// Starts processes 1..`processes` of this command line.
    pub fn start(processes: usize) -> anyhow::Result<LocalCluster> {
        let ports = free_ports(processes)?;
        let hosts: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        let hostfile = std::env::temp_dir().join(format!(
            "roll-flow-hosts-{}-{}.txt",
            std::process::id(),
            ports[0]
        ));
        std::fs::write(&hostfile, hosts.join("\n") + "\n")
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", hostfile.display()))?;
        let exe = std::env::current_exe()?;
        let args: Vec<String> = std::env::args().skip(1).collect();
        let cluster = LocalCluster {
            hostfile,
            children: Children::default(),
        };
        for process in 1..processes {
            let child = Command::new(&exe)
                .args(&args)
                .args(["-p", &process.to_string(), "--hostfile"])
                .arg(&cluster.hostfile)
                .spawn()
                .map_err(|e| anyhow::anyhow!("cannot start process {process}: {e}"))?;
            cluster.children().push((process, child));
        }
        Ok(cluster)
    }

    fn children(&self) -> MutexGuard<'_, Vec<(usize, Child)>> {
        locked(&self.children)
    }

    /// The check process 0 makes while the processes connect: has a child exited already
    /// (it printed why; it will never connect)?
    pub fn peers_gone(&self) -> PeersGone {
        let children = self.children.clone();
        PeersGone::new(move || {
            locked(&children).iter_mut().find_map(|(process, child)| {
                let status = child.try_wait().ok().flatten()?;
                Some(format!(
                    "process {process} of the run exited ({status}) before it connected; \
                     its messages above say why"
                ))
            })
        })
    }

    /// Waits for the children after this process's run; `Err` names the first that failed.
    /// When the run itself failed, the children are stopped instead of awaited.
    pub fn finish(self, run_failed: bool) -> anyhow::Result<()> {
        let mut failed = None;
        for (process, child) in self.children().iter_mut() {
            if run_failed {
                let _ = child.kill();
            }
            let status = child.wait()?;
            if !status.success() && !run_failed && failed.is_none() {
                failed = Some(format!("process {process} of the run failed ({status})"));
            }
        }
        failed.map_or(Ok(()), |f| Err(anyhow::anyhow!(f)))
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        for (_, child) in self.children().iter_mut() {
            if matches!(child.try_wait(), Ok(None)) {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        let _ = std::fs::remove_file(&self.hostfile);
    }
}

/// The children, whoever held the lock last having panicked or not.
fn locked(children: &Children) -> MutexGuard<'_, Vec<(usize, Child)>> {
    children.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `n` ports the OS says are free now (listeners bound to port 0, then closed together).
fn free_ports(n: usize) -> anyhow::Result<Vec<u16>> {
    let listeners = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<Result<Vec<_>, _>>()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_gone_names_a_child_that_has_exited_and_nothing_while_all_run() {
        let spawn = |script: &str| Command::new("sh").args(["-c", script]).spawn().unwrap();
        let cluster = LocalCluster {
            hostfile: std::env::temp_dir().join("roll-flow-launch-test-unused"),
            children: Children::default(),
        };
        cluster.children().push((1, spawn("sleep 30")));
        let gone = cluster.peers_gone();
        assert_eq!(gone.check(), None);
        cluster.children().push((2, spawn("exit 3")));
        let began = std::time::Instant::now();
        let why = loop {
            if let Some(why) = gone.check() {
                break why;
            }
            assert!(began.elapsed().as_secs() < 10, "the exit was not seen");
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        assert!(
            why.starts_with("process 2 of the run exited (exit status: 3)"),
            "{why}"
        );
        // Dropping the cluster stops the child still running.
        drop(cluster);
    }
}
