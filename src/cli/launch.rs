//! `roll-flow run FILE -n N` without `-p`: the run's other N − 1 processes started on this
//! machine, connected over loopback.
//!
//! The processes find each other through a hostfile of free local ports (timely's `-h`),
//! written to the temp directory; each child runs the same command line with its `-p` and
//! that hostfile. This process is process 0, the one that writes the run directory. A
//! child that fails makes the run fail; a run that fails stops its children. Across
//! machines every process is started by hand, by ssh or by Slurm with `-p` and a shared
//! `--hostfile` (README, "Several workers and machines").

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command};

/// The children of a local cluster run and the hostfile they share.
pub struct LocalCluster {
    pub hostfile: PathBuf,
    children: Vec<(usize, Child)>,
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
        let mut cluster = LocalCluster {
            hostfile,
            children: Vec::new(),
        };
        for process in 1..processes {
            let child = Command::new(&exe)
                .args(&args)
                .args(["-p", &process.to_string(), "--hostfile"])
                .arg(&cluster.hostfile)
                .spawn()
                .map_err(|e| anyhow::anyhow!("cannot start process {process}: {e}"))?;
            cluster.children.push((process, child));
        }
        Ok(cluster)
    }

    /// Waits for the children after this process's run; `Err` names the first that failed.
    /// When the run itself failed, the children are stopped instead of awaited.
    pub fn finish(mut self, run_failed: bool) -> anyhow::Result<()> {
        let mut failed = None;
        for (process, child) in &mut self.children {
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
        for (_, child) in &mut self.children {
            if matches!(child.try_wait(), Ok(None)) {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        let _ = std::fs::remove_file(&self.hostfile);
    }
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
