//! Whether the owner's own receiving server vouches for a mail's `From`.
//!
//! The server checks SPF, DKIM and DMARC and records the verdict in an `Authentication-Results`
//! header naming itself (RFC 8601). hearth believes such a header only when:
//! - it carries the configured authserv-id;
//! - it stands in the part of the header the receiving side wrote: above the first `Received:`
//!   header that records the mail arriving from another machine. Hops inside the delivery
//!   system above it (a `Received:` without a `from` clause as Gmail writes, local delivery
//!   `with LMTP` as Dovecot and Cyrus write, a hop from a loopback or private address) do not
//!   end that part. Everything below was written by the sender, who can copy any verdict there;
//! - no verdict of the configured server about the From domain that is not a pass stands
//!   above it past a `Received:` (a failing verdict of ours ends the search at the next hop);
//! - its result is a pass *for the From domain*: `dmarc=pass` with `header.from` that domain,
//!   `dkim=pass` with `header.d` (or the domain of `header.i`) that domain, `spf=pass` with
//!   `smtp.mailfrom` of that domain.
//!
//! `ARC-Authentication-Results` in that part count too: Gmail records its verdict there above
//! its own `Received:`, and its plain `Authentication-Results` below it. A mail whose `From`
//! is missing, given twice, or holding several addresses is never verified: which one would
//! the verdict be about?
//!
//! Headers are read as RFC 8601 defines them: comments in parentheses (nested, with escapes)
//! are dropped, quoted strings are one value and may hold `;` or `(`, and `=` may have spaces
//! around it. OpenDKIM's `dkim=pass (2048-bit key; unprotected) header.d=…` is one result.

use std::net::IpAddr;

use mail_parser::Message;

/// The one sender address of a mail, lowercased, or `None` when `From` is missing, appears
/// more than once, or holds more or less than one address.
pub(crate) fn single_from(message: &Message<'_>) -> Option<String> {
    let headers = message
        .headers()
        .iter()
        .filter(|h| h.name().eq_ignore_ascii_case("From"))
        .count();
    if headers != 1 {
        return None;
    }
    let from = message.from()?;
    let mut addresses = from.iter();
    let first = addresses.next()?;
    if addresses.next().is_some() {
        return None;
    }
    first
        .address()
        .map(|a| a.trim().to_ascii_lowercase())
        .filter(|a| a.contains('@'))
}

/// Whether `server`'s verdicts in the receiving side's part of the header vouch for `from`
/// (an address, lowercased).
pub(crate) fn authenticated(message: &Message<'_>, server: &str, from: &str) -> bool {
    let Some((_, domain)) = from.rsplit_once('@') else {
        return false;
    };
    let domain = normalise_domain(domain);
    let raw = message.raw_message();
    let value = |h: &mail_parser::Header<'_>| {
        raw.get(h.offset_start() as usize..h.offset_end() as usize)
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .unwrap_or_default()
    };
    // Our server said no about this domain: its other headers of the same hop (one milter
    // per method writes one each) may still pass, but nothing past the next `Received:` may
    // overrule it there; a pass further down can only be a copy the sender wrote.
    let mut refused = false;
    for header in message.headers() {
        let name = header.name();
        if name.eq_ignore_ascii_case("Received") {
            if refused {
                return false;
            }
            if is_internal_hop(&value(header)) {
                continue;
            }
            // The mail came in from outside here: what stands below, the sender wrote.
            return false;
        }
        let arc = name.eq_ignore_ascii_case("ARC-Authentication-Results");
        if !arc && !name.eq_ignore_ascii_case("Authentication-Results") {
            continue;
        }
        let Some(results) = parse(&value(header), arc) else {
            continue;
        };
        if !results
            .authserv_id
            .as_deref()
            .is_some_and(|id| id.eq_ignore_ascii_case(server))
        {
            continue;
        }
        if results.results.iter().any(|r| r.passes_for(&domain)) {
            return true;
        }
        if results.results.iter().any(|r| r.fails_for(&domain)) {
            refused = true;
        }
    }
    false
}

/// One `Authentication-Results` header, parsed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Results {
    /// Who wrote the verdicts; `None` when the header names no one (Exchange Online writes
    /// `Authentication-Results: spf=pass …` without one, against RFC 8601).
    pub authserv_id: Option<String>,
    pub results: Vec<MethodResult>,
}

/// `dkim=pass header.d=example.org`: a method, its result, and the properties.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct MethodResult {
    /// Lowercased, without a version (`dkim`, not `dkim/1`).
    pub method: String,
    /// Lowercased.
    pub result: String,
    /// `(ptype.property, value)`, the key lowercased.
    pub properties: Vec<(String, String)>,
}

impl MethodResult {
    fn property(&self, key: &str) -> Option<&str> {
        self.properties
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Whether this is a pass about `domain` (normalised).
    fn passes_for(&self, domain: &str) -> bool {
        self.result == "pass" && self.is_about(domain)
    }

    /// Whether this is a verdict other than a pass about `domain` (normalised): a DMARC result
    /// of any other kind (it is the verdict on the `From` domain itself), or an SPF or DKIM one
    /// naming that domain.
    fn fails_for(&self, domain: &str) -> bool {
        self.result != "pass" && (self.method == "dmarc" || self.is_about(domain))
    }

    /// Whether the result is about `domain`: the property its method reports the domain in.
    fn is_about(&self, domain: &str) -> bool {
        let about = |key: &str| {
            self.property(key)
                .is_some_and(|v| normalise_domain(v.rsplit('@').next().unwrap_or("")) == domain)
        };
        match self.method.as_str() {
            "dmarc" => about("header.from"),
            "dkim" => about("header.d") || about("header.i"),
            "spf" => about("smtp.mailfrom"),
            _ => false,
        }
    }
}

fn normalise_domain(domain: &str) -> String {
    domain.trim().trim_end_matches('.').to_ascii_lowercase()
}

/// Parses an `Authentication-Results` value (`arc`: an `ARC-Authentication-Results` one, which
/// starts with its instance `i=N;`). `None` when it has no results at all.
pub(crate) fn parse(value: &str, arc: bool) -> Option<Results> {
    let text = strip_comments(value);
    let mut elements = split_outside_quotes(&text, ';').into_iter();
    if arc {
        let instance = words(elements.next()?);
        if !instance.first().is_some_and(|w| w.starts_with("i=")) {
            return None;
        }
    }
    let head = words(elements.next()?);
    let mut results = Vec::new();
    let authserv_id = match head.first() {
        // No authserv-id: the first element is already a result.
        Some(first) if first.contains('=') => {
            results.extend(method_result(&head));
            None
        }
        Some(first) => Some(first.clone()),
        None => None,
    };
    results.extend(elements.filter_map(|element| method_result(&words(element))));
    Some(Results {
        authserv_id,
        results,
    })
}

fn method_result(words: &[String]) -> Option<MethodResult> {
    let (method, result) = words.first()?.split_once('=')?;
    let method = method.split('/').next().unwrap_or("").to_ascii_lowercase();
    if method.is_empty() {
        return None;
    }
    let properties = words[1..]
        .iter()
        .filter_map(|w| w.split_once('='))
        .map(|(k, v)| (k.to_ascii_lowercase(), v.to_owned()))
        .collect();
    Some(MethodResult {
        method,
        result: result.to_ascii_lowercase(),
        properties,
    })
}

/// The value with its comments replaced by a space: parentheses nest, `\` escapes the next
/// character, and parentheses inside a quoted string are text. Line folding becomes spaces.
fn strip_comments(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut depth = 0usize;
    let mut quoted = false;
    let mut escaped = false;
    for c in value.chars() {
        let c = if c == '\r' || c == '\n' { ' ' } else { c };
        if escaped {
            escaped = false;
            if depth == 0 {
                out.push(c);
            }
            continue;
        }
        match c {
            '\\' if quoted || depth > 0 => {
                escaped = true;
                if depth == 0 {
                    out.push(c);
                }
            }
            '"' if depth == 0 => {
                quoted = !quoted;
                out.push(c);
            }
            '(' if !quoted => {
                if depth == 0 {
                    out.push(' ');
                }
                depth += 1;
            }
            ')' if !quoted && depth > 0 => depth -= 1,
            _ if depth > 0 => {}
            _ => out.push(c),
        }
    }
    out
}

/// `text` split at `separator`s outside quoted strings.
fn split_outside_quotes(text: &str, separator: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut quoted = false;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if escaped {
            escaped = false;
        } else if quoted && c == '\\' {
            escaped = true;
        } else if c == '"' {
            quoted = !quoted;
        } else if c == separator && !quoted {
            parts.push(&text[start..i]);
            start = i + c.len_utf8();
        }
    }
    parts.push(&text[start..]);
    parts
}

/// The words of an element (comments already gone): split at whitespace outside quoted
/// strings, `key = value` joined into `key=value`, quoted strings unquoted.
fn words(element: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    let mut escaped = false;
    let mut gap = false;
    for c in element.chars() {
        if quoted {
            if escaped {
                current.push(c);
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                quoted = false;
            } else {
                current.push(c);
            }
            continue;
        }
        if c.is_whitespace() {
            gap = true;
            continue;
        }
        // A gap ends the word unless either side of it is the `=` of `key = value`.
        if gap && !current.is_empty() && !current.ends_with('=') && c != '=' {
            words.push(std::mem::take(&mut current));
        }
        gap = false;
        if c == '"' {
            quoted = true;
        } else {
            current.push(c);
        }
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// Whether a `Received:` value records a hop inside the delivery system rather than the mail
/// arriving from another machine: no `from` clause (Gmail's `Received: by 2002:…`), local
/// delivery `with LMTP` (Dovecot, Cyrus), or a peer at a loopback or private address. Anything
/// else, and anything not understood, ends the part of the header the receiving side wrote.
fn is_internal_hop(value: &str) -> bool {
    let text = strip_comments_kept_brackets(value).to_ascii_lowercase();
    let text = text.trim_start();
    let Some(rest) = text.strip_prefix("from ") else {
        return true;
    };
    // The sender chooses its HELO name, and a server writes it where its format puts it:
    // Postfix and Sendmail first (`from HELO (rdns [peer])`), Exim in a `helo=` item after the
    // peer (`from [peer] (helo=[HELO])`, `from rdns ([peer] helo=HELO ident=…)`). Items the
    // sender controls (`helo=`, `ident=`) and the port are dropped, and the peer is the last
    // bracketed address left in the from clause; the `by`/`with` clauses follow it.
    let (from_clause, after) = match rest.find(" by ") {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, ""),
    };
    let from_clause = without_sender_items(from_clause);
    let with = after
        .split(" with ")
        .nth(1)
        .and_then(|w| w.split_whitespace().next())
        .unwrap_or("");
    if with.starts_with("lmtp") {
        return true;
    }
    let peer = from_clause
        .rfind('[')
        .and_then(|open| {
            let inner = &from_clause[open + 1..];
            inner.find(']').map(|close| &inner[..close])
        })
        .map(|ip| ip.trim_start_matches("ipv6:"))
        .and_then(|ip| ip.parse::<IpAddr>().ok());
    peer.is_some_and(|ip| match ip {
        IpAddr::V4(v4) => v4.is_loopback() || v4.is_private() || v4.is_link_local(),
        IpAddr::V6(v6) => {
            v6.is_loopback()
                || v6.is_unique_local()
                || v6.is_unicast_link_local()
                || v6
                    .to_ipv4_mapped()
                    .is_some_and(|v4| v4.is_loopback() || v4.is_private())
        }
    })
}

/// A from clause without the items Exim writes from what the sender said or does not vouch
/// for: `helo=…`, `ident=…`, `port=…`, each up to the next space (with any `(` before it kept,
/// and the rest of the item, brackets and parentheses included, gone).
fn without_sender_items(clause: &str) -> String {
    clause
        .split(' ')
        .filter(|word| {
            let item = word.trim_start_matches('(');
            !["helo=", "ident=", "port="]
                .iter()
                .any(|key| item.starts_with(key))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A `Received:` value with line folding as spaces. Its comments are kept: they hold the
/// peer's address (`from mail.example.org (mail.example.org [192.0.2.1])`).
fn strip_comments_kept_brackets(value: &str) -> String {
    value.replace(['\r', '\n', '\t'], " ")
}

#[cfg(test)]
mod tests {
    use mail_parser::MessageParser;

    use super::*;

    const BODY: &str =
        "To: bot@example.org\r\nSubject: s\r\nMessage-ID: <m@example.org>\r\n\r\nhi\r\n";

    fn verified(headers: &str, server: &str) -> bool {
        let raw = format!("{headers}{BODY}");
        let message = MessageParser::default()
            .parse(raw.as_bytes())
            .expect("mail");
        match single_from(&message) {
            Some(from) => authenticated(&message, server, &from),
            None => false,
        }
    }

    #[test]
    fn comments_quotes_and_spaces_are_read_as_rfc_8601_says() {
        let r = parse(
            "mx.example.org 1; dkim=pass (2048-bit key; unprotected) header.d=example.org header.i=@example.org header.b=\"AbC;d(e\"; spf = pass (mx: (nested) domain of \\) x) smtp.mailfrom=me@Example.ORG",
            false,
        )
        .expect("parsed");
        assert_eq!(r.authserv_id.as_deref(), Some("mx.example.org"));
        assert_eq!(r.results.len(), 2, "{r:?}");
        assert_eq!(r.results[0].method, "dkim");
        assert_eq!(r.results[0].property("header.d"), Some("example.org"));
        assert_eq!(r.results[0].property("header.b"), Some("AbC;d(e"));
        assert_eq!(r.results[1].method, "spf");
        assert_eq!(r.results[1].result, "pass");
        assert_eq!(
            r.results[1].property("smtp.mailfrom"),
            Some("me@Example.ORG")
        );
        // Text an attacker chose, echoed in a comment, is no result.
        let r = parse(
            "mx.example.org; spf=fail (sender \"x; dmarc=pass header.from=example.org\" (; dmarc=pass header.from=example.org)) smtp.mailfrom=evil.example",
            false,
        )
        .expect("parsed");
        assert_eq!(r.results.len(), 1, "{r:?}");
        assert_eq!(r.results[0].result, "fail");
        // A quoted authserv-id and an `ARC-Authentication-Results` instance.
        let r = parse(
            "i=1; \"mx.google.com\"; dmarc=pass header.from=example.org",
            true,
        )
        .expect("parsed");
        assert_eq!(r.authserv_id.as_deref(), Some("mx.google.com"));
        assert_eq!(
            parse("mx.example.org; none", false).map(|r| r.results.len()),
            Some(0)
        );
    }

    const FROM: &str = "From: Me <me@example.org>\r\n";

    #[test]
    fn postfix_with_opendkim_and_opendmarc_behind_dovecot_lmtp() {
        let headers = |dmarc: &str, dkim: &str| {
            format!(
                "Return-Path: <me@example.org>\r\nDelivered-To: bot@example.org\r\nReceived: from mx.example.org\r\n\tby mx.example.org with LMTP\r\n\tid 3mN0Hc1gRWcXBQAAm2jS0A\r\n\t(envelope-from <me@example.org>)\r\n\tfor <bot@example.org>; Mon, 23 Nov 2026 10:00:02 +0000\r\nAuthentication-Results: mx.example.org; dmarc={dmarc} (p=reject dis=none) header.from=example.org\r\nAuthentication-Results: mx.example.org; spf=none smtp.mailfrom=example.org\r\nDMARC-Filter: OpenDMARC Filter v1.4.2 mx.example.org 4E1F2C0A5\r\nAuthentication-Results: mx.example.org;\r\n\tdkim={dkim} (2048-bit key; unprotected) header.d=example.org header.i=@example.org header.b=\"AbCd1234\";\r\n\tdkim-atps=neutral\r\nDKIM-Filter: OpenDKIM Filter v2.11.0 mx.example.org 4E1F2C0A5\r\nReceived: from mail.example.org (mail.example.org [203.0.113.5])\r\n\t(using TLSv1.3 with cipher TLS_AES_256_GCM_SHA384 (256/256 bits))\r\n\tby mx.example.org (Postfix) with ESMTPS id 4E1F2C0A5\r\n\tfor <bot@example.org>; Mon, 23 Nov 2026 10:00:01 +0000 (UTC)\r\nDKIM-Signature: v=1; a=rsa-sha256; d=example.org; s=mail; b=AbCd1234\r\n{FROM}"
            )
        };
        assert!(verified(&headers("pass", "pass"), "mx.example.org"));
        // OpenDKIM's comment with a `;` in it no longer hides its pass.
        assert!(verified(&headers("fail", "pass"), "mx.example.org"));
        assert!(verified(&headers("pass", "fail"), "mx.example.org"));
        assert!(!verified(&headers("fail", "fail"), "mx.example.org"));
        assert!(!verified(&headers("pass", "pass"), "mx.example.net"));
    }

    #[test]
    fn gmail_fastmail_and_exchange_online() {
        let gmail = format!(
            "Delivered-To: bot@gmail.com\r\nReceived: by 2002:a05:7300:5b8e:b0:1a3:bb2e:4f67 with SMTP id ic14csp1234567dyb;\r\n        Mon, 23 Nov 2026 02:00:02 -0800 (PST)\r\nX-Google-Smtp-Source: AGHT+IFz1\r\nX-Received: by 2002:a17:906:7956:b0:a9a:1::1 with SMTP id x22mr1;\r\n        Mon, 23 Nov 2026 02:00:02 -0800 (PST)\r\nARC-Seal: i=1; a=rsa-sha256; t=1795000000; cv=none; d=google.com; s=arc-20240605; b=xyz\r\nARC-Message-Signature: i=1; a=rsa-sha256; c=relaxed/relaxed; d=google.com; s=arc-20240605; b=xyz\r\nARC-Authentication-Results: i=1; mx.google.com;\r\n       dkim=pass header.i=@example.org header.s=mail header.b=AbCd1234;\r\n       spf=pass (google.com: domain of me@example.org designates 203.0.113.5 as permitted sender) smtp.mailfrom=me@example.org;\r\n       dmarc=pass (p=NONE sp=NONE dis=NONE) header.from=example.org\r\nReturn-Path: <me@example.org>\r\nReceived: from mail.example.org (mail.example.org. [203.0.113.5])\r\n        by mx.google.com with ESMTPS id a640c23a62f3a-a9a6c2e5b1asi1234566b.2021.2026.11.23.02.00.02\r\n        for <bot@gmail.com>; Mon, 23 Nov 2026 02:00:02 -0800 (PST)\r\nReceived-SPF: pass (google.com: domain of me@example.org designates 203.0.113.5 as permitted sender) client-ip=203.0.113.5;\r\nAuthentication-Results: mx.google.com;\r\n       dkim=pass header.i=@example.org header.s=mail header.b=AbCd1234;\r\n       spf=pass (google.com: domain of me@example.org designates 203.0.113.5 as permitted sender) smtp.mailfrom=me@example.org;\r\n       dmarc=pass (p=NONE sp=NONE dis=NONE) header.from=example.org\r\n{FROM}"
        );
        assert!(verified(&gmail, "mx.google.com"));
        // The same verdicts about another domain do not vouch for example.org.
        assert!(!verified(
            &gmail
                .replace("example.org", "evil.example")
                .replace("From: Me <me@evil.example>", "From: Me <me@example.org>"),
            "mx.google.com"
        ));
        let fastmail = format!(
            "Return-Path: <me@example.org>\r\nReceived: from compute6.internal (compute6.nyi.internal [10.202.2.46])\r\n\t by sloti32d1t05 (Cyrus 3.11.0) with LMTPA;\r\n\t Mon, 23 Nov 2026 05:00:02 -0500\r\nX-Cyrus-Session-Id: sloti32d1t05-1795000000-1234-2-1234\r\nReceived: from mx3 ([10.202.2.202])\r\n  by compute6.internal (LMTPProxy); Mon, 23 Nov 2026 05:00:02 -0500\r\nReceived: from mx3.messagingengine.com (localhost [127.0.0.1])\r\n\tby mailmx.nyi.internal (Postfix) with ESMTP id 1A2B3C4D5E\r\n\tfor <bot@fastmail.com>; Mon, 23 Nov 2026 05:00:02 -0500 (EST)\r\nReceived: from mx3.messagingengine.com (localhost [127.0.0.1])\r\n    by mx3.messagingengine.com (Authentication Milter) with ESMTP\r\n    id 5E4D3C2B1A0;\r\n    Mon, 23 Nov 2026 05:00:02 -0500\r\nARC-Authentication-Results: i=1; mx.messagingengine.com;\r\n    dkim=pass (2048-bit rsa key sha256) header.d=example.org header.i=@example.org header.b=AbCd1234 header.a=rsa-sha256 header.s=mail x-bits=2048;\r\n    dmarc=pass policy.published-domain-policy=none policy.applied-disposition=none policy.evaluated-disposition=none (p=none,d=none,d.eval=none) policy.policy-from=p header.from=example.org;\r\n    spf=pass smtp.mailfrom=me@example.org smtp.helo=mail.example.org\r\nAuthentication-Results: mx.messagingengine.com;\r\n    dkim=pass (2048-bit rsa key sha256) header.d=example.org header.i=@example.org header.b=AbCd1234 header.a=rsa-sha256 header.s=mail x-bits=2048;\r\n    dmarc=pass policy.published-domain-policy=none policy.applied-disposition=none policy.evaluated-disposition=none (p=none,d=none,d.eval=none) policy.policy-from=p header.from=example.org;\r\n    iprev=pass smtp.remote-ip=203.0.113.5 (mail.example.org);\r\n    spf=pass smtp.mailfrom=me@example.org smtp.helo=mail.example.org;\r\n    x-aligned-from=pass (Address match);\r\n    x-me-sender=none;\r\n    x-ptr=pass smtp.helo=mail.example.org policy.ptr=mail.example.org\r\nX-ME-VSCategory: clean\r\nReceived-SPF: pass\r\n    (example.org: 203.0.113.5 is authorized to use 'me@example.org' in 'mfrom' identity (mechanism 'ip4:203.0.113.5' matched))\r\n    receiver=mx3.messagingengine.com;\r\n    identity=mailfrom;\r\nReceived: from mail.example.org (mail.example.org [203.0.113.5])\r\n\t(using TLSv1.3 with cipher TLS_AES_256_GCM_SHA384 (256/256 bits))\r\n\tby mx3.messagingengine.com (Postfix) with ESMTPS\r\n\tfor <bot@fastmail.com>; Mon, 23 Nov 2026 05:00:02 -0500 (EST)\r\n{FROM}"
        );
        assert!(verified(&fastmail, "mx.messagingengine.com"));
        // Exchange Online names no authserv-id: nothing ties its verdict to a server, so it
        // cannot be told from a forged copy and never counts.
        let exchange_value = "spf=pass (sender IP is 203.0.113.5) smtp.mailfrom=example.org; dkim=pass (signature was verified) header.d=example.org;dmarc=pass action=none header.from=example.org;compauth=pass reason=100";
        let r = parse(exchange_value, false).expect("parsed");
        assert_eq!(r.authserv_id, None);
        let methods: Vec<&str> = r.results.iter().map(|r| r.method.as_str()).collect();
        assert_eq!(methods, ["spf", "dkim", "dmarc", "compauth"]);
        assert!(r.results.iter().all(|r| r.result == "pass"));
        let exchange = format!(
            "Received: from BN8NAM11FT067.eop-nam11.prod.protection.outlook.com (2603:10b6:408:e5:cafe::2) by BN9PR03CA0123.outlook.office365.com (2603:10b6:408:fe::27) with Microsoft SMTP Server (version=TLS1_2) id 15.20.7; Mon, 23 Nov 2026 10:00:02 +0000\r\nAuthentication-Results: {exchange_value}\r\nReceived-SPF: Pass (protection.outlook.com: domain of example.org designates 203.0.113.5 as permitted sender) receiver=protection.outlook.com; client-ip=203.0.113.5;\r\nReceived: from mail.example.org (203.0.113.5) by BN8NAM11FT067.mail.protection.outlook.com (10.13.177.1) with Microsoft SMTP Server id 15.20.7 via Frontend Transport; Mon, 23 Nov 2026 10:00:02 +0000\r\n{FROM}"
        );
        assert!(!verified(&exchange, "protection.outlook.com"));
        assert!(!verified(&exchange, "spf"));
    }

    #[test]
    fn verdicts_about_another_domain_or_below_the_intake_count_for_nothing() {
        let ours = |results: &str| format!("Authentication-Results: mx.example.org; {results}\r\n");
        let intake = "Received: from mail.example.net (mail.example.net [198.51.100.7])\r\n\tby mx.example.org (Postfix) with ESMTPS id 9A8B7C\r\n\tfor <bot@example.org>; Mon, 23 Nov 2026 10:00:01 +0000\r\n";
        // dmarc=pass, but for the attacker's own domain.
        assert!(!verified(
            &format!("{}{FROM}", ours("dmarc=pass header.from=evil.example")),
            "mx.example.org"
        ));
        assert!(!verified(
            &format!("{}{FROM}", ours("dmarc=pass")),
            "mx.example.org"
        ));
        assert!(verified(
            &format!("{}{FROM}", ours("dmarc=pass header.from=Example.ORG")),
            "mx.example.org"
        ));
        assert!(!verified(
            &format!(
                "{}{FROM}",
                ours("dkim=pass header.d=example.org.evil.example")
            ),
            "mx.example.org"
        ));
        assert!(!verified(
            &format!("{}{FROM}", ours("spf=pass smtp.mailfrom=x@evil.example")),
            "mx.example.org"
        ));
        // Two From headers, two addresses in one, or none: never verified.
        let pass = ours("dmarc=pass header.from=example.org");
        assert!(!verified(
            &format!("{pass}From: attacker@evil.example\r\n{FROM}"),
            "mx.example.org"
        ));
        assert!(!verified(
            &format!("{pass}From: me@example.org, attacker@evil.example\r\n"),
            "mx.example.org"
        ));
        assert!(!verified(&pass, "mx.example.org"));
        // A verdict the sender wrote below the receiving server's intake counts for nothing,
        // whether or not the server added its own.
        assert!(!verified(
            &format!("{intake}{pass}{FROM}"),
            "mx.example.org"
        ));
        assert!(!verified(
            &format!(
                "{}{intake}{pass}{FROM}",
                ours("dmarc=fail header.from=example.org")
            ),
            "mx.example.org"
        ));
        assert!(verified(&format!("{pass}{intake}{FROM}"), "mx.example.org"));
        // A sender cannot make the intake look internal with a HELO of its choosing.
        let helo = "Received: from [127.0.0.1] (evil.example [198.51.100.7])\r\n\tby mx.example.org (Postfix) with ESMTP id 1\r\n";
        assert!(!verified(&format!("{helo}{pass}{FROM}"), "mx.example.org"));
        assert!(is_internal_hop(
            "from mx3 ([10.202.2.202])\r\n  by compute6.internal (LMTPProxy)"
        ));
        assert!(is_internal_hop("by 2002:a05:7300:5b8e::1 with SMTP id x"));
        assert!(!is_internal_hop(
            "from mail.example.net (mail.example.net [198.51.100.7]) by mx.example.org"
        ));
        assert!(!is_internal_hop(
            "from unknown by mx.example.org with ESMTP"
        ));
    }

    #[test]
    fn exim_writes_the_peer_first_and_the_senders_helo_after_it() {
        // Exim's `$sender_rcvhost`, in its three shapes, with an attacker's `EHLO [10.0.0.1]`.
        for hop in [
            "from [203.0.113.5] (helo=[10.0.0.1])\r\n\tby mx.example.org with esmtp (Exim 4.96)",
            "from evil.example ([203.0.113.5] helo=[10.0.0.1])\r\n\tby mx.example.org with esmtps (Exim 4.96)",
            "from evil.example ([203.0.113.5]:40312 helo=[10.0.0.1] ident=[127.0.0.1])\r\n\tby mx.example.org with esmtp (Exim 4.96)",
            "from [203.0.113.5] (port=40312 helo=localhost[127.0.0.1])\r\n\tby mx.example.org with esmtp (Exim 4.96)",
        ] {
            assert!(!is_internal_hop(hop), "the peer is public: {hop}");
        }
        // Exim's own hops inside the system still read as internal.
        assert!(is_internal_hop(
            "from [10.0.0.7] (helo=relay.internal)\r\n\tby mx.example.org with esmtp (Exim 4.96)"
        ));
        assert!(is_internal_hop(
            "from localhost ([127.0.0.1]:52100 helo=mx.example.org)\r\n\tby mx.example.org with esmtp (Exim 4.96)"
        ));
        // Postfix with a HELO literal still reads its peer last.
        assert!(!is_internal_hop(
            "from [10.0.0.1] (unknown [203.0.113.5]) by mx.example.org (Postfix) with ESMTP id 1"
        ));
        assert!(!is_internal_hop(
            "from helo=[10.0.0.1] (unknown [203.0.113.5]) by mx.example.org (Postfix) with ESMTP id 1"
        ));

        // The attack: the receiving server's own failing verdict and intake, then a verdict the
        // sender wrote. It counts for nothing.
        let ours = "Authentication-Results: mx.example.org; dmarc=fail header.from=example.org; spf=fail smtp.mailfrom=evil.example\r\n";
        let intake = "Received: from [203.0.113.5] (helo=[10.0.0.1])\r\n\tby mx.example.org with esmtp (Exim 4.96)\r\n\tid 1tXyZa-000123-AB\r\n\tfor bot@example.org; Mon, 23 Nov 2026 10:00:01 +0000\r\n";
        let forged =
            "Authentication-Results: mx.example.org; dmarc=pass header.from=example.org\r\n";
        assert!(!verified(
            &format!("{ours}{intake}{forged}{FROM}"),
            "mx.example.org"
        ));
        // Even were the intake misread as internal, our failing verdict ends the search.
        let internal = "Received: from [10.0.0.7] (helo=relay.internal)\r\n\tby mx.example.org with esmtp (Exim 4.96)\r\n";
        assert!(!verified(
            &format!("{ours}{internal}{forged}{FROM}"),
            "mx.example.org"
        ));
        // Without a verdict of ours above it, a pass past an internal hop still counts (a
        // relay inside the system wrote it), as before.
        assert!(verified(
            &format!("{internal}{forged}{FROM}"),
            "mx.example.org"
        ));
        // An Exim intake with our pass above it: verified.
        assert!(verified(
            &format!("{forged}{intake}{FROM}"),
            "mx.example.org"
        ));
    }
}
