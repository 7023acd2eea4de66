//! Shared pieces of the fuzz targets in `fuzz/` (cargo-fuzz) and of the tests that replay their
//! corpora: the checks the outbound plan must pass on any text, a way to run the decoders'
//! async functions that never wait, and the corpus walker. Not part of the channel API.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use crate::split::{Fence, Measure, fence_after};
use crate::{Capabilities, ChatRef, Inbound, OutboundMessage, plan, plan_edit, preview_text};

/// Runs `future` to its end when it never waits (a decoder that is `async` only for the download
/// it does not reach on the fuzzed path). A future that waits is a broken assumption of the
/// fuzz target: it panics.
pub fn block_on_ready<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("the fuzzed path waited for something"),
    }
}

/// Plans `text` for a platform with `capabilities` (a limit is required) and checks what the
/// plan promises: every part fits, nothing but the whitespace at a break is lost, every part but
/// the last closes the code fences it opens (the last one is left as open as the text itself
/// was). `sent` is the adapter's rendering of a part with its length as the platform counts
/// it; it must fit too. The edit and the preview cuts must fit as well. Sizes are not checked
/// where the limit is too small for a fence's markers (the splitter's one exception). Panics on
/// a broken promise.
pub fn check_plan(text: &str, capabilities: &Capabilities, sent: impl Fn(&str) -> usize) {
    let max = capabilities
        .max_message_len
        .expect("check_plan needs a limit");
    let measure = capabilities.measure;
    let message = OutboundMessage::text(ChatRef::new("fuzz"), text);
    let parts = plan(&message, capabilities);
    assert!(!parts.is_empty(), "no part planned");
    let fits = !too_small_for_fences(text, max);
    for (index, part) in parts.iter().enumerate() {
        assert_eq!((part.index, part.count), (index, parts.len()));
        if fits {
            let len = measure.len(&part.text);
            assert!(len <= max, "part {index} is {len} units, over {max}");
            let shown = sent(&part.text);
            assert!(
                shown <= max,
                "part {index} is sent as {shown} units, over {max}"
            );
        }
        if index + 1 < parts.len() {
            assert_eq!(
                fence_after(None, &part.text),
                None,
                "part {index} leaves a code fence open"
            );
        }
    }
    let last = &parts[parts.len() - 1].text;
    assert_eq!(
        fence_after(None, last).is_some(),
        fence_after(None, text).is_some(),
        "the last part's fences differ from the text's"
    );
    let joined: String = parts.iter().map(|p| p.text.as_str()).collect();
    assert_kept(text, &joined);

    for cut in [
        plan_edit(&message, capabilities).text,
        preview_text(text, capabilities),
    ] {
        let len = measure.len(&cut);
        assert!(
            !fits || len <= max,
            "an edit or preview of {len} units, over {max}"
        );
        assert!(
            text.starts_with(&cut) || fence_after(None, &cut).is_none(),
            "a cut that is not the text's beginning and leaves a fence open"
        );
    }
}

/// Asserts that every character of `original` but whitespace is in `parts`, in order (parts
/// may add fence markers around them).
fn assert_kept(original: &str, parts: &str) {
    let mut shown = parts.chars().filter(|c| !c.is_whitespace());
    for (at, c) in original.char_indices().filter(|(_, c)| !c.is_whitespace()) {
        assert!(
            shown.any(|s| s == c),
            "text lost from byte {at} on: {:?}",
            &original[at..original.len().min(at + 40)]
        );
    }
}

/// `data` as a reply's Markdown, planned with the plan alone (nothing rendered) at small limits
/// in each measure, where a fuzzer finds the breaks at the limit quickly. The platforms' own
/// limits and renderings are checked by their crates' `fuzzing::outbound_plan`.
pub fn outbound_plan(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    for (max, measure) in [
        (SMALL_LIMIT, Measure::Chars),
        (SMALL_LIMIT, Measure::Bytes),
        (SMALL_LIMIT, Measure::Utf16),
    ] {
        let capabilities = Capabilities {
            max_message_len: Some(max),
            measure,
            ..Capabilities::default()
        };
        check_plan(&text, &capabilities, as_is(measure));
    }
}

/// The small limit [`outbound_plan`] splits at.
const SMALL_LIMIT: usize = 120;

/// Whether `max` is too small for the splitter's promise on `text`, its one exception: a part
/// may exceed a limit too small for one character and the markers that close and reopen one of
/// the text's fences (a fence of a hundred backticks at a limit of 120).
fn too_small_for_fences(text: &str, max: usize) -> bool {
    let markers = text
        .lines()
        .filter_map(Fence::parse)
        .map(|fence| fence.markers_len())
        .max()
        .unwrap_or(0);
    markers * 2 + 8 > max
}

/// Checks that `event` is storable as the daemon's inbox stores it: as JSON, read back the same.
pub fn check_stored(event: &Inbound) {
    let stored = serde_json::to_string(event).expect("an event serializes");
    let loaded: Inbound = serde_json::from_str(&stored).expect("a stored event loads");
    assert_eq!(&loaded, event, "the stored event loads differently");
}

/// The length of `text` in `measure`, for adapters whose sent text is the part as it is.
pub fn as_is(measure: Measure) -> impl Fn(&str) -> usize {
    move |text| measure.len(text)
}

/// Calls `check` on every file of the target's corpus (`fuzz/corpus/<target>/`, where the
/// inputs of crashes hearth fixed are kept as `regression-*`), naming the file that fails.
/// Returns how many files ran; a corpus that is missing or empty is an error.
pub fn replay(target: &str, check: impl Fn(&[u8])) -> usize {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&corpus)
        .map(|entries| entries.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    assert!(
        !files.is_empty(),
        "no corpus for the fuzz target {target} at {}",
        corpus.display()
    );
    for file in &files {
        let data = std::fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&data)));
        if let Err(panic) = result {
            eprintln!("fuzz corpus file {} fails", file.display());
            std::panic::resume_unwind(panic);
        }
    }
    files.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_keeps_its_promises_on_fenced_text() {
        let text = format!("intro\n```rust\n{}```\nafter", "let x = 1;\n".repeat(40));
        for measure in [Measure::Chars, Measure::Bytes, Measure::Utf16] {
            let capabilities = Capabilities {
                max_message_len: Some(60),
                measure,
                ..Default::default()
            };
            check_plan(&text, &capabilities, as_is(measure));
        }
    }

    #[test]
    #[should_panic(expected = "text lost")]
    fn lost_text_is_caught() {
        assert_kept("abc def", "abc de");
    }

    #[test]
    fn outbound_plan_corpus() {
        replay("outbound_plan", outbound_plan);
    }
}
