//! The terminal as a channel: `hearth chat` talks to the same pipeline as every platform.
//!
//! Each input line is one message, answered in order: a line typed (or piped) while an answer is
//! still coming waits until that answer was printed, so a script can pipe lines in and get
//! exactly one reply per line. Input is read all the time, though, so `/cancel` typed during a
//! slow answer stops it at once rather than after it finished. Replies stream as they are
//! generated; on a terminal its echo is off meanwhile, so what is typed does not land inside the
//! streamed line (a cancelled answer ends its line, then says so), and a line typed ahead is
//! shown after the `›` when its turn comes. A tool that needs approval prints its prompt
//! numbered (`[1] …`) without the question it ends with, and asks that question once, as the
//! y/N line: `[1] delete_task {"id":3} — Approve within 10 minutes? [y/N]`; several prompts of
//! one turn are asked one after the other. End of input stops the chat once the last reply is out.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, IsTerminal, Write};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use hearth_channel::{
    Button, ButtonPress, Capabilities, Channel, ChannelContext, ChannelError, ChatRef, Format,
    Inbound, InboundKind, MessageRef, OutboundMessage, PreviewUpdate, Sender,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The terminal's only chat and only user.
pub const LOCAL: &str = "local";

/// What the channel printed, as the input loop needs to know it.
#[derive(Debug)]
enum Shown {
    /// A reply; `reply_to` is the platform id of the message it answers.
    Reply { reply_to: Option<String> },
    /// A prompt with Approve / Deny buttons.
    Question(Question),
}

#[derive(Debug)]
struct Question {
    /// The number its prompt was printed with.
    number: usize,
    /// The tool and its arguments, e.g. `delete_task {"id":3}`.
    label: String,
    /// The prompt's closing question, e.g. `Approve within 10 minutes?`.
    ask: String,
    buttons: Vec<Button>,
}

pub struct TerminalChannel {
    /// What the current streamed reply has printed so far.
    printed: Mutex<String>,
    /// Sent texts by message id, so an edit prints only what changed.
    texts: Mutex<HashMap<String, String>>,
    sent: AtomicU64,
    /// Prompts printed for the message being answered; numbers them.
    asked: AtomicUsize,
    shown_tx: mpsc::UnboundedSender<Shown>,
    shown_rx: tokio::sync::Mutex<mpsc::UnboundedReceiver<Shown>>,
    /// Lines of standard input, read on a thread of their own (started by the first `run`).
    lines: tokio::sync::Mutex<Option<mpsc::Receiver<std::io::Result<String>>>>,
    /// Cancelled after end of input, once the last reply was printed.
    finished: CancellationToken,
    interactive: bool,
    /// The terminal's settings at the start (when there is one), to turn echo off and back.
    echo: Echo,
}

/// The terminal's echo of what is typed. The kernel echoes each key at the cursor, which while
/// an answer streams is inside the answer's line: echo is turned off then (keys still reach the
/// line that Enter sends) and on again for the `›` prompt, the y/N questions and at the end.
#[derive(Debug)]
struct Echo {
    /// The settings found at the start; `None` when input is not a terminal.
    original: Option<rustix::termios::Termios>,
}

impl Echo {
    fn new(interactive: bool) -> Self {
        let original = interactive
            .then(|| rustix::termios::tcgetattr(std::io::stdin()))
            .and_then(Result::ok);
        Self { original }
    }

    /// Whether there is an echo to turn off: input is a terminal.
    fn available(&self) -> bool {
        self.original.is_some()
    }

    /// Turns the echo on (as found at the start) or off.
    fn set(&self, on: bool) {
        let Some(original) = &self.original else {
            return;
        };
        let mut settings = original.clone();
        if !on {
            settings
                .local_modes
                .remove(rustix::termios::LocalModes::ECHO | rustix::termios::LocalModes::ECHONL);
        }
        if let Err(err) = rustix::termios::tcsetattr(
            std::io::stdin(),
            rustix::termios::OptionalActions::Now,
            &settings,
        ) {
            // Typing then shows inside the answer, as it did before: untidy, nothing lost.
            tracing::debug!(error = %err, "cannot change the terminal's echo");
        }
    }
}

impl Default for TerminalChannel {
    fn default() -> Self {
        Self::new()
    }
}

impl TerminalChannel {
    pub fn new() -> Self {
        let (shown_tx, shown_rx) = mpsc::unbounded_channel();
        let interactive = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
        Self {
            printed: Mutex::new(String::new()),
            texts: Mutex::new(HashMap::new()),
            sent: AtomicU64::new(0),
            asked: AtomicUsize::new(0),
            shown_tx,
            shown_rx: tokio::sync::Mutex::new(shown_rx),
            lines: tokio::sync::Mutex::new(None),
            finished: CancellationToken::new(),
            interactive,
            echo: Echo::new(interactive),
        }
    }

    /// Gives the terminal its echo back; `hearth chat` calls it before it exits, whatever way
    /// it ends (a Ctrl-C exit does not wait for the channel to stop).
    pub fn restore_echo(&self) {
        self.echo.set(true);
    }

    /// Cancelled when input ended and everything was answered.
    pub fn finished(&self) -> CancellationToken {
        self.finished.clone()
    }

    /// Whether both ends are a terminal (a person typing) rather than pipes.
    pub fn interactive(&self) -> bool {
        self.interactive
    }

    fn print(&self, text: &str) {
        let mut out = std::io::stdout().lock();
        // A closed stdout (the reading end of a pipe went away) leaves nobody to tell.
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    }

    fn printed(&self) -> std::sync::MutexGuard<'_, String> {
        self.printed.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn show(&self, shown: Shown) {
        // The receiver lives as long as the channel; a send fails only while nothing runs,
        // when there is nobody to tell.
        let _ = self.shown_tx.send(shown);
    }

    /// Hands an event to the inbox, retrying while the database is busy; false on shutdown.
    async fn deliver(&self, ctx: &ChannelContext, event: &Inbound) -> bool {
        loop {
            match ctx.sink.deliver(event.clone()).await {
                Ok(()) => return true,
                Err(err) => {
                    tracing::warn!(error = %err, "storing the message failed; retrying");
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_millis(500)) => {}
                        () = ctx.shutdown.cancelled() => return false,
                    }
                }
            }
        }
    }

    fn prompt(&self) {
        if self.interactive {
            self.print("› ");
        }
    }
}

/// Reads standard input line by line on a plain thread. Tokio's stdin cannot be cancelled and
/// would hold up the runtime's shutdown until the next Enter; this thread simply ends with the
/// process. Bytes that are not UTF-8 are replaced rather than refused, so no line is lost.
fn read_stdin() -> mpsc::Receiver<std::io::Result<String>> {
    let (tx, rx) = mpsc::channel(64);
    let spawned = std::thread::Builder::new()
        .name("hearth-stdin".into())
        .spawn(move || {
            let stdin = std::io::stdin();
            let mut input = stdin.lock();
            let mut buffer = Vec::new();
            loop {
                buffer.clear();
                match input.read_until(b'\n', &mut buffer) {
                    Ok(0) => return,
                    Ok(_) => {
                        let line = String::from_utf8_lossy(&buffer)
                            .trim_end_matches(['\n', '\r'])
                            .to_string();
                        if tx.blocking_send(Ok(line)).is_err() {
                            return;
                        }
                    }
                    Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(err) => {
                        // The receiver may be gone already; then nobody needs the error.
                        let _ = tx.blocking_send(Err(err));
                        return;
                    }
                }
            }
        });
    if let Err(err) = spawned {
        tracing::error!(error = %err, "cannot start reading standard input");
    }
    rx
}

/// `/cancel` (the runtime's fast path stops the running turn as soon as it is stored).
fn is_cancel(text: &str) -> bool {
    text.split_whitespace()
        .next()
        .is_some_and(|word| word.eq_ignore_ascii_case("/cancel"))
}

/// The tool and its arguments named by a confirmation prompt ("… wants to run `tool`. …" with
/// the arguments in a code block), e.g. `delete_task {"id":3}`.
fn question_label(prompt: &str) -> String {
    let tool = prompt
        .split_once("wants to run `")
        .and_then(|(_, rest)| rest.split_once('`'))
        .map(|(tool, _)| tool.to_string());
    let arguments = prompt
        .split_once("```")
        .and_then(|(_, rest)| rest.split_once("```"))
        .map(|(block, _)| block.trim())
        .map(
            |block| match serde_json::from_str::<serde_json::Value>(block) {
                Ok(value) => value.to_string(),
                Err(_) => block.split_whitespace().collect::<Vec<_>>().join(" "),
            },
        );
    match (tool, arguments) {
        (Some(tool), Some(arguments)) => format!("{tool} {arguments}"),
        (Some(tool), None) => tool,
        _ => "this request".into(),
    }
}

/// A confirmation prompt split into what it shows (the request and its arguments) and the
/// question it ends with (`Approve within 10 minutes?`), which the terminal asks as its y/N line.
fn split_question(prompt: &str) -> (&str, &str) {
    match prompt.rsplit_once('\n') {
        Some((body, last)) if last.trim_end().ends_with('?') => (body.trim_end(), last.trim()),
        _ => (prompt, "Approve?"),
    }
}

/// A prompt's body without its fenced arguments block: the y/N line names the call with its
/// arguments (`delete_task {"id":3}`), so they show once, and a terminal shows no Markdown
/// fences. A body with an unclosed fence is shown as it is.
fn without_arguments_block(body: &str) -> String {
    let Some((before, rest)) = body.split_once("```") else {
        return body.to_string();
    };
    let Some((_, after)) = rest.split_once("```") else {
        return body.to_string();
    };
    let (before, after) = (before.trim_end(), after.trim_start());
    match (before.is_empty(), after.is_empty()) {
        (_, true) => before.to_string(),
        (true, false) => after.to_string(),
        (false, false) => format!("{before}\n{after}"),
    }
}

/// The input loop's state: what is being answered, what waits, what is being asked.
#[derive(Default)]
struct Session {
    /// Platform id of the message whose reply is awaited.
    waiting: Option<String>,
    /// Lines read while an answer was coming, in order (trimmed; empty ones too, since the
    /// answer to a question that comes up meanwhile may be "no" by Enter).
    queue: VecDeque<Typed>,
    /// Prompts not yet asked.
    questions: VecDeque<Question>,
    /// The prompt whose y/N answer the next line is.
    asking: Option<Question>,
    end_of_input: bool,
    /// Whether the `›` prompt is on screen.
    prompted: bool,
    /// Whether the terminal's echo is off (an answer is streaming).
    quiet: bool,
    session: i64,
    count: u64,
}

/// A line of input, and whether it was typed unseen (the echo was off while an answer
/// streamed): such a line is shown when it is used, where it does not cut into an answer.
struct Typed {
    text: String,
    unseen: bool,
}

impl Session {
    fn next_id(&mut self) -> String {
        self.count += 1;
        format!("{}-{}", self.session, self.count)
    }
}

#[async_trait]
impl Channel for TerminalChannel {
    fn name(&self) -> &str {
        "terminal"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            buttons: true,
            edits: true,
            format: Format::Markdown,
            preview: Some(Duration::ZERO),
            ..Capabilities::default()
        }
    }

    async fn run(&self, ctx: ChannelContext) -> Result<(), ChannelError> {
        // The terminal is there as soon as it reads.
        ctx.status.connected();
        let mut lines_slot = self.lines.lock().await;
        let lines = lines_slot.get_or_insert_with(read_stdin);
        let mut shown = self.shown_rx.lock().await;
        let result = self.converse(&ctx, lines, &mut shown).await;
        // However the chat ends, the terminal echoes again.
        self.echo.set(true);
        result
    }

    async fn send(&self, message: &OutboundMessage) -> Result<MessageRef, ChannelError> {
        let mut printed = self.printed();
        let text = message.text.trim_end();
        // A prompt's closing question is asked by the y/N line, not printed here as well.
        let (shown, ask) = if message.buttons.is_empty() {
            (std::borrow::Cow::Borrowed(text), "")
        } else {
            let (body, ask) = split_question(text);
            (std::borrow::Cow::Owned(without_arguments_block(body)), ask)
        };
        let shown = shown.as_ref();
        let question = (!message.buttons.is_empty()).then(|| Question {
            number: self.asked.fetch_add(1, Ordering::Relaxed) + 1,
            label: question_label(text),
            ask: ask.to_string(),
            buttons: message.buttons.clone(),
        });
        let rest = match message.replaces {
            Some(_) if !printed.is_empty() && shown.starts_with(printed.as_str()) => {
                &shown[printed.len()..]
            }
            Some(_) if !printed.is_empty() => {
                self.print("\n");
                shown
            }
            _ => shown,
        };
        if let Some(question) = &question {
            self.print(&format!("[{}] ", question.number));
        }
        self.print(rest);
        self.print("\n");
        printed.clear();
        drop(printed);
        let id = (self.sent.fetch_add(1, Ordering::Relaxed) + 1).to_string();
        self.texts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.clone(), text.to_string());
        self.show(match question {
            Some(question) => Shown::Question(question),
            None => Shown::Reply {
                reply_to: message.reply_to.clone(),
            },
        });
        Ok(MessageRef {
            chat: message.chat.clone(),
            message_id: id,
        })
    }

    async fn edit(
        &self,
        target: &MessageRef,
        message: &OutboundMessage,
    ) -> Result<(), ChannelError> {
        let text = message.text.trim_end();
        let mut printed = self.printed();
        if !printed.is_empty() {
            // An answer is streaming on the current line (a turn resumed after a decision
            // answers while that decision's outcome is still on its way here): end the line,
            // and the answer prints whole below the outcome, as after a model's retry.
            self.print("\n");
            printed.clear();
        }
        drop(printed);
        let before = self
            .texts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(target.message_id.clone(), text.to_string());
        // A prompt edited to show its outcome: print just the outcome.
        match before.as_deref().and_then(|b| text.strip_prefix(b)) {
            Some(added) => self.print(&format!("{}\n", added.trim())),
            None => self.print(&format!("{text}\n")),
        }
        Ok(())
    }

    async fn preview(&self, update: PreviewUpdate<'_>) -> Result<Option<MessageRef>, ChannelError> {
        let PreviewUpdate { chat, text, .. } = update;
        let mut printed = self.printed();
        if text.starts_with(printed.as_str()) {
            self.print(&text[printed.len()..]);
        } else {
            // The model started over (a retry): begin a fresh line.
            self.print("\n");
            self.print(text);
        }
        printed.clear();
        printed.push_str(text);
        Ok(Some(MessageRef {
            chat: chat.clone(),
            message_id: "draft".into(),
        }))
    }
}

impl TerminalChannel {
    /// The input loop: reads lines, sends messages and answers, until input ends (and the last
    /// reply was printed) or hearth stops.
    async fn converse(
        &self,
        ctx: &ChannelContext,
        lines: &mut mpsc::Receiver<std::io::Result<String>>,
        shown: &mut mpsc::UnboundedReceiver<Shown>,
    ) -> Result<(), ChannelError> {
        let mut s = Session {
            session: chrono::Utc::now().timestamp_millis(),
            ..Session::default()
        };
        if self.interactive {
            self.print("hearth chat: type a message, /help for commands, /cancel to stop an answer, Ctrl-D to leave.\n");
        }
        loop {
            // Whatever can happen without new input happens first.
            if s.asking.is_none()
                && let Some(question) = s.questions.pop_front()
            {
                self.print(&format!(
                    "[{}] {} — {} [y/N] ",
                    question.number, question.label, question.ask
                ));
                s.asking = Some(question);
                // Lines typed (or piped) ahead are read in order: the next one is the answer.
                if let Some(line) = s.queue.pop_front() {
                    if !self.on_line(ctx, &mut s, line).await {
                        return Ok(());
                    }
                    continue;
                }
                if s.end_of_input {
                    // Nobody is left to answer: no.
                    if !self.answer(ctx, &mut s, false).await {
                        return Ok(());
                    }
                    continue;
                }
            }
            if s.asking.is_none() && s.waiting.is_none() {
                if let Some(line) = s.queue.pop_front() {
                    // An empty line typed ahead was kept only in case a question came first.
                    if line.text.is_empty() {
                        continue;
                    }
                    if line.unseen {
                        self.print(&format!("› {}\n", line.text));
                    }
                    if !self.send_line(ctx, &mut s, line.text).await {
                        return Ok(());
                    }
                    continue;
                }
                if s.end_of_input {
                    self.finished.cancel();
                    return Ok(());
                }
                if !s.prompted {
                    self.prompt();
                    s.prompted = true;
                }
            }
            // Echo only while a person is asked to type: at the prompt and for a question.
            let quiet = self.echo.available() && s.waiting.is_some() && s.asking.is_none();
            if quiet != s.quiet {
                self.echo.set(!quiet);
                s.quiet = quiet;
            }
            tokio::select! {
                line = lines.recv(), if !s.end_of_input => match line {
                    None => {
                        s.end_of_input = true;
                        if s.asking.is_some() && !self.answer(ctx, &mut s, false).await {
                            return Ok(());
                        }
                    }
                    Some(Err(err)) => {
                        return Err(ChannelError::transient(format!("reading stdin failed: {err}")));
                    }
                    Some(Ok(text)) => {
                        let line = Typed { text, unseen: s.quiet };
                        if !self.on_line(ctx, &mut s, line).await {
                            return Ok(());
                        }
                    }
                },
                Some(event) = shown.recv() => match event {
                    Shown::Reply { reply_to } => {
                        if reply_to.is_some() && reply_to == s.waiting {
                            s.waiting = None;
                            s.prompted = false;
                        }
                    }
                    Shown::Question(question) => s.questions.push_back(question),
                },
                () = ctx.shutdown.cancelled() => return Ok(()),
            }
        }
    }

    /// One line of input: the answer to the question asked, `/cancel` for the running answer,
    /// or a message (sent now, or queued behind the answer being printed). False on shutdown.
    async fn on_line(&self, ctx: &ChannelContext, s: &mut Session, line: Typed) -> bool {
        if s.asking.is_some() {
            let answer = line.text.trim();
            if line.unseen {
                self.print(&format!("{answer}\n"));
            }
            let yes = answer.eq_ignore_ascii_case("y") || answer.eq_ignore_ascii_case("yes");
            return self.answer(ctx, s, yes).await;
        }
        let text = line.text.trim();
        if text.is_empty() && s.waiting.is_none() {
            s.prompted = false;
            return true;
        }
        if s.waiting.is_some() && is_cancel(text) {
            // Not queued: stored now, so the dispatcher stops the running turn at once. Its
            // "Cancelled" is the answer being waited for; this line gets no reply of its own
            // (or "Nothing is running" if the answer won the race, printed and not waited for).
            // Typed unseen, it is not shown: the answer's own line ends with "Cancelled".
            let event = self.message(s, text);
            return self.deliver(ctx, &event).await;
        }
        s.queue.push_back(Typed {
            text: text.to_string(),
            unseen: line.unseen,
        });
        true
    }

    /// Sends `text` as the next message and waits for its reply. False on shutdown.
    async fn send_line(&self, ctx: &ChannelContext, s: &mut Session, text: String) -> bool {
        self.asked.store(0, Ordering::Relaxed);
        let event = self.message(s, &text);
        s.waiting = Some(event.platform_id.clone());
        self.deliver(ctx, &event).await
    }

    fn message(&self, s: &mut Session, text: &str) -> Inbound {
        let id = s.next_id();
        Inbound {
            platform_id: id.clone(),
            chat: ChatRef::new(LOCAL),
            sender: Sender::new(LOCAL),
            kind: InboundKind::Message {
                text: text.to_string(),
                attachments: Vec::new(),
                // Replies quote it, which tells this loop which message they answer.
                message_id: Some(id),
                reply_to: None,
            },
            reply_context: None,
            agent: None,
        }
    }

    /// Answers the question being asked with the first (approve) or second (deny) button.
    async fn answer(&self, ctx: &ChannelContext, s: &mut Session, yes: bool) -> bool {
        let Some(question) = s.asking.take() else {
            return true;
        };
        if !self.interactive {
            // Piped input: echo the answer so the transcript reads like the screen.
            self.print(if yes { "y\n" } else { "n\n" });
        }
        // The first button approves, the second denies (the daemon's prompt order).
        let Some(button) = question
            .buttons
            .get(if yes { 0 } else { 1 })
            .or(question.buttons.first())
        else {
            return true;
        };
        let event = Inbound {
            platform_id: s.next_id(),
            chat: ChatRef::new(LOCAL),
            sender: Sender::new(LOCAL),
            kind: InboundKind::Press(ButtonPress {
                press_id: String::new(),
                data: button.data.clone(),
                message: None,
            }),
            reply_context: None,
            agent: None,
        };
        self.deliver(ctx, &event).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_is_labelled_with_its_tool_and_arguments() {
        let prompt = "🔐 🏠 General wants to run `delete_task`. This deletes data.\n```\n{\n  \"id\": 3\n}\n```\nApprove within 5 minutes?";
        assert_eq!(question_label(prompt), "delete_task {\"id\":3}");
        assert_eq!(
            question_label("wants to run `x`. no block"),
            "x",
            "no arguments block"
        );
        assert_eq!(question_label("Approve?"), "this request");
    }

    #[test]
    fn a_prompt_is_shown_without_the_question_the_y_n_line_asks() {
        let prompt = "🔐 🏠 General wants to run `delete_task`. This deletes data.\n```\n{}\n```\nApprove within 5 minutes?";
        assert_eq!(
            split_question(prompt),
            (
                "🔐 🏠 General wants to run `delete_task`. This deletes data.\n```\n{}\n```",
                "Approve within 5 minutes?"
            )
        );
        // A prompt that does not end in a question is shown whole and asked plainly.
        assert_eq!(
            split_question("Run it.\nNow."),
            ("Run it.\nNow.", "Approve?")
        );
    }

    #[test]
    fn a_prompt_shows_its_arguments_once_without_fences() {
        let prompt = "🔐 🏠 General wants to run `delete_task`. This deletes data.\n```\n{\n  \"id\": 3\n}\n```\nApprove within 5 minutes?";
        let (body, _) = split_question(prompt);
        assert_eq!(
            without_arguments_block(body),
            "🔐 🏠 General wants to run `delete_task`. This deletes data."
        );
        // Text after the block stays; an unclosed fence is shown as it is.
        assert_eq!(
            without_arguments_block("Run:\n```\n{}\n```\nSure?"),
            "Run:\nSure?"
        );
        assert_eq!(without_arguments_block("Run:\n```\n{"), "Run:\n```\n{");
    }

    #[test]
    fn cancel_is_the_first_word() {
        assert!(is_cancel("/cancel"));
        assert!(is_cancel(" /CANCEL now"));
        assert!(!is_cancel("please /cancel"));
        assert!(!is_cancel("/cancelled"));
    }
}
