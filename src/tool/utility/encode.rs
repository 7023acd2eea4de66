//! `hash_text` and `encode_decode`: digests and the common text encodings.

use base64::Engine;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::{DecodePaddingMode, general_purpose};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::Digest;

use super::{GROUP, Input};
use crate::tool::{ToolContext, ToolError, TypedTool};

/// Longest input accepted, in bytes.
const MAX_INPUT: usize = 1024 * 1024;

#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Algorithm {
    Md5,
    Sha1,
    #[default]
    Sha256,
    Sha512,
}

/// Hash text (UTF-8) with md5, sha1, sha256 or sha512 and return the hex digest. md5 and sha1
/// are for checksums only, not security.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct HashText {
    /// the text to hash
    text: Input<MAX_INPUT>,
    /// default sha256
    algorithm: Option<Algorithm>,
}

impl TypedTool for HashText {
    const NAME: &'static str = "hash_text";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "checksum, digest, md5, sha, fingerprint";
    type Output = Value;

    async fn run(self, _: &ToolContext) -> Result<Value, ToolError> {
        let text = self.text.0;
        let algorithm = self.algorithm.unwrap_or_default();
        let digest = match algorithm {
            Algorithm::Md5 => hex(&md5::Md5::digest(text)),
            Algorithm::Sha1 => hex(&sha1::Sha1::digest(text)),
            Algorithm::Sha256 => hex(&sha2::Sha256::digest(text)),
            Algorithm::Sha512 => hex(&sha2::Sha512::digest(text)),
        };
        Ok(json!({"algorithm": algorithm, "hex": digest}))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Format {
    Base64,
    Base64url,
    Url,
    Hex,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Direction {
    #[default]
    Encode,
    Decode,
}

/// Encode text to, or decode it from, base64, base64url (URL-safe, no padding), url
/// (percent-encoding) or hex.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct EncodeDecode {
    /// the input
    text: Input<MAX_INPUT>,
    format: Format,
    /// default encode
    direction: Option<Direction>,
}

/// RFC 3986 unreserved characters stay as they are; everything else is percent-encoded.
const URL_ESCAPE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// Decoding accepts input with or without `=` padding.
const LENIENT: GeneralPurposeConfig =
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
const BASE64: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::STANDARD, LENIENT);
const BASE64URL: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::URL_SAFE, LENIENT);

impl TypedTool for EncodeDecode {
    const NAME: &'static str = "encode_decode";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "base64, urlencode, percent, hex, decode, encode, escape";
    type Output = Value;

    async fn run(self, _: &ToolContext) -> Result<Value, ToolError> {
        let (text, format) = (self.text.0, self.format);
        let direction = self.direction.unwrap_or_default();
        let result = match (format, direction) {
            (Format::Base64, Direction::Encode) => general_purpose::STANDARD.encode(text),
            (Format::Base64url, Direction::Encode) => general_purpose::URL_SAFE_NO_PAD.encode(text),
            (Format::Url, Direction::Encode) => utf8_percent_encode(&text, URL_ESCAPE).to_string(),
            (Format::Hex, Direction::Encode) => hex(text.as_bytes()),
            (Format::Base64 | Format::Base64url, Direction::Decode) => {
                let engine = if format == Format::Base64 {
                    &BASE64
                } else {
                    &BASE64URL
                };
                let cleaned: String = text.chars().filter(|c| !c.is_whitespace()).collect();
                let bytes = engine.decode(cleaned).map_err(|e| {
                    let name = if format == Format::Base64 {
                        "base64"
                    } else {
                        "base64url"
                    };
                    ToolError::InvalidArguments(format!("not valid {name}: {e}"))
                })?;
                return Ok(decoded(format, bytes));
            }
            (Format::Url, Direction::Decode) => {
                return Ok(decoded(format, percent_decode_str(&text).collect()));
            }
            (Format::Hex, Direction::Decode) => return Ok(decoded(format, unhex(&text)?)),
        };
        Ok(json!({"format": format, "direction": direction, "result": result}))
    }
}

/// Decoded bytes as text, or as hex when they are not UTF-8.
fn decoded(format: Format, bytes: Vec<u8>) -> Value {
    let direction = Direction::Decode;
    match String::from_utf8(bytes) {
        Ok(text) => json!({"format": format, "direction": direction, "result": text}),
        Err(err) => json!({
            "format": format,
            "direction": direction,
            "result": null,
            "note": "the decoded bytes are not UTF-8 text; shown as hex",
            "hex": hex(err.as_bytes()),
        }),
    }
}

/// Lower-case hex digits of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

fn unhex(text: &str) -> Result<Vec<u8>, ToolError> {
    let digits: Vec<u8> = text
        .trim()
        .trim_start_matches("0x")
        .bytes()
        .filter(|b| !b.is_ascii_whitespace() && *b != b':')
        .collect();
    if !digits.len().is_multiple_of(2) {
        return Err(ToolError::InvalidArguments(
            "not valid hex: an odd number of digits".into(),
        ));
    }
    digits
        .chunks(2)
        .enumerate()
        .map(|(i, pair)| {
            let value = |d: u8| char::from(d).to_digit(16);
            match (value(pair[0]), value(pair[1])) {
                (Some(high), Some(low)) => Ok((high * 16 + low) as u8),
                _ => Err(ToolError::InvalidArguments(format!(
                    "not valid hex: {:?} at byte {i}",
                    String::from_utf8_lossy(pair)
                ))),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::call;
    use super::*;

    #[tokio::test]
    async fn hashes_match_known_digests() {
        let cases = [
            ("md5", "900150983cd24fb0d6963f7d28e17f72"),
            ("sha1", "a9993e364706816aba3e25717850c26c9cd0d89d"),
            (
                "sha256",
                "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            ),
            (
                "sha512",
                "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f",
            ),
        ];
        for (algorithm, digest) in cases {
            let out = call("hash_text", json!({"text": "abc", "algorithm": algorithm}))
                .await
                .expect("ok");
            assert_eq!(out["hex"], digest, "{algorithm}");
        }
        let out = call("hash_text", json!({"text": ""})).await.expect("ok");
        assert_eq!(out["algorithm"], "sha256");
        assert!(
            call("hash_text", json!({"text": "a", "algorithm": "crc32"}))
                .await
                .is_err()
        );
    }

    #[tokio::test]
    async fn encodes_and_decodes_round_trip() {
        let text = "héllo wörld/?&=~";
        for format in ["base64", "base64url", "url", "hex"] {
            let encoded = call("encode_decode", json!({"text": text, "format": format}))
                .await
                .expect("ok");
            let encoded = encoded["result"].as_str().expect("text").to_string();
            let decoded = call(
                "encode_decode",
                json!({"text": encoded, "format": format, "direction": "decode"}),
            )
            .await
            .expect("ok");
            assert_eq!(decoded["result"], text, "{format}: {encoded}");
        }
        let out = call("encode_decode", json!({"text": "a b&c", "format": "url"}))
            .await
            .expect("ok");
        assert_eq!(out["result"], "a%20b%26c");
        let out = call("encode_decode", json!({"text": "hi?", "format": "base64"}))
            .await
            .expect("ok");
        assert_eq!(out["result"], "aGk/");
        let out = call(
            "encode_decode",
            json!({"text": "hi?", "format": "base64url"}),
        )
        .await
        .expect("ok");
        assert_eq!(out["result"], "aGk_");
        let out = call(
            "encode_decode",
            json!({"text": "aGk", "format": "base64", "direction": "decode"}),
        )
        .await
        .expect("ok");
        assert_eq!(out["result"], "hi", "padding is optional when decoding");
        let out = call(
            "encode_decode",
            json!({"text": "ff00", "format": "hex", "direction": "decode"}),
        )
        .await
        .expect("ok");
        assert_eq!(out["result"], Value::Null);
        assert_eq!(out["hex"], "ff00");
    }

    #[tokio::test]
    async fn invalid_input_is_explained() {
        let decode = async |text: &str, format: &str| {
            call(
                "encode_decode",
                json!({"text": text, "format": format, "direction": "decode"}),
            )
            .await
            .expect_err("invalid")
            .to_string()
        };
        assert!(
            decode("not*base64", "base64")
                .await
                .contains("not valid base64")
        );
        assert!(decode("abc", "hex").await.contains("odd number"));
        assert!(decode("zz", "hex").await.contains("not valid hex"));
        let err = call("encode_decode", json!({"text": "x", "format": "rot13"}))
            .await
            .expect_err("format");
        assert!(
            err.to_string()
                .contains("`format`: unknown variant `rot13`"),
            "{err}"
        );
        let err = call(
            "encode_decode",
            json!({"text": "x", "format": "hex", "direction": "sideways"}),
        )
        .await
        .expect_err("direction");
        assert!(err.to_string().contains("`direction`"), "{err}");
        let big = "x".repeat(MAX_INPUT + 1);
        let err = call("hash_text", json!({"text": big}))
            .await
            .expect_err("too long");
        assert!(err.to_string().contains("`text`: is longer than"), "{err}");
    }
}
