//! `hash_text` and `encode_decode`: digests and the common text encodings.

use base64::Engine;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::{DecodePaddingMode, general_purpose};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use serde_json::{Value, json};
use sha2::Digest;

use super::{Args, ToolError, ToolInfo};

/// Longest input accepted, in bytes.
const MAX_INPUT: usize = 1024 * 1024;

pub(super) fn hash_info() -> ToolInfo {
    ToolInfo::new(
        "hash_text",
        "utilities",
        "Hash text (UTF-8) with md5, sha1, sha256 or sha512 and return the hex digest. md5 and sha1 are \
         for checksums only, not security.",
        json!({
            "type": "object",
            "properties": {
                "text": {"type": "string", "description": "the text to hash"},
                "algorithm": {"type": "string", "enum": ["md5", "sha1", "sha256", "sha512"], "description": "default sha256"}
            },
            "required": ["text"],
            "additionalProperties": false
        }),
    )
    .tags(&["checksum", "digest", "md5", "sha", "fingerprint"])
}

pub(super) fn hash_text(arguments: &Value) -> Result<String, ToolError> {
    let args = Args::new(arguments);
    let text = input(&args)?;
    let algorithm = args.opt_str("algorithm").unwrap_or("sha256");
    let digest = match algorithm.to_ascii_lowercase().replace('-', "").as_str() {
        "md5" => hex(&md5::Md5::digest(text)),
        "sha1" => hex(&sha1::Sha1::digest(text)),
        "sha256" => hex(&sha2::Sha256::digest(text)),
        "sha512" => hex(&sha2::Sha512::digest(text)),
        other => {
            return Err(ToolError::InvalidArguments(format!(
                "unknown algorithm {other:?}; use md5, sha1, sha256 or sha512"
            )));
        }
    };
    Ok(json!({"algorithm": algorithm, "hex": digest}).to_string())
}

pub(super) fn encode_info() -> ToolInfo {
    ToolInfo::new(
        "encode_decode",
        "utilities",
        "Encode text to, or decode it from, base64, base64url (URL-safe, no padding), url (percent-encoding) or hex.",
        json!({
            "type": "object",
            "properties": {
                "text": {"type": "string", "description": "the input"},
                "format": {"type": "string", "enum": ["base64", "base64url", "url", "hex"]},
                "direction": {"type": "string", "enum": ["encode", "decode"], "description": "default encode"}
            },
            "required": ["text", "format"],
            "additionalProperties": false
        }),
    )
    .tags(&["base64", "urlencode", "percent", "hex", "decode", "encode", "escape"])
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

pub(super) fn encode_decode(arguments: &Value) -> Result<String, ToolError> {
    let args = Args::new(arguments);
    let text = input(&args)?;
    let format = args.str("format")?;
    let direction = args.opt_str("direction").unwrap_or("encode");
    let result = match (format, direction) {
        ("base64", "encode") => general_purpose::STANDARD.encode(text),
        ("base64url", "encode") => general_purpose::URL_SAFE_NO_PAD.encode(text),
        ("url", "encode") => utf8_percent_encode(text, URL_ESCAPE).to_string(),
        ("hex", "encode") => hex(text.as_bytes()),
        ("base64" | "base64url", "decode") => {
            let engine = if format == "base64" {
                &BASE64
            } else {
                &BASE64URL
            };
            let cleaned: String = text.chars().filter(|c| !c.is_whitespace()).collect();
            let bytes = engine
                .decode(cleaned)
                .map_err(|e| ToolError::InvalidArguments(format!("not valid {format}: {e}")))?;
            return decoded(format, direction, bytes);
        }
        ("url", "decode") => {
            let bytes: Vec<u8> = percent_decode_str(text).collect();
            return decoded(format, direction, bytes);
        }
        ("hex", "decode") => return decoded(format, direction, unhex(text)?),
        (_, "encode" | "decode") => {
            return Err(ToolError::InvalidArguments(format!(
                "unknown format {format:?}; use base64, base64url, url or hex"
            )));
        }
        _ => {
            return Err(ToolError::InvalidArguments(format!(
                "unknown direction {direction:?}; use encode or decode"
            )));
        }
    };
    Ok(json!({"format": format, "direction": direction, "result": result}).to_string())
}

/// Decoded bytes as text, or as hex when they are not UTF-8.
fn decoded(format: &str, direction: &str, bytes: Vec<u8>) -> Result<String, ToolError> {
    Ok(match String::from_utf8(bytes) {
        Ok(text) => json!({"format": format, "direction": direction, "result": text}),
        Err(err) => json!({
            "format": format,
            "direction": direction,
            "result": null,
            "note": "the decoded bytes are not UTF-8 text; shown as hex",
            "hex": hex(err.as_bytes()),
        }),
    }
    .to_string())
}

fn input<'a>(args: &Args<'a>) -> Result<&'a str, ToolError> {
    let text = args.opt_str("text").ok_or_else(|| {
        ToolError::InvalidArguments("`text` is required and must be a string".into())
    })?;
    if text.len() > MAX_INPUT {
        return Err(ToolError::InvalidArguments(format!(
            "`text` is longer than {MAX_INPUT} bytes"
        )));
    }
    Ok(text)
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
    use super::*;

    fn result(out: Result<String, ToolError>) -> Value {
        serde_json::from_str(&out.expect("ok")).expect("json")
    }

    #[test]
    fn hashes_match_known_digests() {
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
            let out = result(hash_text(&json!({"text": "abc", "algorithm": algorithm})));
            assert_eq!(out["hex"], digest, "{algorithm}");
        }
        let out = result(hash_text(&json!({"text": ""})));
        assert_eq!(out["algorithm"], "sha256");
        assert!(hash_text(&json!({"text": "a", "algorithm": "crc32"})).is_err());
    }

    #[test]
    fn encodes_and_decodes_round_trip() {
        let text = "héllo wörld/?&=~";
        for format in ["base64", "base64url", "url", "hex"] {
            let encoded = result(encode_decode(&json!({"text": text, "format": format})));
            let encoded = encoded["result"].as_str().expect("text").to_string();
            let decoded = result(encode_decode(
                &json!({"text": encoded, "format": format, "direction": "decode"}),
            ));
            assert_eq!(decoded["result"], text, "{format}: {encoded}");
        }
        let out = result(encode_decode(&json!({"text": "a b&c", "format": "url"})));
        assert_eq!(out["result"], "a%20b%26c");
        let out = result(encode_decode(&json!({"text": "hi?", "format": "base64"})));
        assert_eq!(out["result"], "aGk/");
        let out = result(encode_decode(
            &json!({"text": "hi?", "format": "base64url"}),
        ));
        assert_eq!(out["result"], "aGk_");
        let out = result(encode_decode(
            &json!({"text": "aGk", "format": "base64", "direction": "decode"}),
        ));
        assert_eq!(out["result"], "hi", "padding is optional when decoding");
        let out = result(encode_decode(
            &json!({"text": "ff00", "format": "hex", "direction": "decode"}),
        ));
        assert_eq!(out["result"], Value::Null);
        assert_eq!(out["hex"], "ff00");
    }

    #[test]
    fn invalid_input_is_explained() {
        let decode = |text: &str, format: &str| {
            encode_decode(&json!({"text": text, "format": format, "direction": "decode"}))
                .expect_err("invalid")
                .to_string()
        };
        assert!(decode("not*base64", "base64").contains("not valid base64"));
        assert!(decode("abc", "hex").contains("odd number"));
        assert!(decode("zz", "hex").contains("not valid hex"));
        let err = encode_decode(&json!({"text": "x", "format": "rot13"})).expect_err("format");
        assert!(err.to_string().contains("unknown format"));
        let err = encode_decode(&json!({"text": "x", "format": "hex", "direction": "sideways"}))
            .expect_err("direction");
        assert!(err.to_string().contains("unknown direction"));
    }
}
