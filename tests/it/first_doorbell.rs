//! The README's "A woken agent in three commands", run as written (issue 45).
//!
//! The commands are read from the README (the block after the
//! `<!-- first-doorbell` marker), so the two cannot drift apart. Each runs
//! through `sh -c` exactly as the README writes it, in a fresh directory and
//! a fresh config directory, with `switchboard` on `PATH` being the binary
//! under test. The first command, the install, is checked to be the locked
//! install (`cargo install --locked --path .`) and stood in for by that
//! binary: building a release inside the test run would take minutes, and
//! `scripts/check-msrv` (in `.ci/run`) runs `cargo metadata --locked`, which
//! fails exactly when `--locked` would refuse the lock file.
//! `scripts/first-doorbell` runs all three for real from a fresh clone and
//! times them (docs/development.md).
//!
//! What the README promises is checked: `serve` starts on a new database,
//! `quickstart` signs in by itself, vends, runs the example agent, and its
//! first todo's doorbell wakes the agent, which completes it; the README's
//! push line, with the slug quickstart printed, rings it again; Ctrl-C (a
//! SIGINT to the foreground process group) stops it cleanly.
//!
//! The server listens on a port of the OS's choosing (`SWITCHBOARD_LISTEN`,
//! the flag's environment fallback) instead of 8080, which other tests and
//! other programs on the machine may hold; quickstart is told the URL with
//! `SWITCHBOARD_URL`, the same way.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use serde_json::Value;
use switchboard::testkit::serving_address;

use crate::support::server::BIN;

/// Every wait below ends by this (a first build of the Node helpers is not
/// involved: nothing here uses them).
const DEADLINE: Duration = Duration::from_secs(60);

/// The README's three commands, as written, comments dropped.
fn readme_commands() -> (Vec<String>, String) {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md");
    let after = readme
        .split_once("<!-- first-doorbell")
        .expect("the README marks its first-doorbell block")
        .1;
    let block = after
        .split_once("```sh\n")
        .and_then(|(_, rest)| rest.split_once("\n```"))
        .expect("a ```sh block after the marker")
        .0;
    let commands: Vec<String> = block
        .lines()
        .map(|line| line.split(" #").next().unwrap().trim().to_owned())
        .filter(|line| !line.is_empty())
        .collect();
    // The push line that follows it, with its `<slug>` placeholder.
    let push = after
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("switchboard todo push <slug>"))
        .expect("the README shows a push with a <slug> placeholder")
        .to_owned();
    (commands, push)
}

/// A process group started through `sh -c 'exec LINE'`, its lines read as
/// they come.
struct Shell {
    child: Child,
    lines: Receiver<(bool, String)>,
    seen: Vec<(bool, String)>,
}

impl Shell {
    fn spawn(line: &str, dir: &Path, env: &[(&str, String)]) -> Shell {
        let mut command = Command::new("sh");
        // `exec`: the command is the group's process, as when typed at an
        // interactive shell (a non-interactive `sh -c` that waited for it
        // would itself die of the Ctrl-C and hide the command's own status).
        command
            .args(["-c", &format!("exec {line}")])
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own group, as a terminal's foreground job is: a Ctrl-C
            // reaches every process of it.
            .process_group(0);
        clean_env(&mut command, env);
        let mut child = command.spawn().expect("sh");
        let (tx, lines) = channel();
        for (is_err, stream) in [
            (
                false,
                Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
            ),
            (true, Box::new(child.stderr.take().unwrap())),
        ] {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    if tx.send((is_err, line)).is_err() {
                        return;
                    }
                }
            });
        }
        Shell {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits for a line (stdout or stderr) that `matches`; returns it.
    fn wait_for(&mut self, what: &str, matches: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        if let Some((_, line)) = self.seen.iter().find(|(_, l)| matches(l)) {
            return line.clone();
        }
        while start.elapsed() < DEADLINE {
            if let Ok((is_err, line)) = self.lines.recv_timeout(Duration::from_millis(100)) {
                self.seen.push((is_err, line.clone()));
                if matches(&line) {
                    return line;
                }
            }
        }
        panic!(
            "no line {what} within {DEADLINE:?}; so far:\n{}",
            self.text()
        );
    }

    fn text(&self) -> String {
        self.seen
            .iter()
            .map(|(is_err, l)| format!("{} {l}", if *is_err { "err" } else { "out" }))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Signals the whole group, then waits for the shell's exit.
    fn interrupt(&mut self, signal: rustix::process::Signal) -> std::process::ExitStatus {
        let group = rustix::process::Pid::from_raw(self.child.id() as i32).unwrap();
        let _ = rustix::process::kill_process_group(group, signal);
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                // What it wrote up to its end.
                while let Ok(line) = self.lines.recv_timeout(Duration::from_millis(200)) {
                    self.seen.push(line);
                }
                return status;
            }
            assert!(
                start.elapsed() < DEADLINE,
                "it did not stop:\n{}",
                self.text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Shell {
    fn drop(&mut self) {
        if let Some(group) = rustix::process::Pid::from_raw(self.child.id() as i32) {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
        let _ = self.child.wait();
    }
}

/// The environment of a new user's shell: none of the variables a test run
/// may carry, and `env` on top.
fn clean_env(command: &mut Command, env: &[(&str, String)]) {
    for name in [
        "SWITCHBOARD_DATABASE_URL",
        "SWITCHBOARD_URL",
        "SWITCHBOARD_TOKEN",
        "SWITCHBOARD_LOG_FORMAT",
        "SWITCHBOARD_LOG",
        "SWITCHBOARD_BOOTSTRAP_TOKEN",
        "SWITCHBOARD_BOOTSTRAP_TOKEN_FILE",
        "SWITCHBOARD_PUBLIC_URL",
        "SWITCHBOARD_LISTEN",
    ] {
        command.env_remove(name);
    }
    for (name, value) in env {
        command.env(name, value);
    }
}

/// A directory holding `switchboard`: the binary under test, standing in
/// for the one `cargo install` puts on `PATH`.
fn installed(root: &Path) -> PathBuf {
    let bin = root.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(BIN, bin.join("switchboard")).unwrap();
    bin
}

#[test]
fn the_readmes_three_commands_wake_an_agent_and_a_push_rings_it_again() {
    let (commands, push) = readme_commands();
    assert_eq!(commands.len(), 3, "three commands: {commands:?}");
    assert_eq!(
        commands[0], "cargo install --locked --path .",
        "the install is locked (the tested versions) and from this checkout"
    );
    assert_eq!(commands[1], "switchboard serve");
    assert!(
        commands[2].starts_with("switchboard "),
        "the third is one switchboard command: {commands:?}"
    );

    let root = tempfile::tempdir().unwrap();
    let work = root.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let path = format!(
        "{}:{}",
        installed(root.path()).display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let config = root.path().join("config").display().to_string();
    let base = [
        ("PATH", path),
        ("SWITCHBOARD_CONFIG_DIR", config),
        ("NO_COLOR", "1".to_owned()),
    ];

    // 2. serve, on a new database in the new directory.
    let serve_env = [
        &base[..],
        &[("SWITCHBOARD_LISTEN", "127.0.0.1:0".to_owned())],
    ]
    .concat();
    let mut serve = Shell::spawn(&commands[1], &work, &serve_env);
    let line = serve.wait_for("`switchboard is serving`", |l| serving_address(l).is_some());
    let url = format!("http://{}", serving_address(&line).unwrap());
    assert!(work.join("switchboard.db").exists());

    // 3. quickstart: signs in by itself, vends, runs the example agent, and
    //    its first todo's doorbell wakes it.
    let quick_env = [&base[..], &[("SWITCHBOARD_URL", url.clone())]].concat();
    let mut quick = Shell::spawn(&commands[2], &work, &quick_env);
    quick.wait_for("signing in with the first start's token", |l| {
        l.starts_with("Signed in to ") && l.contains("as admin with the first-start token")
    });
    let first = quick.wait_for("the example agent completing the first todo", |l| {
        l.starts_with("example-agent: completed td_")
    });
    let first_id = first.rsplit(' ').next().unwrap().to_owned();
    quick.wait_for("the runner's run for the first doorbell", |l| {
        l.contains(&format!("run todo={first_id} reason=doorbell exit=0"))
    });

    // The push the README shows, with the slug quickstart printed; in a
    // third shell, as a user would (the saved login reaches the server).
    let printed = quick.wait_for("the push line", |l| {
        l.trim().starts_with("switchboard todo push ")
    });
    let slug = printed.split_whitespace().nth(3).unwrap().to_owned();
    assert_eq!(
        printed.trim(),
        push.replace("<slug>", &slug),
        "quickstart prints the README's push line"
    );
    let pushed = Command::new("sh")
        .args(["-c", &push.replace("<slug>", &slug)])
        .current_dir(&work)
        .envs(base.iter().map(|(k, v)| (*k, v)))
        .env_remove("SWITCHBOARD_URL")
        .env_remove("SWITCHBOARD_TOKEN")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        pushed.status.success(),
        "{}",
        String::from_utf8_lossy(&pushed.stderr)
    );
    let second = quick.wait_for("the example agent completing the pushed todo", |l| {
        l.starts_with("example-agent: completed td_") && !l.ends_with(&first_id)
    });
    let second_id = second.rsplit(' ').next().unwrap().to_owned();
    quick.wait_for("the runner's run for the second doorbell", |l| {
        l.contains(&format!("run todo={second_id} reason=doorbell exit=0"))
    });

    // Ctrl-C: the runner clocks the endpoint out and exits 0.
    let status = quick.interrupt(rustix::process::Signal::INT);
    assert!(status.success(), "{status:?}:\n{}", quick.text());
    quick.wait_for("the clock-out", |l| l.contains("clocked the endpoint out"));

    // Both todos are done, by the agent; the endpoint is out by its agent.
    let list = Command::new(BIN)
        .args(["todo", "list", "--endpoint", &slug, "--json"])
        .current_dir(&work)
        .env("SWITCHBOARD_CONFIG_DIR", &base[1].1)
        .env_remove("SWITCHBOARD_URL")
        .env_remove("SWITCHBOARD_TOKEN")
        .output()
        .unwrap();
    assert!(list.status.success(), "{list:?}");
    let list: Value = serde_json::from_slice(&list.stdout).unwrap();
    let states: Vec<(&str, &str)> = list["todos"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["id"].as_str().unwrap(), t["state"].as_str().unwrap()))
        .collect();
    assert_eq!(
        states,
        vec![(second_id.as_str(), "done"), (first_id.as_str(), "done")],
        "{list}"
    );

    let status = serve.interrupt(rustix::process::Signal::TERM);
    assert!(status.success(), "{status:?}:\n{}", serve.text());
}
