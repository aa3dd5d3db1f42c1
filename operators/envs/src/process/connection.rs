//! One env-server process and the JSON-lines conversation with it: requests from many env
//! threads at once, each waiting for the reply with its `id` (a reader thread routes
//! them), so one slow env never holds up another's reply.
//!
//! Anything wrong with the stream (the process exits, a line is not JSON or not UTF-8, a
//! line is over the size limit, a reply carries an `id` no request is waiting for, a reply
//! is late) breaks the
//! connection: the process is killed, every waiting request fails with the reason and the
//! last lines of the server's stderr, and the pool starts a new process on the next call.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::process::{Child, ChildStdin};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{bounded, Sender};
use serde_json::Value;

use super::spawn::spawn;

/// Lines of the server's stderr kept for error messages.
const STDERR_LINES: usize = 20;

type Reply = Result<Value, String>;

#[derive(Default)]
struct Waiting {
    replies: HashMap<u64, Sender<Reply>>,
    /// The `id`s of notifications (`close`) whose replies have not come yet: a reply to one
    /// is dropped; a reply to no `id` here or in `replies` is the server's mistake.
    notified: HashSet<u64>,
    /// Why the connection broke, once it has.
    broken: Option<String>,
}

/// The stderr tail, shared with the thread that reads it.
#[derive(Clone, Default)]
pub struct StderrTail(Arc<Mutex<VecDeque<String>>>);

impl StderrTail {
    fn push(&self, line: String) {
        let mut lines = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if lines.len() == STDERR_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    /// `"; its stderr ended with:\n  …"`, or nothing when it wrote none.
    pub fn describe(&self) -> String {
        let lines = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if lines.is_empty() {
            return "; it wrote nothing on stderr".to_string();
        }
        let tail: Vec<String> = lines.iter().map(|l| format!("  | {l}")).collect();
        format!("; its stderr ended with:\n{}", tail.join("\n"))
    }
}

/// A running server process.
pub struct Connection {
    writer: Mutex<BufWriter<ChildStdin>>,
    waiting: Arc<Mutex<Waiting>>,
    next_id: AtomicU64,
    child: Arc<Mutex<Child>>,
    stderr: StderrTail,
    timeout: Duration,
}

/// Stream limits and timing of a connection.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub timeout: Duration,
    pub max_line_bytes: usize,
}

impl Connection {
    /// Starts `command` (program and arguments).
    pub fn start(command: &[String], limits: Limits) -> Result<Connection, String> {
        let shown = command.join(" ");
        let mut child = spawn(command).map_err(|e| format!("cannot start `{shown}`: {e}"))?;
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr_pipe = child.stderr.take().expect("piped stderr");
        let stderr = StderrTail::default();
        let tail = stderr.clone();
        let (stderr_done, stderr_closed) = bounded::<()>(1);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr_pipe).split(b'\n') {
                let Ok(line) = line else { break };
                tail.push(String::from_utf8_lossy(&line).into_owned());
            }
            drop(stderr_done);
        });
        let waiting = Arc::new(Mutex::new(Waiting::default()));
        let child = Arc::new(Mutex::new(child));
        let (reader_waiting, reader_child) = (waiting.clone(), child.clone());
        std::thread::spawn(move || {
            let reason = read_replies(stdout, &reader_waiting, limits.max_line_bytes);
            if let StreamEnd::Bad(why) = &reason {
                // Calls from now on fail with it, not with the write error the process
                // killed below would give them.
                let mut waiting = reader_waiting.lock().unwrap_or_else(|p| p.into_inner());
                waiting.broken.get_or_insert_with(|| why.clone());
            }
            // Killing first, so the reason below can say how it ended.
            let status = {
                let mut child = reader_child.lock().unwrap_or_else(|p| p.into_inner());
                let _ = child.kill();
                child.wait().map(|s| s.to_string()).unwrap_or_default()
            };
            // The stderr tail is complete once its pipe closes (soon after the exit,
            // unless a child of the server still holds it).
            let _ = stderr_closed.recv_timeout(Duration::from_millis(500));
            let reason = match reason {
                StreamEnd::Closed => format!("the server exited ({status})"),
                StreamEnd::Bad(why) => why,
            };
            fail_all(&reader_waiting, reason);
        });
        Ok(Connection {
            writer: Mutex::new(BufWriter::new(stdin)),
            waiting,
            next_id: AtomicU64::new(0),
            child,
            stderr,
            timeout: limits.timeout,
        })
    }

    /// Whether the connection broke (the pool replaces a broken one).
    pub fn is_broken(&self) -> bool {
        self.lock_waiting().broken.is_some()
    }

    fn lock_waiting(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sends `request` (a JSON object without `id`) and waits for its reply.
    pub fn call(&self, mut request: serde_json::Map<String, Value>) -> Reply {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (sender, receiver) = bounded(1);
        {
            let mut waiting = self.lock_waiting();
            if let Some(why) = &waiting.broken {
                return Err(why.clone());
            }
            waiting.replies.insert(id, sender);
        }
        request.insert("id".into(), Value::from(id));
        let line = Value::Object(request).to_string();
        if let Err(e) = self.send_line(&line) {
            self.break_with(format!("cannot write to the server: {e}"));
        }
        match receiver.recv_timeout(self.timeout) {
            Ok(reply) => reply.map_err(|why| format!("{why}{}", self.stderr.describe())),
            Err(_) => {
                let why = match self.lock_waiting().broken.clone() {
                    Some(why) => why,
                    None => format!(
                        "no reply within {:.3} s (the Process env's `timeout_s`)",
                        self.timeout.as_secs_f64()
                    ),
                };
                self.break_with(why.clone());
                Err(format!("{why}{}", self.stderr.describe()))
            }
        }
    }

    /// Sends `request` without waiting for (or routing) its reply.
    pub fn notify(&self, mut request: serde_json::Map<String, Value>) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.lock_waiting().notified.insert(id);
        request.insert("id".into(), Value::from(id));
        if self.send_line(&Value::Object(request).to_string()).is_err() {
            self.break_with("cannot write to the server".into());
        }
    }

    fn send_line(&self, line: &str) -> std::io::Result<()> {
        let mut writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        writer.write_all(line.as_bytes())?;
        writer.write_all(b"\n")?;
        writer.flush()
    }

    /// Breaks the connection: kills the process and fails every waiting request.
    fn break_with(&self, why: String) {
        {
            let mut child = self.child.lock().unwrap_or_else(|p| p.into_inner());
            let _ = child.kill();
        }
        fail_all(&self.waiting, why);
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        let mut child = self.child.lock().unwrap_or_else(|p| p.into_inner());
        let _ = child.kill();
        let _ = child.wait();
    }
}

fn fail_all(waiting: &Mutex<Waiting>, why: String) {
    let mut waiting = waiting.lock().unwrap_or_else(|p| p.into_inner());
    if waiting.broken.is_none() {
        waiting.broken = Some(why.clone());
    }
    for (_, sender) in waiting.replies.drain() {
        let _ = sender.send(Err(why.clone()));
    }
}

enum StreamEnd {
    Closed,
    Bad(String),
}

/// Routes reply lines to their waiting requests until the stream ends or goes bad.
fn read_replies(stdout: impl Read, waiting: &Mutex<Waiting>, max_line_bytes: usize) -> StreamEnd {
    let mut reader = BufReader::with_capacity(1 << 16, stdout);
    let mut line = Vec::new();
    loop {
        line.clear();
        match read_bounded_line(&mut reader, &mut line, max_line_bytes) {
            Ok(0) => return StreamEnd::Closed,
            Ok(_) => {}
            Err(why) => return StreamEnd::Bad(why),
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let reply: Value = match serde_json::from_slice(&line) {
            Ok(v) => v,
            Err(e) => {
                let shown = String::from_utf8_lossy(&line[..line.len().min(200)]).into_owned();
                return StreamEnd::Bad(format!(
                    "the server wrote a line that is not JSON ({e}): {shown:?}"
                ));
            }
        };
        let Some(id) = reply.get("id").and_then(Value::as_u64) else {
            if let Some(error) = reply.get("error") {
                return StreamEnd::Bad(format!("the server said: {error}"));
            }
            return StreamEnd::Bad("the server wrote a reply without a numeric `id`".into());
        };
        let mut routes = waiting.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(sender) = routes.replies.remove(&id) {
            let _ = sender.send(Ok(reply));
        } else if !routes.notified.remove(&id) {
            // A late reply cannot come: a request that times out breaks the connection.
            return StreamEnd::Bad(format!(
                "the server replied with `id` {id}, which no request is waiting for (a \
                 reply carries its request's `id`, each once: docs/ENV_PROTOCOL.md)"
            ));
        }
    }
}

/// Reads one line (without `\n`) into `line`, refusing lines over `max` bytes without
/// holding more than `max` of them; returns the bytes consumed (0 at the end).
fn read_bounded_line(
    reader: &mut impl BufRead,
    line: &mut Vec<u8>,
    max: usize,
) -> Result<usize, String> {
    let mut consumed = 0;
    loop {
        let chunk = reader
            .fill_buf()
            .map_err(|e| format!("cannot read the server's output: {e}"))?;
        if chunk.is_empty() {
            return Ok(consumed);
        }
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(end) => (end + 1, true),
            None => (chunk.len(), false),
        };
        let body = if done { &chunk[..take - 1] } else { chunk };
        if line.len() + body.len() > max {
            return Err(format!(
                "the server wrote a line over {max} bytes (the Process env's `max_line_bytes`)"
            ));
        }
        line.extend_from_slice(body);
        reader.consume(take);
        consumed += take;
        if done {
            return Ok(consumed);
        }
    }
}
