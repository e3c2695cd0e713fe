//! First start on an empty database: create the first human and show its
//! one-time API token on stderr (never through the logger, whose output may
//! be kept).

use anyhow::Context;

use crate::store::issue_api_token;
use crate::store::{Store, StoreError, Taken};

pub(super) const FIRST_HUMAN: &str = "admin";

pub(super) async fn first_human(store: &dyn Store, public_url: &str) -> anyhow::Result<()> {
    if store.count_humans().await? > 0 {
        return Ok(());
    }
    let human = match store.create_human(FIRST_HUMAN).await {
        Ok(human) => human,
        // Another instance bootstrapped at the same moment: it prints the token.
        Err(StoreError::Taken(Taken::HumanName(_))) => return Ok(()),
        Err(e) => return Err(e).context("creating the first human"),
    };
    let (token, _) = issue_api_token(store, &human.id, Some("first start".into()), None)
        .await
        .context("creating the first API token")?;
    eprintln!(
        "\n  Switchboard: first start on an empty database.\n  \
         Created the human {FIRST_HUMAN:?}. Its API token is shown this once:\n\n    {token}\n\n  \
         Sign in:  switchboard login {public_url} --token {token}\n  \
         Board:    {public_url}/\n"
    );
    Ok(())
}
