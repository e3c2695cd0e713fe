//! The OAuth consent flow in Chromium (`tests/board-browser/consent.mjs`),
//! the way a hosted client's human meets it: a link on the client's own
//! site (another site than the server's) opens `/oauth/authorize`. The
//! board's `SameSite=Strict` cookie does not come along on that cross-site
//! navigation; the server's own page refreshes onward, and the sign-in form
//! (not signed in) or the consent page (signed in) follows. The script
//! registers its client by DCR, allows and denies, redeems the code from
//! the browser and calls the MCP URL with the token; phone width too.

use serde_json::json;

use crate::oauth::connections;
use crate::support::api::{HIGH_RATES, Server, vend};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_oauth_consent_flow_works_cross_site_in_chromium() {
    if !super::browser::browser_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &HIGH_RATES);
    let admin = server.first_token.clone();
    let ep = vend(&server, &admin, json!({ "agent": "chat" })).await;
    let board_url = format!("http://{}", server.addr);
    let checks = super::browser::run_scenario(
        "consent.mjs",
        &[
            ("BOARD_URL", board_url.as_str()),
            ("TOKEN", &admin),
            ("SLUG", &ep.slug),
        ],
    )
    .await;
    for expected in [
        "dcr",
        "cross-site-sign-in",
        "allow",
        "token",
        "mcp",
        "signed-in-bounce",
        "deny",
        "phone-width",
        "new-endpoint",
        "no-javascript",
    ] {
        assert!(
            checks.iter().any(|c| c == expected),
            "{expected} did not run: {checks:?}"
        );
    }

    // What the browser allowed, seen through the API: one connection of
    // the client to the endpoint (a connection is made when a code is
    // redeemed: the denial made none, nor did the code allowed without
    // JavaScript, which the script leaves unredeemed).
    let listed = connections(&server, &admin, &ep.slug).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["client_name"], "Browser consent client");
}
