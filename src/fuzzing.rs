//! The bodies of the `tool_arguments`, `feed` and `pdf_text` fuzz targets in `fuzz/`, also run
//! on their corpora by the tests below. Not part of hearth's API.
//!
//! `pdf_text`: any bytes, read as a PDF the way `hearth __extract-pdf` reads them
//! ([`crate::pdf::extract`]) and shown as the model would see them. Either the text comes back
//! or an error that says "could not read this PDF: …". The daemon runs the parser in a child
//! process because it may panic; a panic found here says where, and a panic in hearth's own
//! code (the page walk, the cut, the ranges) is a bug.
//!
//! A model may send any JSON as a tool's arguments. Each input names a built-in tool (its first
//! line) and gives it arguments (the rest, as JSON); they go through the runtime's own gate
//! ([`prepare`]: the JSON Schema, the list limits, the permission) and, when the gate lets them
//! through, to the tool itself, against a database of its own. Nothing may panic, and a call the
//! schema let through either succeeds or fails with a message the model can read. Tools that
//! reach outside hearth (the `web`, `weather` and `feeds` groups: network; the `files` group: the
//! file system) are only validated, never run: a fuzzer must not send requests or write files.

use std::path::PathBuf;
use std::sync::OnceLock;

use serde_json::Value;

use crate::config::Autonomy;
use crate::runtime::tools::{Toolbox, UserPolicy, prepare};
use crate::store::Store;
use crate::tool::{Permission, ToolContext, ToolError, ToolRegistry, standalone_context};

/// The groups whose tools are validated but never run.
const NOT_RUN: [&str; 4] = ["web", "files", "weather", "feeds"];

struct Bench {
    runtime: tokio::runtime::Runtime,
    registry: ToolRegistry,
    ctx: ToolContext,
}

/// Where the fuzzed tools keep their database: one directory per process, made anew.
pub fn tool_workdir() -> PathBuf {
    std::env::temp_dir().join(format!("hearth-fuzz-tools-{}", std::process::id()))
}

fn bench() -> &'static Bench {
    static BENCH: OnceLock<Bench> = OnceLock::new();
    BENCH.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime for the fuzzed tools");
        let dir = tool_workdir();
        // Left over from an earlier process with the same id: start clean.
        let _ = std::fs::remove_dir_all(&dir); // absent is fine
        std::fs::create_dir_all(&dir).expect("a directory for the fuzzed tools");
        let url = format!("sqlite://{}", dir.join("tools.db").display());
        let ctx = runtime.block_on(async {
            let store = Store::open(&url).await.expect("the fuzzed tools' database");
            standalone_context(store, &dir, "fuzz")
                .await
                .expect("a user for the fuzzed tools")
        });
        Bench {
            runtime,
            registry: ToolRegistry::with_builtin(),
            ctx,
        }
    })
}

/// One fuzzed call: the built-in tool named on the first line, with the rest as its arguments'
/// JSON. (By name rather than by position, so a corpus outlives tools being added.)
pub fn tool_arguments(data: &[u8]) {
    let Some(newline) = data.iter().position(|&b| b == b'\n') else {
        return;
    };
    let (Ok(name), Ok(arguments)) = (
        std::str::from_utf8(&data[..newline]),
        serde_json::from_slice::<Value>(&data[newline + 1..]),
    ) else {
        return;
    };
    let bench = bench();
    let Some(tool) = bench.registry.get(name) else {
        return;
    };
    let info = tool.info();
    let toolbox = Toolbox {
        tools: vec![tool.clone()],
        meta: false,
    };
    let policy = UserPolicy {
        user_id: bench.ctx.user_id,
        permission: Permission::Admin,
        autonomy: Autonomy::Full,
    };
    let prepared = match prepare(&bench.registry, &toolbox, &info.name, arguments, &policy) {
        Ok(prepared) => prepared,
        Err(refusal) => {
            assert!(
                refusal.message.contains(&info.name),
                "a refusal that does not name the tool: {}",
                refusal.message
            );
            return;
        }
    };
    if NOT_RUN.contains(&info.group.as_str()) {
        return;
    }
    let result = bench
        .runtime
        .block_on(tool.call(&bench.ctx, prepared.arguments));
    if let Err(ToolError::InvalidArguments(message) | ToolError::Failed(message)) = result {
        assert!(
            !message.trim().is_empty(),
            "{} failed without saying why",
            info.name
        );
    }
}

/// The body of the `feed` fuzz target: any bytes a feed's server may send, through the same
/// parse `read_feeds` runs (feed-rs, the item keys, HTML to text). Nothing may panic: a panic in
/// the daemon aborts it (`panic = "abort"`), and a feed is anyone's text.
pub fn feed(data: &[u8]) {
    if let Ok(items) = crate::tool::feeds::parse(data, "https://feeds.example.org/feed") {
        for item in items {
            assert!(!item.key.is_empty(), "an item without a key");
        }
    }
}

/// One fuzzed PDF: read, then shown within the budget.
pub fn pdf_text(data: &[u8]) {
    use crate::pdf::{TEXT_BUDGET, extract};
    match extract(data, None, TEXT_BUDGET) {
        Ok(read) => {
            assert!(read.pages.len() <= read.wanted.len());
            let shown = read.render(TEXT_BUDGET, &|pages| format!("ask for {pages}"));
            assert!(!shown.trim().is_empty(), "a reading that shows nothing");
        }
        Err(err) => assert!(
            err.to_string().starts_with("could not read this PDF: "),
            "{err}"
        ),
    }
}

/// The targets' corpora (`fuzz/corpus/`, fixed crashes kept there as `regression-*`) as
/// regression tests: every input the fuzzer kept must still pass.
#[cfg(test)]
mod tests {
    #[test]
    fn feed_corpus() {
        hearth_channel::fuzzing::replay("feed", super::feed);
    }

    #[test]
    fn pdf_text_corpus() {
        hearth_channel::fuzzing::replay("pdf_text", super::pdf_text);
    }

    #[test]
    fn tool_arguments_corpus() {
        hearth_channel::fuzzing::replay("tool_arguments", super::tool_arguments);
        // This test process's tool database.
        let _ = std::fs::remove_dir_all(super::tool_workdir()); // best effort
    }
}
