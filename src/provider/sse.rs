//! A small server-sent-events parser (the `text/event-stream` format both LLM APIs stream in).
//!
//! Bytes go in as they arrive from the network, split anywhere (inside a line, between `\r` and
//! `\n`, inside a UTF-8 character); complete events come out. Only `event:` and `data:` fields
//! matter to us; `id:`, `retry:` and comments (`:`) are skipped.

/// One dispatched event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The `event:` name, if the event had one.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// Incremental parser: feed it chunks with [`SseParser::push`].
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    /// Bytes of the line not yet terminated. Kept as bytes so a UTF-8 character split across
    /// chunks is only decoded once it is whole.
    line: Vec<u8>,
    event: Option<String>,
    data: String,
    has_data: bool,
    /// The previous chunk ended in `\r`: a `\n` starting the next chunk belongs to it.
    after_cr: bool,
    started: bool,
}

impl SseParser {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Feeds the next chunk of bytes and returns the events it completed.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        let mut events = Vec::new();
        for &byte in chunk {
            if self.after_cr {
                self.after_cr = false;
                if byte == b'\n' {
                    continue;
                }
            }
            match byte {
                b'\n' => self.end_line(&mut events),
                b'\r' => {
                    self.after_cr = true;
                    self.end_line(&mut events);
                }
                _ => self.line.push(byte),
            }
        }
        events
    }

    fn end_line(&mut self, events: &mut Vec<SseEvent>) {
        let raw = std::mem::take(&mut self.line);
        let mut bytes = raw.as_slice();
        if !self.started {
            self.started = true;
            // The spec allows a byte order mark before the first line.
            bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
        }
        let line = String::from_utf8_lossy(bytes);
        if line.is_empty() {
            // A blank line dispatches the event; one without data is dropped, as the spec says.
            if self.has_data {
                events.push(SseEvent {
                    event: self.event.take(),
                    data: std::mem::take(&mut self.data),
                });
            }
            self.event = None;
            self.data.clear();
            self.has_data = false;
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_ref(), ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => self.event = Some(value.to_string()),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_in_chunks(input: &[u8], size: usize) -> Vec<SseEvent> {
        let mut parser = SseParser::new();
        let mut events = Vec::new();
        for chunk in input.chunks(size) {
            events.extend(parser.push(chunk));
        }
        events
    }

    fn ev(event: Option<&str>, data: &str) -> SseEvent {
        SseEvent {
            event: event.map(str::to_string),
            data: data.to_string(),
        }
    }

    #[test]
    fn data_lines_events_and_comments() {
        let input = b": keep-alive\n\nevent: ping\ndata: {\"type\":\"ping\"}\n\ndata: a\ndata:b\n\ndata: [DONE]\n\n";
        let expected = vec![
            ev(Some("ping"), "{\"type\":\"ping\"}"),
            ev(None, "a\nb"),
            ev(None, "[DONE]"),
        ];
        assert_eq!(parse_in_chunks(input, input.len()), expected);
    }

    #[test]
    fn every_chunking_gives_the_same_events() {
        // CRLF, a lone CR, multi-byte characters, and an event without data.
        let input = "event: x\r\ndata: héllo → 😀\r\n\r\nid: 7\n\ndata: second\rdata: line\r\r\nevent: e\ndata:  spaced\n\n";
        let expected = vec![
            ev(Some("x"), "héllo → 😀"),
            ev(None, "second\nline"),
            ev(Some("e"), " spaced"),
        ];
        for size in 1..=input.len() {
            assert_eq!(
                parse_in_chunks(input.as_bytes(), size),
                expected,
                "chunk size {size}"
            );
        }
    }

    #[test]
    fn unfinished_event_is_not_dispatched() {
        let mut parser = SseParser::new();
        assert!(parser.push(b"data: partial").is_empty());
        assert!(parser.push(b"\n").is_empty());
        assert_eq!(parser.push(b"\n"), vec![ev(None, "partial")]);
    }

    #[test]
    fn byte_order_mark_is_skipped() {
        let mut parser = SseParser::new();
        assert_eq!(parser.push(b"\xEF\xBB\xBFdata: x\n\n"), vec![ev(None, "x")]);
    }
}
