//! Markdown replies as Discord shows them. Discord renders Markdown itself (bold, italics,
//! code, fences, quotes, lists, `#`–`###` headings, `[links](url)`), so the text mostly passes
//! through; what Discord does not draw is rewritten so it does not show as raw markers.

/// Discord's longest message, in characters.
pub const MAX_MESSAGE_LEN: usize = 2000;

/// `markdown` in Discord's dialect: headings deeper than `###` become bold lines, and `---` /
/// `***` rules become a drawn line. Code blocks are left exactly as written.
pub fn render(markdown: &str) -> String {
    let mut out = Vec::new();
    let mut in_fence = false;
    for line in markdown.split('\n') {
        let trimmed = line.trim();
        if trimmed.starts_with("```") {
            in_fence = !in_fence;
            out.push(line.to_owned());
            continue;
        }
        if in_fence {
            out.push(line.to_owned());
            continue;
        }
        let hashes = trimmed.chars().take_while(|c| *c == '#').count();
        if hashes > 3 && trimmed[hashes..].starts_with(' ') {
            out.push(format!("**{}**", trimmed[hashes..].trim()));
        } else if trimmed.len() >= 3
            && (trimmed.chars().all(|c| c == '-') || trimmed.chars().all(|c| c == '*'))
        {
            out.push("──────────".to_owned());
        } else {
            out.push(line.to_owned());
        }
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_passes_through_except_what_discord_cannot_draw() {
        assert_eq!(render("**bold** and `code`"), "**bold** and `code`");
        assert_eq!(render("#### Deep\ntext"), "**Deep**\ntext");
        assert_eq!(render("a\n---\nb"), "a\n──────────\nb");
        let fenced = "```\n---\n#### x\n```";
        assert_eq!(render(fenced), fenced, "code is left alone");
    }
}
