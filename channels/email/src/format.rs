//! Markdown as LLMs write it, as the HTML part of a reply mail. The text/plain part carries the
//! Markdown source itself, which reads well as plain text.
//!
//! Small and forgiving: paragraphs, line breaks, fenced code, headings as bold lines, `**bold**`,
//! `*italic*`, `` `code` ``; everything else is escaped text, so the output is well-formed
//! whatever the input.

/// The reply's HTML document.
pub fn to_html(markdown: &str) -> String {
    let mut html = String::from(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"></head><body style=\"font-family: sans-serif\">\n",
    );
    let mut in_code = false;
    let mut paragraph: Vec<String> = Vec::new();
    let flush = |paragraph: &mut Vec<String>, html: &mut String| {
        if !paragraph.is_empty() {
            html.push_str("<p>");
            html.push_str(&paragraph.join("<br>\n"));
            html.push_str("</p>\n");
            paragraph.clear();
        }
    };
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            if in_code {
                html.push_str("</code></pre>\n");
            } else {
                flush(&mut paragraph, &mut html);
                html.push_str("<pre><code>");
            }
            in_code = !in_code;
            continue;
        }
        if in_code {
            html.push_str(&escape(line));
            html.push('\n');
            continue;
        }
        if line.trim().is_empty() {
            flush(&mut paragraph, &mut html);
            continue;
        }
        let heading = line.trim_start();
        if heading.starts_with('#') {
            let title = heading.trim_start_matches('#');
            if title.starts_with(' ') {
                flush(&mut paragraph, &mut html);
                html.push_str("<p><b>");
                html.push_str(&inline(title.trim()));
                html.push_str("</b></p>\n");
                continue;
            }
        }
        paragraph.push(inline(line));
    }
    if in_code {
        html.push_str("</code></pre>\n");
    }
    flush(&mut paragraph, &mut html);
    html.push_str("</body></html>\n");
    html
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Inline markup of one line: `code`, **bold**, *italic*; unmatched markers stay literal.
fn inline(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while !rest.is_empty() {
        let (marker, tag) = if rest.starts_with('`') {
            ("`", "code")
        } else if rest.starts_with("**") {
            ("**", "b")
        } else if rest.starts_with('*') && !rest.starts_with("* ") {
            ("*", "i")
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push_str(&escape(&c.to_string()));
            rest = &rest[c.len_utf8()..];
            continue;
        };
        let after = &rest[marker.len()..];
        match after.find(marker).filter(|&end| end > 0) {
            Some(end) => {
                let inner = &after[..end];
                let body = if tag == "code" {
                    escape(inner)
                } else {
                    inline(inner)
                };
                out.push_str(&format!("<{tag}>{body}</{tag}>"));
                rest = &after[end + marker.len()..];
            }
            None => {
                out.push_str(&escape(marker));
                rest = after;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_basics_render_and_text_is_escaped() {
        let html = to_html("Hi **bold** and `a<b` and a_b < c & d\n\n```\nx < y\n```\n# Title");
        assert!(html.contains("<b>bold</b>"), "{html}");
        assert!(html.contains("<code>a&lt;b</code>"), "{html}");
        assert!(html.contains("a_b &lt; c &amp; d"), "{html}");
        assert!(
            html.contains("<pre><code>x &lt; y\n</code></pre>"),
            "{html}"
        );
        assert!(html.contains("<p><b>Title</b></p>"), "{html}");
        assert!(to_html("a ** b").contains("a ** b"));
    }
}
