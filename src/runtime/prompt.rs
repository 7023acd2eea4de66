//! The system prompt: the agent's base prompt followed by ordered sections, cut to a maximum
//! length from the end so the least important context goes first and the base prompt never.

/// One titled part of the system prompt after the base prompt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    pub title: String,
    pub body: String,
}

impl Section {
    pub fn new(title: impl Into<String>, body: impl Into<String>) -> Self {
        Self {
            title: title.into(),
            body: body.into(),
        }
    }
}

const ELLIPSIS: &str = "\n[…]";

/// Joins `base` and the non-empty `sections` (in order) into one prompt of at most `max_chars`
/// characters, or of `base` alone when `base` is already longer than that.
pub fn compose(base: &str, sections: &[Section], max_chars: usize) -> String {
    let mut prompt = base.trim_end().to_string();
    let mut used = prompt.chars().count();
    for section in sections.iter().filter(|s| !s.body.trim().is_empty()) {
        let text = format!("\n\n## {}\n{}", section.title, section.body.trim_end());
        let len = text.chars().count();
        if used + len <= max_chars {
            prompt.push_str(&text);
            used += len;
            continue;
        }
        // Keep what fits of this section, marked as cut, and drop everything after it.
        let room = max_chars.saturating_sub(used + ELLIPSIS.chars().count());
        let header = format!("\n\n## {}\n", section.title).chars().count();
        if room > header + 20 {
            prompt.extend(text.chars().take(room));
            prompt.push_str(ELLIPSIS);
        }
        break;
    }
    prompt
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_follow_the_base_in_order() {
        let prompt = compose(
            "You are kind.",
            &[Section::new("Time", "noon"), Section::new("Tools", "none")],
            1000,
        );
        assert_eq!(prompt, "You are kind.\n\n## Time\nnoon\n\n## Tools\nnone");
    }

    #[test]
    fn truncation_cuts_from_the_end_and_never_the_base() {
        let base = "B".repeat(50);
        let sections = [
            Section::new("First", "x".repeat(40)),
            Section::new("Second", "y".repeat(500)),
        ];
        let prompt = compose(&base, &sections, 200);
        assert!(prompt.starts_with(&base));
        assert!(prompt.contains(&"x".repeat(40)));
        assert!(prompt.chars().count() <= 200, "{}", prompt.chars().count());
        assert!(prompt.ends_with("[…]"));

        let tiny = compose(&base, &sections, 10);
        assert_eq!(
            tiny, base,
            "the base prompt is kept whole even over the limit"
        );
    }

    #[test]
    fn empty_sections_are_skipped_and_multibyte_text_is_cut_on_char_boundaries() {
        let prompt = compose(
            "base",
            &[
                Section::new("Empty", "  "),
                Section::new("Emoji", "😀".repeat(100)),
            ],
            60,
        );
        assert!(!prompt.contains("Empty"));
        assert!(prompt.chars().count() <= 60);
    }
}
