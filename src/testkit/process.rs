//! `switchboard serve` as a child process, for the tests that need a real
//! process (signals, exit codes, logs, the CLI) and for the benchmarks, which
//! measure the release binary: the caller builds the command (the binary is
//! `CARGO_BIN_EXE_switchboard`, known only to a test or bench crate) with
//! `--listen 127.0.0.1:0`; [`ServeProcess::spawn`] starts it, keeps all of its
//! stderr on a thread of its own (so the server never blocks on a full pipe)
//! and reads the port once from the "switchboard is serving" line. Dropping it
//! kills the process.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};

/// A `switchboard serve` child process whose stderr is collected line by line.
pub struct ServeProcess {
    child: Child,
    /// `127.0.0.1:PORT`, from the "switchboard is serving" line.
    pub addr: String,
    log: Arc<Mutex<Vec<String>>>,
    reader: Option<JoinHandle<()>>,
}

impl ServeProcess {
    /// Spawns `command` (a `serve` on port 0; its stdout is discarded, its
    /// stderr read here) and waits up to `timeout` for its address. An exit
    /// before serving, or no address in time (the process is then killed), is
    /// an error carrying the stderr so far.
    pub fn spawn(command: Command, timeout: Duration) -> Result<ServeProcess> {
        Self::spawn_inner(command, timeout, false)
    }

    /// As [`spawn`](Self::spawn), and every later stderr line with `WARN` or
    /// `ERROR` in it is also written to this process's stderr (a benchmark's
    /// server logs little else, and nobody reads its log afterwards).
    pub fn spawn_echoing_problems(command: Command, timeout: Duration) -> Result<ServeProcess> {
        Self::spawn_inner(command, timeout, true)
    }

    fn spawn_inner(mut command: Command, timeout: Duration, echo: bool) -> Result<ServeProcess> {
        let mut child = command
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("spawn {:?}", command.get_program()))?;
        let log = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().context("piped stderr")?;
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = {
            let log = log.clone();
            std::thread::spawn(move || {
                let mut serving = false;
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    if echo && serving && (line.contains("ERROR") || line.contains("WARN")) {
                        eprintln!("server: {line}");
                    }
                    let addr = serving_address(&line);
                    log.lock().unwrap().push(line);
                    if let Some(addr) = addr {
                        serving = true;
                        let _ = tx.send(addr);
                    }
                }
                // Dropping `tx` tells a waiting spawn that stderr closed.
            })
        };
        let mut process = ServeProcess {
            child,
            addr: String::new(),
            log,
            reader: Some(reader),
        };
        match rx.recv_timeout(timeout) {
            Ok(addr) => {
                process.addr = addr;
                Ok(process)
            }
            Err(RecvTimeoutError::Timeout) => {
                process.kill();
                bail!(
                    "the server did not report its address within {timeout:?}; stderr:\n{}",
                    process.log_text()
                )
            }
            Err(RecvTimeoutError::Disconnected) => {
                process.kill();
                bail!(
                    "the server exited before serving; stderr:\n{}",
                    process.log_text()
                )
            }
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything the server wrote on stderr so far.
    pub fn log_lines(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    pub fn log_text(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// `kill -NAME pid`.
    pub fn signal(&self, name: &str) -> Result<()> {
        let status = Command::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status()
            .context("run kill")?;
        ensure!(status.success(), "kill -{name} {}: {status}", self.pid());
        Ok(())
    }

    /// Waits for the exit, then for the last of its stderr. After `timeout`
    /// the process is killed and this is an error.
    pub fn wait_exit(&mut self, timeout: Duration) -> Result<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait()? {
                if let Some(reader) = self.reader.take() {
                    let _ = reader.join();
                }
                return Ok(status);
            }
            if Instant::now() > deadline {
                self.kill();
                bail!("the server did not exit within {timeout:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL, and wait for it (and for the last of its stderr).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `listen` address of the "switchboard is serving" line, text or JSON.
pub fn serving_address(line: &str) -> Option<String> {
    if !line.contains("switchboard is serving") {
        return None;
    }
    let (start, terminators): (usize, &[char]) = if let Some(i) = line.find("listen=") {
        (i + "listen=".len(), &[' '])
    } else {
        let i = line.find("\"listen\":\"")?;
        (i + "\"listen\":\"".len(), &['"'])
    };
    let rest = &line[start..];
    let end = rest.find(terminators).unwrap_or(rest.len());
    Some(rest[..end].to_owned())
}
