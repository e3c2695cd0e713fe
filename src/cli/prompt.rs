//! Questions asked on the terminal: a yes/no confirmation and a token typed
//! without echo. Prompts go to stderr so that stdout stays the command's output.

use std::io::{self, BufRead, IsTerminal, Write};

use rustix::termios::{self, LocalModes, OptionalActions};

pub(super) fn stdin_is_terminal() -> bool {
    io::stdin().is_terminal()
}

fn read_line() -> io::Result<String> {
    let mut line = String::new();
    io::stdin().lock().read_line(&mut line)?;
    Ok(line.trim().to_owned())
}

/// One line of standard input, trimmed (a token piped in, `--with-token`).
pub(super) fn read_stdin_line() -> io::Result<String> {
    read_line()
}

/// Asks `question [y/N]`; only `y` or `yes` agrees.
pub(super) fn confirm(question: &str) -> io::Result<bool> {
    eprint!("{question} [y/N] ");
    io::stderr().flush()?;
    let answer = read_line()?.to_ascii_lowercase();
    Ok(answer == "y" || answer == "yes")
}

/// Reads a secret from the terminal with echo turned off, so that it stays
/// off the screen and out of terminal scrollback.
pub(super) fn read_secret(prompt: &str) -> io::Result<String> {
    eprint!("{prompt}");
    io::stderr().flush()?;
    let stdin = io::stdin();
    let _echo = EchoOff::new(&stdin);
    let secret = read_line();
    // The Enter key was not echoed either.
    eprintln!();
    secret
}

/// Turns terminal echo off until dropped. When stdin is not a terminal (or
/// its modes cannot be read) it does nothing.
struct EchoOff<'a> {
    stdin: &'a io::Stdin,
    saved: Option<termios::Termios>,
}

impl<'a> EchoOff<'a> {
    fn new(stdin: &'a io::Stdin) -> Self {
        let saved = termios::tcgetattr(stdin).ok();
        if let Some(original) = &saved {
            let mut quiet = original.clone();
            quiet.local_modes.remove(LocalModes::ECHO);
            let _ = termios::tcsetattr(stdin, OptionalActions::Now, &quiet);
        }
        Self { stdin, saved }
    }
}

impl Drop for EchoOff<'_> {
    fn drop(&mut self) {
        if let Some(original) = &self.saved {
            let _ = termios::tcsetattr(self.stdin, OptionalActions::Now, original);
        }
    }
}
