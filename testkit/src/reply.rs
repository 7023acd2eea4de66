//! [`Reply`]: what a fake server answers to one request.

use std::time::Duration;

/// A tool call the fake model makes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolCallSpec {
    pub id: String,
    pub name: String,
    /// The arguments as JSON text, exactly as the model "wrote" them (may be invalid JSON).
    pub arguments: String,
}

impl ToolCallSpec {
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }
}

/// One scripted answer. Build it with [`Reply::text`], [`Reply::tool_calls`] ([`Reply::call`]
/// for one), [`Reply::error`] or [`Reply::raw`], then adjust it with the builder methods.
#[derive(Clone, Debug)]
pub struct Reply {
    pub(crate) body: ReplyBody,
    pub(crate) retry_after: Option<String>,
    pub(crate) streamed: bool,
    pub(crate) delay: Duration,
    pub(crate) usage: (u64, u64),
    pub(crate) stop_reason: Option<String>,
    pub(crate) cut_after: Option<usize>,
    pub(crate) chunk_bytes: Option<usize>,
    pub(crate) stream_error: Option<(String, String)>,
    pub(crate) pace: Duration,
    pub(crate) delta_chars: usize,
}

#[derive(Clone, Debug)]
pub(crate) enum ReplyBody {
    Answer {
        text: String,
        tool_calls: Vec<ToolCallSpec>,
    },
    Error {
        status: u16,
        message: String,
    },
    Raw {
        status: u16,
        content_type: String,
        body: String,
    },
}

impl Reply {
    fn new(body: ReplyBody) -> Self {
        Self {
            body,
            retry_after: None,
            streamed: true,
            delay: Duration::ZERO,
            usage: (12, 7),
            stop_reason: None,
            cut_after: None,
            chunk_bytes: None,
            stream_error: None,
            pace: Duration::ZERO,
            delta_chars: 3,
        }
    }

    /// A text answer.
    pub fn text(text: impl Into<String>) -> Self {
        Self::new(ReplyBody::Answer {
            text: text.into(),
            tool_calls: Vec::new(),
        })
    }

    /// An answer calling tools; add text with [`Reply::with_text`].
    pub fn tool_calls(calls: Vec<ToolCallSpec>) -> Self {
        Self::new(ReplyBody::Answer {
            text: String::new(),
            tool_calls: calls,
        })
    }

    /// An answer calling the one tool `name` with `arguments` (JSON text).
    pub fn call(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        Self::tool_calls(vec![ToolCallSpec::new(id, name, arguments)])
    }

    /// An HTTP error in the API's error format (`{"error":{"message":…}}` for OpenAI,
    /// `{"type":"error","error":{"type":…,"message":…}}` for Anthropic).
    pub fn error(status: u16, message: impl Into<String>) -> Self {
        Self::new(ReplyBody::Error {
            status,
            message: message.into(),
        })
    }

    /// Exactly this status, content type and body: for malformed answers.
    pub fn raw(status: u16, content_type: impl Into<String>, body: impl Into<String>) -> Self {
        Self::new(ReplyBody::Raw {
            status,
            content_type: content_type.into(),
            body: body.into(),
        })
    }

    /// Sets the text of an answer (keeping its tool calls); no effect on errors and raw replies.
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        if let ReplyBody::Answer { text: t, .. } = &mut self.body {
            *t = text.into();
        }
        self
    }

    /// Adds a `Retry-After: <secs>` header.
    pub fn retry_after(self, secs: u64) -> Self {
        self.retry_after_header(secs.to_string())
    }

    /// Adds a `Retry-After` header with any value (an HTTP date, garbage …).
    pub fn retry_after_header(mut self, value: impl Into<String>) -> Self {
        self.retry_after = Some(value.into());
        self
    }

    /// Whether to answer a `"stream": true` request as an event stream (the default) or, like
    /// some servers do, with plain JSON anyway.
    pub fn streamed(mut self, streamed: bool) -> Self {
        self.streamed = streamed;
        self
    }

    /// Waits this long (really, on the server) before answering.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// In a streamed answer, waits this long before each piece of the stream: a slow model that
    /// is visibly writing (the opening event comes at once, the rest one piece at a time).
    pub fn pace(mut self, pace: Duration) -> Self {
        self.pace = pace;
        self
    }

    /// Token counts to report (default 12 in, 7 out).
    pub fn usage(mut self, input_tokens: u64, output_tokens: u64) -> Self {
        self.usage = (input_tokens, output_tokens);
        self
    }

    /// Overrides the finish/stop reason (default: `stop`/`tool_calls` for OpenAI,
    /// `end_turn`/`tool_use` for Anthropic).
    pub fn stop_reason(mut self, reason: impl Into<String>) -> Self {
        self.stop_reason = Some(reason.into());
        self
    }

    /// Streams only the first `events` events, then breaks the connection mid-body.
    pub fn cut_after(mut self, events: usize) -> Self {
        self.cut_after = Some(events);
        self
    }

    /// Sends the event stream in pieces of this many bytes, cutting through lines and UTF-8
    /// characters (by default each event is one piece).
    pub fn chunk_bytes(mut self, bytes: usize) -> Self {
        self.chunk_bytes = Some(bytes.max(1));
        self
    }

    /// In a streamed answer, puts this many characters of text in each delta event (3 by
    /// default: many small deltas). Large values stream huge answers in a sane number of events.
    pub fn delta_chars(mut self, chars: usize) -> Self {
        self.delta_chars = chars.max(1);
        self
    }

    /// In a streamed answer, sends an error event after the stream started (Anthropic:
    /// `event: error` with this error type, e.g. `overloaded_error`; OpenAI: a `data:` chunk
    /// with an `error` object).
    pub fn stream_error(
        mut self,
        error_type: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        self.stream_error = Some((error_type.into(), message.into()));
        self
    }
}

/// Cuts `text` into pieces of at most `chars` characters, so streams carry many small deltas.
pub(crate) fn pieces(text: &str, chars: usize) -> Vec<String> {
    let chars_vec: Vec<char> = text.chars().collect();
    chars_vec
        .chunks(chars.max(1))
        .map(|c| c.iter().collect())
        .collect()
}
