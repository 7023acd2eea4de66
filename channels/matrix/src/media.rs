//! Files by reference: the sync loop never downloads a file. An `m.image`/`m.file`/… event
//! becomes an [`Attachment`] whose `source` names the file (the plain `mxc://` URI, or the JSON
//! of the event's `file` object with its key, iv and hashes for an encrypted room) and whose
//! `size` is the one the sender declared. The daemon calls [`fetch`] only after it checked the
//! sender, with its byte limit: a file declared larger is refused before any request, the body
//! is streamed from the authenticated media endpoint (`/_matrix/client/v1/media/download`) and
//! given up on as soon as more than the limit arrived, and an encrypted file is checked against
//! its SHA-256 and decrypted only then (so an encrypted file briefly needs twice its size).

use std::io::Read;
use std::time::Duration;

use hearth_channel::{Attachment, ChannelError};
use matrix_sdk::Client;
use matrix_sdk::ruma::OwnedMxcUri;
use matrix_sdk::ruma::events::room::EncryptedFile;
use serde_json::Value;

/// How long the homeserver may take to start answering a download.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a download may go without a byte arriving.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Where a file message's content lives, as the opaque `source` string the daemon hands back:
/// the `mxc://` URI of a plain file, the JSON of the `file` object of an encrypted one.
pub(crate) fn source_of(content: &Value) -> Option<String> {
    if let Some(file) = content.get("file").filter(|f| f.is_object()) {
        return Some(file.to_string());
    }
    content["url"]
        .as_str()
        .filter(|url| url.starts_with("mxc://"))
        .map(str::to_owned)
}

/// A parsed `source`.
pub(crate) enum Source {
    Plain(OwnedMxcUri),
    Encrypted(Box<EncryptedFile>),
}

impl Source {
    pub(crate) fn parse(source: &str) -> Result<Self, ChannelError> {
        let source = if source.starts_with('{') {
            let file: EncryptedFile = serde_json::from_str(source).map_err(|e| {
                ChannelError::rejected(format!("the encrypted file's description is unusable: {e}"))
            })?;
            Self::Encrypted(Box::new(file))
        } else {
            Self::Plain(OwnedMxcUri::from(source))
        };
        source.uri().validate().map_err(|e| {
            ChannelError::rejected(format!("`{}` is not a Matrix file URI: {e}", source.uri()))
        })?;
        Ok(source)
    }

    fn uri(&self) -> &OwnedMxcUri {
        match self {
            Self::Plain(uri) => uri,
            Self::Encrypted(file) => &file.url,
        }
    }
}

/// The file `attachment` names, refused when it names none or declares a size over `max_bytes`
/// (before any request).
pub(crate) fn prepare(attachment: &Attachment, max_bytes: u64) -> Result<Source, ChannelError> {
    let Some(source) = attachment.source.as_deref() else {
        return Err(ChannelError::rejected(
            "the attachment names no Matrix file to fetch",
        ));
    };
    let source = Source::parse(source)?;
    if let Some(size) = attachment.size.filter(|size| *size > max_bytes) {
        return Err(over_limit(size, max_bytes));
    }
    Ok(source)
}

/// The bytes of the file `source` names, at most `max_bytes` of them: see the module's doc.
pub(crate) async fn fetch(
    client: &Client,
    source: Source,
    max_bytes: u64,
) -> Result<Vec<u8>, ChannelError> {
    let ciphertext = download(client, source.uri(), max_bytes).await?;
    match source {
        Source::Plain(_) => Ok(ciphertext),
        Source::Encrypted(file) => decrypt(ciphertext, *file),
    }
}

fn over_limit(size: u64, max_bytes: u64) -> ChannelError {
    ChannelError::rejected(format!(
        "a file of {size} bytes is over the limit of {max_bytes} bytes"
    ))
}

/// Streams the file at `uri` from the authenticated media endpoint, giving up once more than
/// `max_bytes` arrived.
async fn download(
    client: &Client,
    uri: &OwnedMxcUri,
    max_bytes: u64,
) -> Result<Vec<u8>, ChannelError> {
    let (server, media_id) = uri
        .parts()
        .map_err(|e| ChannelError::rejected(format!("`{uri}` is not a Matrix file URI: {e}")))?;
    let mut url = client.homeserver();
    url.path_segments_mut()
        .map_err(|()| ChannelError::config("the homeserver URL cannot have a path"))?
        .pop_if_empty()
        .extend([
            "_matrix",
            "client",
            "v1",
            "media",
            "download",
            server.as_str(),
            media_id,
        ]);
    let Some(token) = client.access_token() else {
        return Err(ChannelError::transient(
            "not logged in to the homeserver yet",
        ));
    };
    let request = client.http_client().get(url).bearer_auth(token).send();
    let mut response = match tokio::time::timeout(ANSWER_TIMEOUT, request).await {
        Err(_) => {
            return Err(ChannelError::transient(format!(
                "the homeserver did not answer the download of {uri} within {ANSWER_TIMEOUT:?}"
            )));
        }
        Ok(Err(error)) => {
            return Err(ChannelError::transient(format!(
                "downloading {uri}: {}",
                error.without_url()
            )));
        }
        Ok(Ok(response)) => response,
    };
    let status = response.status();
    if !status.is_success() {
        let message = format!("the homeserver answered {status} to the download of {uri}");
        return Err(match status.as_u16() {
            429 => {
                let mut error = ChannelError::rate_limited(Duration::from_secs(1));
                error.message = message;
                error
            }
            // 401: the session is being renewed by the sync loop; later it works again.
            401 | 408 | 500..=599 => ChannelError::transient(message),
            _ => ChannelError::rejected(message),
        });
    }
    if let Some(length) = response.content_length().filter(|l| *l > max_bytes) {
        return Err(over_limit(length, max_bytes));
    }
    let mut bytes = Vec::new();
    loop {
        let chunk = match tokio::time::timeout(IDLE_TIMEOUT, response.chunk()).await {
            Err(_) => {
                return Err(ChannelError::transient(format!(
                    "the download of {uri} stalled for {IDLE_TIMEOUT:?}"
                )));
            }
            Ok(Err(error)) => {
                return Err(ChannelError::transient(format!(
                    "downloading {uri}: {}",
                    error.without_url()
                )));
            }
            Ok(Ok(None)) => return Ok(bytes),
            Ok(Ok(Some(chunk))) => chunk,
        };
        let total = bytes.len() as u64 + chunk.len() as u64;
        if total > max_bytes {
            return Err(ChannelError::rejected(format!(
                "the file {uri} is over the limit of {max_bytes} bytes (it declared no size)"
            )));
        }
        bytes.extend_from_slice(&chunk);
    }
}

/// Decrypts an encrypted attachment (AES-CTR, so as long as its ciphertext) after checking the
/// ciphertext against the SHA-256 the sender put in the event: a changed file is refused.
fn decrypt(ciphertext: Vec<u8>, file: EncryptedFile) -> Result<Vec<u8>, ChannelError> {
    let mut input = std::io::Cursor::new(ciphertext);
    let mut reader = matrix_sdk_crypto::AttachmentDecryptor::new(&mut input, file.into())
        .map_err(|e| ChannelError::rejected(format!("the encrypted file cannot be read: {e}")))?;
    let mut plain = Vec::new();
    reader
        .read_to_end(&mut plain)
        .map_err(|e| ChannelError::rejected(format!("the encrypted file does not decrypt: {e}")))?;
    Ok(plain)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_of_plain_and_encrypted_files() {
        let plain =
            serde_json::json!({"msgtype": "m.image", "body": "a.png", "url": "mxc://hs/abc"});
        assert_eq!(source_of(&plain).as_deref(), Some("mxc://hs/abc"));
        let not_mxc = serde_json::json!({"msgtype": "m.image", "body": "a.png", "url": "https://evil.example/x"});
        assert_eq!(source_of(&not_mxc), None);
        let encrypted = serde_json::json!({"msgtype": "m.file", "body": "a", "file": {
            "url": "mxc://hs/enc", "v": "v2",
            "key": {"kty": "oct", "key_ops": ["encrypt", "decrypt"], "alg": "A256CTR", "k": "qcHVMSgYg-71CauWBezXI5qkaRb0LuIy-Wx5kIaHMIA", "ext": true},
            "iv": "X85+XgHN+HEAAAAAAAAAAA", "hashes": {"sha256": "MmMyNDk2NjA0ZDFhNGU3YTg1ODdmYzk1ZmI0NjFkYzM"}
        }});
        let source = source_of(&encrypted).unwrap_or_default();
        assert!(
            matches!(Source::parse(&source), Ok(Source::Encrypted(_))),
            "{source}"
        );
        assert!(matches!(
            Source::parse("mxc://hs/abc"),
            Ok(Source::Plain(_))
        ));
    }

    #[test]
    fn malformed_sources_are_refused_for_good() {
        for bad in [
            "",
            "mxc://",
            "mxc://hs",
            "https://hs/abc",
            "{\"url\": 5}",
            "{",
        ] {
            let error = Source::parse(bad)
                .err()
                .unwrap_or_else(|| panic!("{bad:?} parsed"));
            assert!(!error.is_temporary(), "{bad:?}: {error}");
        }
    }
}
