use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use switchboard::cli::{self, Cli, LogFormat};
use tracing_subscriber::EnvFilter;

/// glibc's malloc and free were ~11 % of the server's CPU in an MCP loop
/// (B2, perf); `docs/decisions.md` has the A/B.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // clap's usage errors exit 2 inside `parse`; the rest exit 0, 1, or 2
    // for the usage errors only a command can see (`cli::exit_code`).
    let cli = Cli::parse();
    init_logging(cli.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(cli::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(cli::exit_code(&e))
        }
    }
}

/// Logs go to stderr; `SWITCHBOARD_LOG` (or `RUST_LOG`) filters, default `info`.
/// Colours only on a terminal, and never when `NO_COLOR` is set (no-color.org).
/// JSON logs are one object per line with the event's fields (`message`
/// included) at the top level, and the request span's fields under `span`.
fn init_logging(format: LogFormat) {
    let filter = EnvFilter::try_from_env("SWITCHBOARD_LOG")
        .or_else(|_| EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal() && !no_color)
            .init(),
        LogFormat::Json => builder.json().flatten_event(true).with_ansi(false).init(),
    }
}
