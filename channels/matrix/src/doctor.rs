//! `hearth doctor`'s look at the homeserver: reachable, the saved session's token still
//! accepted, and whether the device is cross-signed. Plain client-API requests with the saved
//! token: no login (that would make a new device) and no sync (that would take events from the
//! running daemon).

use std::time::Duration;

use matrix_sdk::reqwest;
use serde_json::{Value, json};

use crate::MatrixSettings;

const TIMEOUT: Duration = Duration::from_secs(15);

pub(crate) async fn live_checks(settings: &MatrixSettings) -> Vec<Result<String, String>> {
    let client = match hearth_channel::http_client::builder()
        .timeout(TIMEOUT)
        .build()
    {
        Ok(client) => client,
        Err(e) => return vec![Err(format!("cannot set up an HTTP client: {e}"))],
    };
    let base = settings.homeserver.trim_end_matches('/');
    let api = Api { client, base };
    let versions = match api.get("/_matrix/client/versions", None).await {
        Ok(body) => {
            let newest = body["versions"]
                .as_array()
                .and_then(|v| v.last())
                .and_then(Value::as_str)
                .unwrap_or("?")
                .to_string();
            Ok(format!(
                "homeserver {base} answers (client API up to {newest})"
            ))
        }
        Err(e) => {
            return vec![Err(format!(
                "homeserver {base}: {e} — fix: check homeserver (the client API URL, often https://matrix.<domain>)"
            ))];
        }
    };
    let Some(session) = crate::session::saved_session(&settings.data_dir) else {
        return vec![
            versions,
            Ok(format!(
                "not logged in yet: the first `hearth run` logs in as {} with password_env and keeps that device",
                settings.user
            )),
        ];
    };
    let token = session.tokens.access_token.as_str();
    let user = session.meta.user_id.to_string();
    let device = session.meta.device_id.to_string();
    let whoami = match api
        .get("/_matrix/client/v3/account/whoami", Some(token))
        .await
    {
        Ok(body) if body["user_id"] == user.as_str() => Ok(format!(
            "the saved session is accepted: {user}, device {device}"
        )),
        Ok(body) => Err(format!(
            "the saved session belongs to {}, not {user} — fix: remove {} so the next start logs in afresh",
            body["user_id"],
            settings.data_dir.join("session.json").display()
        )),
        Err(e) => {
            return vec![
                versions,
                Err(format!(
                    "the saved session (device {device}): {e} — fix: none needed if the token was revoked on purpose: the next `hearth run` sets the old device aside and logs in as a new one"
                )),
            ];
        }
    };
    let keys = api
        .post(
            "/_matrix/client/v3/keys/query",
            token,
            json!({"device_keys": {user.as_str(): [device.as_str()]}}),
        )
        .await;
    let cross_signing = match keys {
        Ok(keys) => cross_signing(&keys, &user, &device, settings.recovery_key.is_some()),
        Err(e) => Err(format!("asking for the device's keys: {e}")),
    };
    vec![versions, whoami, cross_signing]
}

/// What `/keys/query` says of the device: signed by the account's self-signing key or not.
fn cross_signing(
    keys: &Value,
    user: &str,
    device: &str,
    has_recovery_key: bool,
) -> Result<String, String> {
    let self_signing: Vec<&str> = keys["self_signing_keys"][user]["keys"]
        .as_object()
        .map(|k| k.keys().map(String::as_str).collect())
        .unwrap_or_default();
    let signatures = &keys["device_keys"][user][device]["signatures"][user];
    let signed = self_signing
        .iter()
        .any(|key| signatures.get(*key).is_some());
    match (signed, self_signing.is_empty(), has_recovery_key) {
        (true, _, _) => Ok(format!(
            "cross-signing: device {device} is signed by the account's self-signing key"
        )),
        (false, true, false) => Ok(
            "cross-signing: not set up for this account (no recovery_key_env): encrypted rooms work, people see the device as unverified".to_string(),
        ),
        (false, true, true) => Err(
            "cross-signing: recovery_key_env is set but the account has no cross-signing keys — fix: set up cross-signing (Element: Settings → Security) and give its recovery key".to_string(),
        ),
        (false, false, false) => Ok(format!(
            "cross-signing: device {device} is not signed (no recovery_key_env): people see it as unverified"
        )),
        (false, false, true) => Err(format!(
            "cross-signing: device {device} is not signed yet although recovery_key_env is set — fix: check the recovery key, then restart hearth (it signs its device at start)"
        )),
    }
}

struct Api<'a> {
    client: reqwest::Client,
    base: &'a str,
}

impl Api<'_> {
    async fn get(&self, path: &str, token: Option<&str>) -> Result<Value, String> {
        let mut request = self.client.get(format!("{}{path}", self.base));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        read(request).await
    }

    async fn post(&self, path: &str, token: &str, body: Value) -> Result<Value, String> {
        let request = self
            .client
            .post(format!("{}{path}", self.base))
            .bearer_auth(token)
            .header("content-type", "application/json")
            .body(body.to_string());
        read(request).await
    }
}

async fn read(request: reqwest::RequestBuilder) -> Result<Value, String> {
    let response = request.send().await.map_err(|e| {
        format!(
            "no answer ({})",
            hearth_channel::error_chain(&e.without_url())
        )
    })?;
    let status = response.status();
    let text = response
        .text()
        .await
        .map_err(|e| format!("the answer broke off ({e})"))?;
    let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    if !status.is_success() {
        let reason = body["errcode"].as_str().unwrap_or("");
        return Err(format!("HTTP {} {reason}", status.as_u16())
            .trim_end()
            .to_string());
    }
    if body.is_null() {
        return Err("the answer is not JSON".to_string());
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    const USER: &str = "@hearth:example.org";

    fn keys(signed: bool, account_has_keys: bool) -> Value {
        let mut keys = json!({
            "device_keys": {USER: {"DEV": {"signatures": {USER: {"ed25519:DEV": "sig"}}}}},
            "self_signing_keys": {},
        });
        if account_has_keys {
            keys["self_signing_keys"] = json!({USER: {"keys": {"ed25519:SSK": "key"}}});
        }
        if signed {
            keys["device_keys"][USER]["DEV"]["signatures"][USER]["ed25519:SSK"] = json!("sig");
        }
        keys
    }

    #[test]
    fn reads_whether_the_device_is_cross_signed() {
        assert!(cross_signing(&keys(true, true), USER, "DEV", true).is_ok());
        assert!(cross_signing(&keys(false, true), USER, "DEV", true).is_err());
        assert!(cross_signing(&keys(false, true), USER, "DEV", false).is_ok());
        assert!(cross_signing(&keys(false, false), USER, "DEV", true).is_err());
        let none = cross_signing(&keys(false, false), USER, "DEV", false).expect("fine");
        assert!(none.contains("not set up"), "{none}");
        // A server answer without the parts is "not signed", never a panic.
        assert!(cross_signing(&json!({}), USER, "DEV", true).is_err());
        assert!(cross_signing(&json!([1, 2]), USER, "DEV", false).is_ok());
    }
}
