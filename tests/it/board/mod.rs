//! The board (`/`, `/board/…`) end to end: HTTP-level checks of sign-in,
//! the session cookie, CSRF, tenant isolation, escaping and the live
//! stream (`http.rs`), the whole board in Debian's Chromium
//! (`browser.rs`), and the OAuth consent flow there (`consent_browser.rs`).

mod browser;
mod cluster;
mod consent_browser;
mod hostile;
mod http;
mod queues;
mod trust;

use std::time::{Duration, Instant};

use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};

/// A browser-like client of the board: no redirects followed, one cookie.
pub struct Board {
    pub base: String,
    http: reqwest::Client,
    pub cookie: Option<String>,
}

pub struct Page {
    pub status: u16,
    pub location: Option<String>,
    pub set_cookie: Option<String>,
    pub csp: Option<String>,
    pub cache_control: Option<String>,
    pub retry_after: Option<String>,
    pub body: String,
}

impl Board {
    pub fn new(addr: &str) -> Board {
        Board {
            base: format!("http://{addr}"),
            http: reqwest::Client::builder()
                .no_proxy()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(std::time::Duration::from_secs(30))
                .build()
                .unwrap(),
            cookie: None,
        }
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let req = self.http.request(method, format!("{}{path}", self.base));
        match &self.cookie {
            Some(c) => req.header(COOKIE, format!("sb_board={c}")),
            None => req,
        }
    }

    async fn page(resp: reqwest::Response) -> Page {
        let header = |name| {
            resp.headers()
                .get(name)
                .and_then(|v: &reqwest::header::HeaderValue| v.to_str().ok())
                .map(str::to_owned)
        };
        // The session's cookie when one is set, else the first.
        let cookies: Vec<String> = resp
            .headers()
            .get_all(SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok().map(str::to_owned))
            .collect();
        let set_cookie = cookies
            .iter()
            .find(|c| c.starts_with("sb_board="))
            .or(cookies.first())
            .cloned();
        let (status, location) = (resp.status().as_u16(), header(LOCATION));
        let csp = header(reqwest::header::CONTENT_SECURITY_POLICY);
        let cache_control = header(reqwest::header::CACHE_CONTROL);
        let retry_after = header(reqwest::header::RETRY_AFTER);
        Page {
            status,
            location,
            set_cookie,
            csp,
            cache_control,
            retry_after,
            body: resp.text().await.unwrap(),
        }
    }

    pub async fn get(&self, path: &str) -> Page {
        Self::page(
            self.request(reqwest::Method::GET, path)
                .send()
                .await
                .unwrap(),
        )
        .await
    }

    pub async fn post(&self, path: &str, fields: &[(&str, &str)]) -> Page {
        let body = serde_urlencoded::to_string(fields).unwrap();
        let resp = self
            .request(reqwest::Method::POST, path)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .unwrap();
        Self::page(resp).await
    }

    /// The sign-in form's nonce: its cookie and its hidden field.
    pub async fn sign_in_form(&self) -> String {
        let form = self.get("/board/sign-in").await;
        assert_eq!(form.status, 200, "{}", form.body);
        let cookie = form.set_cookie.expect("the sign-in form's cookie");
        let nonce = cookie
            .strip_prefix("sb_signin=")
            .and_then(|rest| rest.split(';').next())
            .expect("sb_signin=…")
            .to_owned();
        assert_eq!(field_of(&form.body, "csrf"), nonce, "double-submit");
        nonce
    }

    /// Posts `token` to the sign-in form as a browser does (the form's
    /// nonce in its field and its cookie); the answer as it is.
    pub async fn try_sign_in(&self, token: &str) -> Page {
        let nonce = self.sign_in_form().await;
        let body =
            serde_urlencoded::to_string([("csrf", nonce.as_str()), ("token", token)]).unwrap();
        let resp = self
            .request(reqwest::Method::POST, "/board/sign-in")
            .header(COOKIE, format!("sb_signin={nonce}"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .unwrap();
        Self::page(resp).await
    }

    /// Signs in with `token`; keeps the session cookie.
    pub async fn sign_in(&mut self, token: &str) -> Page {
        let page = self.try_sign_in(token).await;
        assert_eq!(page.status, 303, "sign-in: {}", page.body);
        let set = page.set_cookie.clone().expect("a cookie");
        match set
            .strip_prefix("sb_board=")
            .and_then(|rest| rest.split(';').next())
        {
            Some(value) => self.cookie = Some(value.to_owned()),
            // Signed in with this token already: the session stays.
            None => assert!(self.cookie.is_some(), "no session cookie: {set}"),
        }
        page
    }

    /// The CSRF token of the signed-in pages' forms.
    pub async fn csrf(&self) -> String {
        let page = self.get("/board/tokens").await;
        assert_eq!(page.status, 200);
        csrf_of(&page.body)
    }
}

/// The one-time token of the first create form on a page (`name="nonce"`).
pub fn nonce_of(html: &str) -> String {
    let marker = r#"name="nonce" value=""#;
    let start = html.find(marker).expect("a nonce field") + marker.len();
    let end = start + html[start..].find('"').expect("the nonce's end");
    html[start..end].to_owned()
}

/// The value of the first hidden field `name` of a page.
pub fn field_of(html: &str, name: &str) -> String {
    let marker = format!(r#"name="{name}" value=""#);
    let start = html.find(&marker).expect("the field") + marker.len();
    let end = start + html[start..].find('"').expect("the value's end");
    html[start..end].to_owned()
}

pub fn csrf_of(html: &str) -> String {
    let marker = r#"name="csrf" value=""#;
    let start = html.find(marker).expect("a CSRF field") + marker.len();
    html[start..start + 64].to_owned()
}

/// An SSE response read event by event: (event name, data).
pub struct Events {
    response: reqwest::Response,
    buffered: String,
}

impl Events {
    pub async fn next(&mut self, within: Duration) -> Option<(String, String)> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(end) = self.buffered.find("\n\n") {
                let block: String = self.buffered.drain(..end + 2).collect();
                let field = |name: &str| {
                    block
                        .lines()
                        .find_map(|l| l.strip_prefix(name))
                        .map(|v| v.trim().to_owned())
                };
                match (field("event:"), field("data:")) {
                    (Some(event), data) => return Some((event, data.unwrap_or_default())),
                    _ => continue, // a keep-alive comment
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.response.chunk()).await {
                Ok(Ok(Some(chunk))) => self.buffered.push_str(&String::from_utf8_lossy(&chunk)),
                _ => return None,
            }
        }
    }

    /// Waits for a `changed` event whose data names `data`, skipping others.
    pub async fn expect_changed(&mut self, data: &str, within: Duration) {
        let deadline = Instant::now() + within;
        while let Some((event, got)) = self
            .next(deadline.saturating_duration_since(Instant::now()))
            .await
        {
            if event == "changed" && got.split(' ').any(|kind| kind == data) {
                return;
            }
        }
        panic!("no `changed: {data}` within {within:?}");
    }
}

pub async fn open_events(board: &Board) -> Events {
    let resp = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .get(format!("{}/board/events", board.base))
        .header(
            "cookie",
            format!("sb_board={}", board.cookie.as_deref().unwrap()),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    Events {
        response: resp,
        buffered: String::new(),
    }
}
