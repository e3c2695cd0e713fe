//! Notify hooks: added, deleted, enabled and tested by the endpoint's human
//! (`docs/doorbells.md`, "Notify hooks"). The signing secret is minted here
//! and returned this once; every change is told to every instance (an
//! endpoint with an enabled hook is hosted on all of them).

use crate::delivery::Delivery;
use crate::delivery::hooks::Delivered;
use crate::domain::Invalid;
use crate::domain::hook::MAX_URL_LEN;
use crate::mint::new_hook_secret;
use crate::store::{Endpoint, Hook, StoreError, StoreResult};

/// A hook just made, with its secret (shown this once).
#[derive(Debug, Clone)]
pub struct IssuedHook {
    pub hook: Hook,
    pub secret: String,
}

/// Checks a hook URL: absolute `http` or `https`, at most
/// [`MAX_URL_LEN`] bytes, a host, no user name or password (a credential
/// in a URL ends up in logs and listings). Returns it as given, trimmed.
pub fn validate_url(url: &str) -> Result<String, Invalid> {
    let url = url.trim();
    if url.is_empty() {
        return Err(Invalid::new("url", "required"));
    }
    if url.len() > MAX_URL_LEN {
        return Err(Invalid::new("url", format!("at most {MAX_URL_LEN} bytes")));
    }
    let parsed = reqwest::Url::parse(url)
        .map_err(|e| Invalid::new("url", format!("not an absolute URL: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(Invalid::new("url", "must be http or https"));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(Invalid::new("url", "has no host"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(Invalid::new(
            "url",
            "must not carry a user name or password; the signature authenticates the sender",
        ));
    }
    Ok(url.to_owned())
}

/// Adds a hook to an active endpoint of the human.
pub async fn add(
    delivery: &Delivery,
    human_id: &str,
    endpoint: &Endpoint,
    url: &str,
) -> StoreResult<IssuedHook> {
    let url = validate_url(url)?;
    if !endpoint.is_active() {
        return Err(StoreError::EndpointRevoked);
    }
    let secret = new_hook_secret();
    let hook = delivery
        .store()
        .create_hook(human_id, &endpoint.id, &url, &secret)
        .await?;
    delivery.hooks_changed(&endpoint.id).await;
    Ok(IssuedHook { hook, secret })
}

/// Deletes a hook; no delivery starts for it from now on.
pub async fn delete(delivery: &Delivery, human_id: &str, id: &str) -> StoreResult<()> {
    let store = delivery.store();
    let hook = store.get_hook(human_id, id).await?;
    store.delete_hook(human_id, id).await?;
    delivery.hooks_changed(&hook.endpoint_id).await;
    Ok(())
}

/// Enables a hook again (a disabled one, after its failures), with its
/// failure count reset.
pub async fn enable(delivery: &Delivery, human_id: &str, id: &str) -> StoreResult<Hook> {
    let hook = delivery.store().enable_hook(human_id, id).await?;
    delivery.hooks_changed(&hook.endpoint_id).await;
    Ok(hook)
}

/// Sends a `test` delivery now (one try, enabled or not) and answers how it
/// went. It is logged with the hook's deliveries and counts neither for
/// nor against the hook.
pub async fn test(delivery: &Delivery, human_id: &str, id: &str) -> StoreResult<Delivered> {
    let target = delivery.store().hook_target(human_id, id).await?;
    Ok(delivery.hooks().test(&target).await)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_http_or_https_with_a_host_and_no_credentials() {
        assert_eq!(
            validate_url(" https://example.com/hook?x=1 ").unwrap(),
            "https://example.com/hook?x=1"
        );
        assert!(validate_url("http://10.0.0.1:8080/").is_ok());
        for bad in [
            "",
            "example.com/hook",
            "ftp://example.com/",
            "file:///etc/passwd",
            "https://user:pw@example.com/",
            "https://user@example.com/",
            "unix:/run/x.sock",
        ] {
            let err = validate_url(bad).unwrap_err();
            assert_eq!(err.field, "url", "{bad}");
        }
        let long = format!("https://example.com/{}", "a".repeat(MAX_URL_LEN));
        assert_eq!(validate_url(&long).unwrap_err().field, "url");
    }
}
