//! Splitting long replies at a platform's message limit.
//!
//! Platforms count differently (Telegram in UTF-16 code units, Discord in characters, some in
//! bytes), so the limit comes with a [`Measure`]. Parts break at the most natural place that
//! fits: a paragraph break, then a line break, then a space, then anywhere — but never inside a
//! character, and never leaving a ```` ``` ```` code fence broken: a fence open at a split is
//! closed at the end of the part and reopened, with its language, at the start of the next one.

/// The unit a platform counts its message limit in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measure {
    /// Unicode scalar values (Discord, Matrix).
    Chars,
    /// UTF-8 bytes.
    Bytes,
    /// UTF-16 code units (Telegram); an emoji outside the BMP counts two.
    Utf16,
}

impl Measure {
    /// The length of `text` in this unit.
    pub fn len(self, text: &str) -> usize {
        match self {
            Measure::Chars => text.chars().count(),
            Measure::Bytes => text.len(),
            Measure::Utf16 => text.encode_utf16().count(),
        }
    }

    fn char_len(self, c: char) -> usize {
        match self {
            Measure::Chars => 1,
            Measure::Bytes => c.len_utf8(),
            Measure::Utf16 => c.len_utf16(),
        }
    }
}

/// Splits `text` into parts of at most `max_len` units each, fence markers included.
///
/// Text that fits comes back as one part, unchanged. The whitespace a split happens at (the
/// blank line, line break or space) is dropped; everything else is kept in order.
///
/// Empty text gives one empty part, so callers always have a last part to return a reference
/// to; whether an empty message may be sent is the platform's business.
///
/// Every part makes progress: when `max_len` is too small for even one character (or for one
/// character plus the fence markers), a part holds one character and may exceed the limit.
pub fn split_message(text: &str, max_len: usize, measure: Measure) -> Vec<String> {
    if measure.len(text) <= max_len {
        return vec![text.to_owned()];
    }
    let mut parts = Vec::new();
    let mut rest = text;
    // The fence left open by the previous part, reopened at the start of the next.
    let mut open: Option<Fence> = None;
    while !rest.is_empty() {
        let prefix = open.as_ref().map(Fence::reopen).unwrap_or_default();
        let prefix_len = measure.len(&prefix);
        // Whether the rest fits, looking at no more of it than the limit: measuring all of it
        // on every part would make splitting a huge text quadratic.
        let fits_whole =
            prefix_len <= max_len && prefix_end(rest, max_len - prefix_len, measure) >= rest.len();
        if fits_whole {
            parts.push(prefix + rest);
            break;
        }
        let mut budget = max_len.saturating_sub(prefix_len);
        let (part, next, state) = loop {
            let (body, next) = cut(rest, budget, measure, open.as_ref());
            let state = fence_after(open.clone(), body);
            let suffix = state.as_ref().map(|f| f.close(body)).unwrap_or_default();
            let total = prefix_len + measure.len(body) + measure.len(&suffix);
            if total <= max_len || budget == 0 {
                break (format!("{prefix}{body}{suffix}"), next, state);
            }
            // Too long once the fence is closed: try again with less room.
            budget = budget.saturating_sub(total - max_len);
        };
        parts.push(part);
        rest = next;
        open = state;
    }
    if parts.is_empty() {
        parts.push(String::new());
    }
    parts
}

/// The first part [`split_message`] would make of `text`, without splitting the rest: cheap on
/// a text of any size, for a preview, an edit that must stay one message, or a reply cut to a
/// maximum length. Text that fits comes back whole.
pub fn head(text: &str, max_len: usize, measure: Measure) -> String {
    let end = prefix_end(text, max_len, measure);
    if end >= text.len() {
        return text.to_owned();
    }
    // The first cut looks only a separator's width past the limit, and at the rest of the line
    // it falls in (to keep a fence line whole); a generous window gives the same first part.
    let window_end = text[end..]
        .char_indices()
        .nth(WINDOW_SLACK)
        .map_or(text.len(), |(i, _)| end + i);
    let window = &text[..window_end];
    split_message(window, max_len, measure)
        .into_iter()
        .next()
        .unwrap_or_default()
}

/// Characters past the limit [`head`] hands to the splitter.
const WINDOW_SLACK: usize = 1_024;

/// Cuts the longest natural head of `rest` that is at most `budget` units long. Returns the
/// head and what follows the break (the separator dropped). The head is never empty. `open` is
/// the fence open at the start of `rest`.
fn cut<'a>(
    rest: &'a str,
    budget: usize,
    measure: Measure,
    open: Option<&Fence>,
) -> (&'a str, &'a str) {
    let hard = prefix_end(rest, budget, measure);
    if hard >= rest.len() {
        return (rest, "");
    }
    let window = &rest[..hard];
    // A break in the first half of the window would leave a stub of a part; look for a finer
    // kind of break instead.
    let floor = hard / 2;
    for sep in ["\n\n", "\n", " "] {
        // A separator starting right after the window is dropped, so it may stick out.
        let search = rest.get(..hard + sep.len()).unwrap_or(window);
        if let Some(at) = search.rfind(sep)
            && at > floor
            && !inside_fence_line(rest, at)
            && !ends_with_opening_fence(open, &rest[..at])
            && !makes_fence_line(rest, at, at + sep.len())
        {
            return (&rest[..at], &rest[at + sep.len()..]);
        }
    }
    let mut at = hard;
    if inside_fence_line(rest, at) {
        // Move the cut before the fence line so the marker stays whole.
        at = rest[..at].rfind('\n').map_or(0, |nl| nl + 1);
    }
    // Nor may the next part start with backticks the text has in the middle of a line: move
    // the cut back until what follows it is no fence line.
    while at > 0 && makes_fence_line(rest, at, at) {
        at = rest[..at].char_indices().next_back().map_or(0, |(i, _)| i);
    }
    if at == 0 {
        // Not even one natural cut fits: take at least one character.
        at = if hard == 0 {
            rest.chars().next().map_or(rest.len(), char::len_utf8)
        } else {
            hard
        };
    }
    (&rest[..at], &rest[at..])
}

/// The byte index of the end of the longest prefix of `text` within `budget` units.
fn prefix_end(text: &str, budget: usize, measure: Measure) -> usize {
    let mut used = 0;
    for (i, c) in text.char_indices() {
        used += measure.char_len(c);
        if used > budget {
            return i;
        }
    }
    text.len()
}

/// Whether byte index `at` falls strictly inside a fence line (between its first character and
/// its end), where a cut would break the marker or separate it from its info string.
fn inside_fence_line(text: &str, at: usize) -> bool {
    let start = text[..at].rfind('\n').map_or(0, |nl| nl + 1);
    let end = text[at..].find('\n').map_or(text.len(), |nl| at + nl);
    at > start && at < end && Fence::parse(&text[start..end]).is_some()
}

/// Whether cutting a line of `text` in two (the head ending at byte `end`, the next part starting
/// at byte `next`) makes a fence line the text does not have: the head's last line or the next
/// part's first line would read as one on its own (a cut just before the backticks of "see
/// ````md", or inside "```a ` b", which is no fence because of its second backtick). Each part
/// is rendered alone, so it would open a code block the text never opened and hide the rest of
/// the reply in it.
fn makes_fence_line(text: &str, end: usize, next: usize) -> bool {
    let line_start = text[..end].rfind('\n').map_or(0, |nl| nl + 1);
    let line_end = text[next..].find('\n').map_or(text.len(), |nl| next + nl);
    // A cut at a line break (the separator dropped holds it) leaves both lines whole.
    let mid_line = end > line_start && next < line_end && !text[end..next].contains('\n');
    mid_line
        && (Fence::parse(&text[line_start..end]).is_some()
            || Fence::parse(&text[next..line_end]).is_some())
}

/// The fence open after `body`, given the one open before it.
pub(crate) fn fence_after(mut open: Option<Fence>, body: &str) -> Option<Fence> {
    for line in body.lines() {
        match &open {
            Some(fence) if fence.closed_by(line) => open = None,
            Some(_) => {}
            None => open = Fence::parse(line),
        }
    }
    open
}

/// Whether `head` ends with the line that opens a fence; a part cut there would end in an
/// empty code block.
fn ends_with_opening_fence(open: Option<&Fence>, head: &str) -> bool {
    let start = head.rfind('\n').map_or(0, |nl| nl + 1);
    Fence::parse(&head[start..]).is_some() && fence_after(open.cloned(), &head[..start]).is_none()
}

/// The longest language (in bytes) a reopened fence repeats; real ones are short ("rust",
/// "typescript", "objective-c").
const MAX_REOPENED_LANGUAGE: usize = 32;

/// An open code fence: its backtick run and info string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Fence {
    ticks: usize,
    info: String,
}

impl Fence {
    /// Reads a fence line: up to three spaces, three or more backticks, an info string.
    pub(crate) fn parse(line: &str) -> Option<Fence> {
        let trimmed = line.trim_start_matches(' ');
        if line.len() - trimmed.len() > 3 {
            return None;
        }
        let ticks = trimmed.len() - trimmed.trim_start_matches('`').len();
        if ticks < 3 {
            return None;
        }
        let info = trimmed[ticks..].trim();
        // CommonMark: a backtick fence's info string may not contain backticks.
        if info.contains('`') {
            return None;
        }
        Some(Fence {
            ticks,
            info: info.to_owned(),
        })
    }

    fn closed_by(&self, line: &str) -> bool {
        let trimmed = line.trim();
        trimmed.len() >= self.ticks && trimmed.bytes().all(|b| b == b'`')
    }

    /// The line that reopens this fence at the start of the next part: its backticks and its
    /// language (the info string's first word, all a renderer uses), or no language when that
    /// word is longer than [`MAX_REOPENED_LANGUAGE`]. The rest of a long info string would be
    /// repeated on every part and could by itself exceed the limit (a model that writes a whole
    /// paragraph on the fence line).
    pub(crate) fn reopen(&self) -> String {
        let language = self
            .info
            .split_whitespace()
            .next()
            .filter(|word| word.len() <= MAX_REOPENED_LANGUAGE)
            .unwrap_or_default();
        format!("{}{language}\n", "`".repeat(self.ticks))
    }

    /// The length in bytes of the markers a split adds around a part inside this fence: the
    /// reopening line and the closing one.
    pub(crate) fn markers_len(&self) -> usize {
        self.reopen().len() + self.ticks + 1
    }

    /// What closes this fence at the end of a part ending in `body`.
    fn close(&self, body: &str) -> String {
        let newline = if body.ends_with('\n') { "" } else { "\n" };
        format!("{newline}{}", "`".repeat(self.ticks))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Asserts the invariants every split must keep and returns the parts.
    fn split_checked(text: &str, max: usize, measure: Measure) -> Vec<String> {
        let parts = split_message(text, max, measure);
        assert!(!parts.is_empty());
        for part in &parts {
            assert!(
                measure.len(part) <= max,
                "part of {} units over {max}: {part:?}",
                measure.len(part)
            );
            // Every part on its own has balanced fences.
            assert_eq!(
                fence_after(None, part),
                None,
                "unbalanced fence in {part:?}"
            );
        }
        parts
    }

    fn words(s: &str) -> Vec<&str> {
        s.split_whitespace()
            .filter(|w| !w.starts_with("```"))
            .collect()
    }

    #[test]
    fn short_text_is_one_unchanged_part() {
        assert_eq!(
            split_message("hello\n\nworld", 100, Measure::Chars),
            ["hello\n\nworld"]
        );
        assert_eq!(split_message("abc", 3, Measure::Bytes), ["abc"]);
    }

    #[test]
    fn empty_text_is_one_empty_part() {
        assert_eq!(split_message("", 10, Measure::Utf16), [""]);
        assert_eq!(split_message("", 0, Measure::Chars), [""]);
    }

    #[test]
    fn six_thousand_chars_split_at_paragraphs_into_telegram_parts() {
        let paragraph = "lorem ipsum dolor sit amet ".repeat(11); // 297 chars
        let text = vec![paragraph.trim_end(); 20].join("\n\n");
        assert!(text.len() > 5_900);
        let parts = split_checked(&text, 4096, Measure::Utf16);
        assert_eq!(parts.len(), 2);
        // Cut at a paragraph break: no part starts or ends with a torn paragraph.
        for part in &parts {
            assert!(
                part.starts_with("lorem") && part.ends_with("amet"),
                "{part:?}"
            );
        }
        assert_eq!(parts.join("\n\n"), text);
    }

    #[test]
    fn prefers_line_breaks_over_spaces_and_spaces_over_anywhere() {
        let text = format!(
            "{}\n{}",
            "a ".repeat(30).trim_end(),
            "b ".repeat(30).trim_end()
        );
        let parts = split_checked(&text, 70, Measure::Chars);
        assert_eq!(parts[0], "a ".repeat(30).trim_end());

        let parts = split_checked("aaaa bbbb cccc", 10, Measure::Chars);
        assert_eq!(parts, ["aaaa bbbb", "cccc"]);
    }

    #[test]
    fn a_word_longer_than_the_limit_is_cut_anywhere() {
        let word = "x".repeat(25);
        let parts = split_checked(&format!("hi {word}"), 10, Measure::Chars);
        assert_eq!(parts.concat().replace(' ', ""), format!("hi{word}"));
        assert!(parts.iter().all(|p| !p.is_empty()));
    }

    #[test]
    fn emoji_at_the_boundary_is_not_split_in_utf16() {
        // 9 ASCII letters then emoji (2 UTF-16 units each): a 10-unit limit falls inside the
        // first emoji's surrogate pair.
        let text = format!("{}{}", "a".repeat(9), "😀".repeat(6));
        let parts = split_checked(&text, 10, Measure::Utf16);
        assert_eq!(parts[0], "a".repeat(9));
        assert_eq!(parts.concat(), text);
        for part in &parts[1..] {
            assert!(part.chars().all(|c| c == '😀'));
        }
    }

    #[test]
    fn multibyte_characters_are_not_split_in_bytes() {
        let text = "äöü".repeat(10); // 2 bytes each
        let parts = split_checked(&text, 7, Measure::Bytes);
        assert_eq!(parts.concat(), text);
        assert!(parts.iter().all(|p| p.len() == 6));
    }

    #[test]
    fn chars_count_emoji_as_one() {
        let text = "😀".repeat(10);
        let parts = split_checked(&text, 4, Measure::Chars);
        assert_eq!(parts.len(), 3);
        assert_eq!(parts.concat(), text);
    }

    #[test]
    fn a_long_code_block_is_closed_and_reopened_with_its_info_string() {
        let code: Vec<String> = (0..200).map(|i| format!("let x{i} = {i};")).collect();
        let text = format!("Here it is:\n\n```rust\n{}\n```\n\nDone.", code.join("\n"));
        let parts = split_checked(&text, 500, Measure::Chars);
        assert!(parts.len() > 3);
        for part in &parts[1..parts.len() - 1] {
            assert!(part.starts_with("```rust\n"), "{part:?}");
            assert!(part.ends_with("\n```"), "{part:?}");
        }
        assert!(parts[0].starts_with("Here it is:"));
        assert!(parts[parts.len() - 1].ends_with("Done."));
        // No code line is lost or torn.
        let joined = parts.join("\n");
        for line in &code {
            assert!(joined.lines().any(|l| l == line), "{line} missing");
        }
        assert_eq!(words(&parts.join("\n")), words(&text));
    }

    #[test]
    fn fence_markers_fit_even_when_a_code_line_fills_the_limit() {
        let text = format!("```python\n{}\n{}\n```", "y".repeat(40), "z".repeat(40));
        let parts = split_checked(&text, 30, Measure::Utf16);
        assert!(parts.iter().all(|p| p.starts_with("```python\n")));
        let content: String = parts
            .iter()
            .flat_map(|p| p.lines())
            .filter(|l| !l.starts_with("```"))
            .collect();
        assert_eq!(content, format!("{}{}", "y".repeat(40), "z".repeat(40)));
    }

    #[test]
    fn text_after_a_closed_fence_is_not_wrapped_in_one() {
        let text = format!("```\ncode\n```\n\n{}", "plain words ".repeat(20));
        let parts = split_checked(&text, 60, Measure::Chars);
        assert_eq!(parts[0].lines().next(), Some("```"));
        for part in &parts[1..] {
            assert!(!part.contains("```"), "{part:?}");
        }
    }

    #[test]
    fn longer_fences_close_with_as_many_backticks() {
        let text = format!("````md\n```\n{}\n````", "w ".repeat(40));
        let parts = split_checked(&text, 40, Measure::Chars);
        assert!(parts[1].starts_with("````md\n"));
    }

    /// Found by the outbound_plan fuzz target: a cut right before the backticks of a line like
    /// "xxxxxxxxxx````md" (text, not a fence) made the next part start with a fence line, so
    /// everything after it showed as code.
    #[test]
    fn a_cut_never_moves_backticks_to_the_start_of_a_line() {
        for text in [
            "xxxxxxxxxx````md\nplain words after it, and more of them",
            "some words ````md then plain words after it, and more of them",
            "```a long info ` then a backtick, so this line is no fence at all, and more words",
        ] {
            for max in 5..=30 {
                for measure in [Measure::Chars, Measure::Bytes, Measure::Utf16] {
                    let parts = split_message(text, max, measure);
                    assert!(
                        parts
                            .iter()
                            .flat_map(|p| p.lines())
                            .all(|line| Fence::parse(line).is_none()),
                        "{max} {measure:?}: a part starts a code fence: {parts:?}"
                    );
                    let visible =
                        |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
                    assert_eq!(
                        visible(&parts.concat()),
                        visible(text),
                        "{max} {measure:?}: text lost: {parts:?}"
                    );
                }
            }
        }
    }

    /// Found by the outbound_plan fuzz target: a fence line longer than the limit (a model that
    /// writes a paragraph after the backticks) was reopened whole on the next part, which was
    /// then over the limit by itself.
    #[test]
    fn a_fence_line_longer_than_the_limit_is_reopened_with_its_language_only() {
        let text = format!(
            "intro\n```rust {}\n{}```\nafter",
            "and a long info string ".repeat(10),
            "let x = 1;\n".repeat(30)
        );
        for measure in [Measure::Chars, Measure::Bytes, Measure::Utf16] {
            let parts = split_checked(&text, 120, measure);
            for part in &parts[2..parts.len() - 1] {
                assert!(part.starts_with("```rust\n"), "{part:?}");
            }
        }
        let long_language = format!("```{}\n{}```", "x".repeat(40), "code\n".repeat(40));
        let parts = split_checked(&long_language, 60, Measure::Chars);
        assert!(parts[1].starts_with("```\n"), "{parts:?}");
    }

    #[test]
    fn tiny_limits_still_make_progress() {
        let parts = split_message("😀😀", 1, Measure::Utf16);
        assert_eq!(parts, ["😀", "😀"]);
        let parts = split_message("```\nabc\n```", 2, Measure::Chars);
        assert!(!parts.is_empty());
        let parts = split_message("abc", 0, Measure::Chars);
        assert_eq!(parts, ["a", "b", "c"]);
    }

    #[test]
    fn mixed_texts_keep_their_content_at_many_limits() {
        // A small deterministic generator: no test dependency needed for a sweep. Fences have
        // no info string here so that reopened fences add only characters the check ignores.
        let pieces = [
            "word ", "😀", "é", "\n", "\n\n", "\n```\n", "```\n", "`x` ", "**b** ", "日本",
        ];
        let mut seed: u64 = 7;
        for round in 0..200 {
            let mut text = String::new();
            for _ in 0..(round % 60 + 5) {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                text.push_str(pieces[(seed >> 33) as usize % pieces.len()]);
            }
            for measure in [Measure::Chars, Measure::Bytes, Measure::Utf16] {
                for max in [16, 20, 40, 100] {
                    let parts = split_message(&text, max, measure);
                    let kept: String = parts
                        .concat()
                        .chars()
                        .filter(|c| !"` \n".contains(*c))
                        .collect();
                    let orig: String = text.chars().filter(|c| !"` \n".contains(*c)).collect();
                    assert_eq!(kept, orig, "{text:?} at {max} {measure:?}: {parts:?}");
                    for part in &parts {
                        assert!(measure.len(part) <= max, "{part:?} over {max} in {text:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn head_is_the_first_part_of_a_split_of_any_size() {
        let code: Vec<String> = (0..3_000).map(|i| format!("let x{i} = {i};")).collect();
        let text = format!("Intro 😀\n\n```rust\n{}\n```\n\nDone.", code.join("\n"));
        for measure in [Measure::Chars, Measure::Bytes, Measure::Utf16] {
            for max in [10, 100, 4096] {
                assert_eq!(
                    head(&text, max, measure),
                    split_message(&text, max, measure)[0],
                    "{measure:?} at {max}"
                );
            }
        }
        assert_eq!(head("short", 100, Measure::Chars), "short");
        assert_eq!(head("", 0, Measure::Chars), "");
    }

    #[test]
    fn measures_agree_on_ascii_and_differ_on_emoji() {
        assert_eq!(Measure::Utf16.len("ab😀"), 4);
        assert_eq!(Measure::Chars.len("ab😀"), 3);
        assert_eq!(Measure::Bytes.len("ab😀"), 6);
    }
}
