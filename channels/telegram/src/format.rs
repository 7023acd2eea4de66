//! Markdown as LLMs write it, rendered as Telegram HTML.
//!
//! Telegram's HTML dialect knows a handful of tags (`b i u s code pre a blockquote`) and insists
//! that every `<`, `>` and `&` outside a tag is escaped. LLM Markdown is loose, so the renderer
//! is forgiving: a delimiter without a partner stays literal text, and every tag it opens it
//! closes, so the output is well-formed whatever the input. Headings become bold lines, list
//! markers stay text, fenced code keeps its language.

use hearth_channel::split::Measure;

/// Telegram's message limit in UTF-16 code units, counted on the visible text.
pub const MAX_MESSAGE_LEN: usize = 4096;

/// One message's text as it goes to Telegram: the Markdown source (sent as plain text if
/// Telegram refuses the HTML) and its HTML rendering.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    pub markdown: String,
    /// `None` when the rendering would show more than `MAX_MESSAGE_LEN` units although the
    /// source fits: rendering can lengthen text (a `---` rule becomes a ten-character line),
    /// and the daemon's plan measured the source, so the source is sent as plain text instead.
    pub html: Option<String>,
}

/// Renders one message's Markdown (already within the limit, as the daemon plans it).
pub fn render(markdown: &str) -> Part {
    let html = markdown_to_html(markdown);
    Part {
        html: (visible_len(&html) <= MAX_MESSAGE_LEN).then_some(html),
        markdown: markdown.to_owned(),
    }
}

/// The length Telegram counts for an HTML text: tags removed, entities decoded, in UTF-16.
pub fn visible_len(html: &str) -> usize {
    Measure::Utf16.len(&html_to_plain(html))
}

/// The visible text of our own HTML output: tags dropped, the entities we emit decoded.
pub fn html_to_plain(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(at) = rest.find(['<', '&']) {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        if rest.starts_with('<') {
            match rest.find('>') {
                Some(end) => rest = &rest[end + 1..],
                None => {
                    out.push_str(rest);
                    rest = "";
                }
            }
        } else {
            let entity = [
                ("&lt;", '<'),
                ("&gt;", '>'),
                ("&amp;", '&'),
                ("&quot;", '"'),
            ]
            .into_iter()
            .find(|(name, _)| rest.starts_with(name));
            match entity {
                Some((name, c)) => {
                    out.push(c);
                    rest = &rest[name.len()..];
                }
                None => {
                    out.push('&');
                    rest = &rest[1..];
                }
            }
        }
    }
    out.push_str(rest);
    out
}

/// Renders Markdown as Telegram HTML.
pub fn markdown_to_html(markdown: &str) -> String {
    let lines: Vec<&str> = markdown.split('\n').collect();
    let mut blocks: Vec<String> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim_start();
        if let Some(info) = trimmed.strip_prefix("```") {
            let fence_indent = line.len() - trimmed.len();
            let mut code = Vec::new();
            i += 1;
            while i < lines.len() && !is_closing_fence(lines[i]) {
                // Content indented like the fence loses that indentation, as in CommonMark.
                let l = lines[i];
                let strip = l.len() - l.trim_start().len();
                code.push(&l[strip.min(fence_indent)..]);
                i += 1;
            }
            i += 1; // the closing fence, or past the end
            blocks.push(code_block(info, &code.join("\n")));
            continue;
        }
        if trimmed.starts_with('>') {
            let mut quoted = Vec::new();
            while i < lines.len() && lines[i].trim_start().starts_with('>') {
                let l = lines[i].trim_start().trim_start_matches('>');
                quoted.push(inline(l.strip_prefix(' ').unwrap_or(l)));
                i += 1;
            }
            blocks.push(format!("<blockquote>{}</blockquote>", quoted.join("\n")));
            continue;
        }
        blocks.push(block_line(line));
        i += 1;
    }
    blocks.join("\n")
}

fn is_closing_fence(line: &str) -> bool {
    let t = line.trim();
    t.len() >= 3 && t.chars().all(|c| c == '`')
}

fn code_block(info: &str, code: &str) -> String {
    // Only a plausible language name goes into the class attribute.
    let lang: String = info
        .split_whitespace()
        .next()
        .unwrap_or("")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || "+-#._".contains(*c))
        .collect();
    if lang.is_empty() {
        format!("<pre>{}</pre>", escape(code))
    } else {
        format!(
            "<pre><code class=\"language-{lang}\">{}</code></pre>",
            escape(code)
        )
    }
}

/// One line outside code blocks and quotes: a heading, a list item, a rule or a paragraph line.
fn block_line(line: &str) -> String {
    let trimmed = line.trim_start();
    let indent = &line[..line.len() - trimmed.len()];
    let hashes = trimmed.chars().take_while(|c| *c == '#').count();
    if (1..=6).contains(&hashes) && trimmed[hashes..].starts_with(' ') {
        let title = trimmed[hashes..].trim().trim_end_matches('#').trim_end();
        return format!("<b>{}</b>", inline(title));
    }
    let t = trimmed.trim_end();
    if t.len() >= 3
        && (t.chars().all(|c| c == '-')
            || t.chars().all(|c| c == '*')
            || t.chars().all(|c| c == '_'))
    {
        return "──────────".to_owned();
    }
    for marker in ["* ", "- ", "+ "] {
        if let Some(item) = trimmed.strip_prefix(marker) {
            return format!("{indent}• {}", inline(item));
        }
    }
    inline(line)
}

/// Renders the inline Markdown of one line.
fn inline(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len() + 16);
    render_inline(&chars, &mut out);
    out
}

fn render_inline(c: &[char], out: &mut String) {
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        match ch {
            '\\' if c.get(i + 1).is_some_and(|n| n.is_ascii_punctuation()) => {
                push_escaped(out, c[i + 1]);
                i += 2;
            }
            '`' => {
                let n = run(c, i, '`');
                match find_run(c, i + n, '`', n) {
                    Some(end) => {
                        let code: String = c[i + n..end].iter().collect();
                        out.push_str("<code>");
                        out.push_str(&escape(&code));
                        out.push_str("</code>");
                        i = end + n;
                    }
                    None => {
                        (0..n).for_each(|_| out.push('`'));
                        i += n;
                    }
                }
            }
            '*' | '_' | '~' => {
                let n = run(c, i, ch);
                let (tag, width) = match (ch, n) {
                    ('~', 1) => (None, 1),
                    ('~', _) => (Some("s"), 2),
                    (_, 1) => (Some("i"), 1),
                    _ => (Some("b"), 2),
                };
                let closing = tag.and_then(|_| find_closing(c, i, ch, width));
                match (tag, closing) {
                    (Some(tag), Some(end)) => {
                        out.push_str(&format!("<{tag}>"));
                        render_inline(&c[i + width..end], out);
                        out.push_str(&format!("</{tag}>"));
                        i = end + width;
                    }
                    _ => {
                        // No partner: the whole run is literal text.
                        (0..n).for_each(|_| out.push(ch));
                        i += n;
                    }
                }
            }
            '[' => match link(c, i) {
                Some((label_end, url, end)) => {
                    let url: String = url.iter().collect();
                    if ["http://", "https://", "tg://", "mailto:"]
                        .iter()
                        .any(|s| url.starts_with(s))
                    {
                        out.push_str(&format!("<a href=\"{}\">", escape_attr(&url)));
                        render_inline(&c[i + 1..label_end], out);
                        out.push_str("</a>");
                    } else {
                        render_inline(&c[i + 1..label_end], out);
                        out.push_str(&format!(" ({})", escape(&url)));
                    }
                    i = end;
                }
                None => {
                    out.push('[');
                    i += 1;
                }
            },
            _ => {
                push_escaped(out, ch);
                i += 1;
            }
        }
    }
}

/// How many `ch` start at `i`.
fn run(c: &[char], i: usize, ch: char) -> usize {
    c[i..].iter().take_while(|x| **x == ch).count()
}

/// The start of the next run of exactly `n` `ch` at or after `from`.
fn find_run(c: &[char], from: usize, ch: char, n: usize) -> Option<usize> {
    let mut j = from;
    while j < c.len() {
        if c[j] == ch {
            let len = run(c, j, ch);
            if len == n {
                return Some(j);
            }
            j += len;
        } else {
            j += 1;
        }
    }
    None
}

/// Finds the delimiter closing the one of `width` `ch` at `open`, following the usual flanking
/// rules: the opener is followed by non-space, the closer preceded by non-space, and `_` only
/// counts at word edges (so `snake_case` stays as it is). Code spans are skipped.
fn find_closing(c: &[char], open: usize, ch: char, width: usize) -> Option<usize> {
    let after = *c.get(open + width)?;
    if after.is_whitespace() {
        return None;
    }
    if ch == '_' && open > 0 && c[open - 1].is_alphanumeric() {
        return None;
    }
    let mut j = open + width;
    while j < c.len() {
        if c[j] == '`' {
            let n = run(c, j, '`');
            j = find_run(c, j + n, '`', n).map_or(j + n, |end| end + n);
            continue;
        }
        if c[j] == ch {
            let len = run(c, j, ch);
            let content = j > open + width;
            let flanked = !c[j - 1].is_whitespace();
            let word_edge = ch != '_' || !c.get(j + len).is_some_and(|n| n.is_alphanumeric());
            if content && flanked && word_edge && len >= width {
                // A longer run closes from its end (`***x***` is bold around italic).
                return Some(j + len - width);
            }
            j += len;
            continue;
        }
        j += 1;
    }
    None
}

/// `[label](url)` at `i`: the index of `]`, the URL, and the index after `)`.
fn link(c: &[char], i: usize) -> Option<(usize, &[char], usize)> {
    let close = i + 1 + c[i + 1..].iter().position(|x| *x == ']')?;
    if c.get(close + 1) != Some(&'(') || close == i + 1 {
        return None;
    }
    let start = close + 2;
    let mut depth = 0usize;
    for (k, x) in c[start..].iter().enumerate() {
        match x {
            '(' => depth += 1,
            ')' if depth == 0 => {
                let url = &c[start..start + k];
                if url.is_empty() || url.iter().any(|x| x.is_whitespace()) {
                    return None;
                }
                return Some((close, url, start + k + 1));
            }
            ')' => depth -= 1,
            _ => {}
        }
    }
    None
}

fn push_escaped(out: &mut String, c: char) {
    match c {
        '<' => out.push_str("&lt;"),
        '>' => out.push_str("&gt;"),
        '&' => out.push_str("&amp;"),
        _ => out.push(c),
    }
}

/// Escapes text for Telegram HTML.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    text.chars().for_each(|c| push_escaped(&mut out, c));
    out
}

fn escape_attr(text: &str) -> String {
    escape(text).replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn html(md: &str) -> String {
        markdown_to_html(md)
    }

    #[test]
    fn escapes_the_three_special_characters() {
        assert_eq!(html("a < b && c > d"), "a &lt; b &amp;&amp; c &gt; d");
        assert_eq!(html("<script>"), "&lt;script&gt;");
    }

    #[test]
    fn bold_italic_strike() {
        assert_eq!(html("**bold** and __also__"), "<b>bold</b> and <b>also</b>");
        assert_eq!(html("*it* and _it_"), "<i>it</i> and <i>it</i>");
        assert_eq!(html("~~gone~~"), "<s>gone</s>");
        assert_eq!(
            html("**bold *and it* too**"),
            "<b>bold <i>and it</i> too</b>"
        );
        assert_eq!(html("***both***"), "<b><i>both</i></b>");
    }

    #[test]
    fn loose_delimiters_stay_literal() {
        assert_eq!(html("snake_case_name"), "snake_case_name");
        assert_eq!(html("a_b < c & d"), "a_b &lt; c &amp; d");
        assert_eq!(html("2 * 3 * 4"), "2 * 3 * 4");
        assert_eq!(html("**unclosed"), "**unclosed");
        assert_eq!(html("a ** b"), "a ** b");
        assert_eq!(html("`open"), "`open");
        assert_eq!(html("~tilde~"), "~tilde~");
    }

    #[test]
    fn inline_code_is_escaped_and_not_parsed() {
        assert_eq!(
            html("run `a<b> && *x*`"),
            "run <code>a&lt;b&gt; &amp;&amp; *x*</code>"
        );
        assert_eq!(html("``a ` b``"), "<code>a ` b</code>");
        assert_eq!(html("**see `x*y`**"), "<b>see <code>x*y</code></b>");
    }

    #[test]
    fn fenced_code_keeps_language_and_escapes() {
        let md = "Here:\n```rust\nfn main() { if a < b && c > d {} }\n```\ndone";
        assert_eq!(
            html(md),
            "Here:\n<pre><code class=\"language-rust\">fn main() { if a &lt; b &amp;&amp; c &gt; d {} }</code></pre>\ndone"
        );
        assert_eq!(html("```\n**not bold**\n```"), "<pre>**not bold**</pre>");
        // An unclosed fence runs to the end and is still closed in HTML.
        assert_eq!(
            html("```py\nx = 1"),
            "<pre><code class=\"language-py\">x = 1</code></pre>"
        );
        // A hostile info string cannot break out of the attribute.
        assert_eq!(
            html("```\"><b>\nx\n```"),
            "<pre><code class=\"language-b\">x</code></pre>"
        );
    }

    #[test]
    fn links() {
        assert_eq!(
            html("see [the docs](https://example.org/a?b=1&c=\"2\")"),
            "see <a href=\"https://example.org/a?b=1&amp;c=&quot;2&quot;\">the docs</a>"
        );
        assert_eq!(
            html("[**bold** link](https://x.org/wiki/A_(b))"),
            "<a href=\"https://x.org/wiki/A_(b)\"><b>bold</b> link</a>"
        );
        assert_eq!(html("[odd](javascript:alert)"), "odd (javascript:alert)");
        assert_eq!(html("[not a link]"), "[not a link]");
    }

    #[test]
    fn headings_lists_quotes_rules() {
        assert_eq!(
            html("# Title\n## Sub *x* ##"),
            "<b>Title</b>\n<b>Sub <i>x</i></b>"
        );
        assert_eq!(html("#hashtag"), "#hashtag");
        assert_eq!(
            html("- one\n* two\n  + nested\n1. first"),
            "• one\n• two\n  • nested\n1. first"
        );
        assert_eq!(
            html("> quoted **bold**\n> second\nafter"),
            "<blockquote>quoted <b>bold</b>\nsecond</blockquote>\nafter"
        );
        assert_eq!(html("---"), "──────────");
    }

    #[test]
    fn backslash_escapes() {
        assert_eq!(html(r"\*not italic\*"), "*not italic*");
        assert_eq!(html(r"\<"), "&lt;");
    }

    #[test]
    fn plain_text_of_html() {
        let h = html("**a** &lt; `<b>` [l](https://x.org)");
        assert_eq!(html_to_plain(&h), "a &lt; <b> l");
        assert_eq!(visible_len("<b>😀</b>&amp;"), 3);
    }

    #[test]
    fn parts_fit_the_limit_in_utf16_with_fences_intact() {
        let mut md = String::from("Intro 😀 with **bold**\n\n```rust\n");
        for n in 0..600 {
            md.push_str(&format!("let x{n} = \"😀 <&>\";\n"));
        }
        md.push_str("```\n\nThe end.");
        let capabilities = hearth_channel::Capabilities {
            max_message_len: Some(MAX_MESSAGE_LEN),
            measure: Measure::Utf16,
            ..hearth_channel::Capabilities::default()
        };
        let reply = hearth_channel::OutboundMessage::text(hearth_channel::ChatRef::new("1"), md);
        let parts: Vec<Part> = hearth_channel::plan(&reply, &capabilities)
            .iter()
            .map(|p| render(&p.text))
            .collect();
        assert!(parts.len() >= 2, "{} parts", parts.len());
        for part in &parts {
            let html = part.html.as_deref().expect("rendered within the limit");
            assert!(visible_len(html) <= MAX_MESSAGE_LEN);
            assert!(Measure::Utf16.len(&part.markdown) <= MAX_MESSAGE_LEN);
            assert_eq!(
                html.matches("<pre>").count(),
                html.matches("</pre>").count()
            );
        }
        assert!(
            parts[1]
                .html
                .as_deref()
                .is_some_and(|h| h.starts_with("<pre><code class=\"language-rust\">"))
        );
    }

    #[test]
    fn a_rendering_longer_than_the_limit_is_sent_as_its_source() {
        // 1,000 rules: 3,999 units of source, but each rule renders as ten characters.
        let md = vec!["---"; 1000].join("\n");
        assert!(Measure::Utf16.len(&md) <= MAX_MESSAGE_LEN);
        assert!(visible_len(&markdown_to_html(&md)) > MAX_MESSAGE_LEN);
        let part = render(&md);
        assert_eq!(part.html, None);
        assert_eq!(part.markdown, md);
        assert_eq!(render("**b**").html.as_deref(), Some("<b>b</b>"));
    }
}
