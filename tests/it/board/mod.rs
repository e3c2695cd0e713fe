//! The board (`/`, `/board/…`) end to end: HTTP-level checks of sign-in,
//! the session cookie, CSRF, tenant isolation, escaping and the live
//! stream (`http.rs`), and the whole board in Debian's Chromium
//! (`browser.rs`).

mod browser;
mod http;

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
        let (status, location, set_cookie) =
            (resp.status().as_u16(), header(LOCATION), header(SET_COOKIE));
        let csp = header(reqwest::header::CONTENT_SECURITY_POLICY);
        let cache_control = header(reqwest::header::CACHE_CONTROL);
        Page {
            status,
            location,
            set_cookie,
            csp,
            cache_control,
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

    /// Signs in with `token`; keeps the session cookie.
    pub async fn sign_in(&mut self, token: &str) -> Page {
        let page = self.post("/board/sign-in", &[("token", token)]).await;
        assert_eq!(page.status, 303, "sign-in: {}", page.body);
        let set = page.set_cookie.clone().expect("a session cookie");
        let value = set
            .strip_prefix("sb_board=")
            .and_then(|rest| rest.split(';').next())
            .expect("sb_board=…")
            .to_owned();
        self.cookie = Some(value);
        page
    }

    /// The CSRF token of the signed-in pages' forms.
    pub async fn csrf(&self) -> String {
        let page = self.get("/board/tokens").await;
        assert_eq!(page.status, 200);
        csrf_of(&page.body)
    }
}

pub fn csrf_of(html: &str) -> String {
    let marker = r#"name="csrf" value=""#;
    let start = html.find(marker).expect("a CSRF field") + marker.len();
    html[start..start + 64].to_owned()
}
