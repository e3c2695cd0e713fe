//! The shutdown signal: SIGINT (Ctrl-C) or SIGTERM.
//!
//! The handlers are registered when [`install`] is called, not when the
//! returned future is first polled: a signal that arrives while the server is
//! still starting must mean "shut down", not the default "die at once".

use std::future::Future;

#[cfg(unix)]
pub fn install() -> std::io::Result<impl Future<Output = ()> + Send + 'static> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => tracing::info!("received SIGINT"),
            _ = terminate.recv() => tracing::info!("received SIGTERM"),
        }
    })
}

#[cfg(not(unix))]
pub fn install() -> std::io::Result<impl Future<Output = ()> + Send + 'static> {
    Ok(async {
        let _ = tokio::signal::ctrl_c().await;
    })
}
