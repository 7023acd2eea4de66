//! Every relative link in README.md, CONTRIBUTING.md, docs/*.md and bench/*.md resolves: the
//! file it names exists, and a `#anchor` names a heading of the Markdown file it points into, by
//! GitHub's rules for heading anchors. A section that moves or a heading that is renamed fails
//! here, instead of leaving a reader of the repository at a dead link.
//!
//! The code cites the docs too: a module header names `docs/architecture.md, "Routing"`, an
//! error message `docs/http-api.md`. Those citations are checked the same way: the file exists,
//! and a section named after it is a heading (or a bold lead-in, `**Web search.**`) of it.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

/// The documents whose links are checked, relative to the repository's root.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut found = vec![PathBuf::from("README.md"), PathBuf::from("CONTRIBUTING.md")];
    for dir in ["docs", "bench"] {
        let entries = std::fs::read_dir(root.join(dir))
            .unwrap_or_else(|err| panic!("{dir}/ cannot be read: {err}"));
        let mut pages: Vec<PathBuf> = entries
            .map(|entry| entry.expect("a directory entry").path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
            .map(|path| Path::new(dir).join(path.file_name().expect("a file name")))
            .collect();
        pages.sort();
        found.extend(pages);
    }
    found
}

/// The lines of a Markdown text outside fenced code blocks, with their line numbers (from 1).
/// A `#` line inside a fence is a shell or TOML comment, not a heading, and a `](` inside one
/// is code, not a link.
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<&str> = None;
    let mut lines = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker = ["```", "~~~"]
            .into_iter()
            .find(|marker| trimmed.starts_with(marker));
        match (fence, marker) {
            (None, Some(marker)) => fence = Some(marker),
            (Some(open), Some(marker)) if open == marker => fence = None,
            (None, None) => lines.push((index + 1, line)),
            _ => {}
        }
    }
    lines
}

/// A line with its inline code spans removed: `[x](y)` written as code is not a link.
fn without_code(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        out.push_str(&rest[..start]);
        let ticks = rest[start..].chars().take_while(|c| *c == '`').count();
        let after = &rest[start + ticks..];
        match after.find(&"`".repeat(ticks)) {
            Some(end) => rest = &after[end + ticks..],
            // An unclosed backtick is a literal backtick.
            None => {
                out.push_str(&rest[start..start + ticks]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The targets of the inline links and images of a Markdown text: `[text](target "title")`,
/// with the line each is on.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (number, line) in prose(text) {
        let line = without_code(line);
        let mut rest = line.as_str();
        while let Some(open) = rest.find("](") {
            let after = &rest[open + 2..];
            // A target may hold balanced parentheses; it ends at the one that closes the link.
            let mut depth = 0usize;
            let end = after.char_indices().find_map(|(i, c)| match c {
                '(' => {
                    depth += 1;
                    None
                }
                ')' if depth == 0 => Some(i),
                ')' => {
                    depth -= 1;
                    None
                }
                _ => None,
            });
            let Some(end) = end else { break };
            let target = after[..end].split_whitespace().next().unwrap_or("");
            let target = target.trim_start_matches('<').trim_end_matches('>');
            found.push((number, target.to_owned()));
            rest = &after[end + 1..];
        }
    }
    found
}

/// The anchor GitHub gives a heading: its text as rendered (markup and link targets dropped),
/// in lower case, without punctuation other than `-` and `_`, spaces turned into `-`.
fn anchor(heading: &str) -> String {
    // `[text](target)` shows as `text`.
    let mut text = String::new();
    let mut rest = heading;
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find("](") else {
            break;
        };
        let Some(end) = rest[open + close..].find(')') else {
            break;
        };
        text.push_str(&rest[..open]);
        text.push_str(&rest[open + 1..open + close]);
        rest = &rest[open + close + end + 1..];
    }
    text.push_str(rest);
    text.chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .flat_map(char::to_lowercase)
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown text's headings; a repeated heading gets `-1`, `-2` … as on GitHub.
fn anchors(text: &str) -> Vec<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut found = Vec::new();
    for (_, line) in prose(text) {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let heading = line[hashes..].trim().trim_end_matches('#').trim();
        let base = anchor(heading);
        let count = seen.entry(base.clone()).or_insert(0);
        found.push(if *count == 0 {
            base
        } else {
            format!("{base}-{count}")
        });
        *count += 1;
    }
    found
}

/// `a/b/../c` as `a/c`, without touching the file system; `None` when it climbs out of the
/// repository.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(name) => out.push(name),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// Every broken relative link of `document` (a path relative to `root`), as
/// `document:line: target: why`. `read` reads a file relative to `root`, `None` when it does
/// not exist.
fn broken_links(
    root: &Path,
    document: &Path,
    read: &dyn Fn(&Path) -> Option<String>,
) -> Vec<String> {
    let Some(text) = read(document) else {
        return vec![format!(
            "{}: the document does not exist",
            document.display()
        )];
    };
    let dir = document.parent().unwrap_or(Path::new(""));
    let mut broken = Vec::new();
    for (line, target) in links(&text) {
        let has_scheme = target.split_once(':').is_some_and(|(scheme, _)| {
            !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
        });
        if has_scheme {
            continue; // https:, mailto: … are not the repository's to check
        }
        let (path, fragment) = match target.split_once('#') {
            Some((path, fragment)) => (path, Some(fragment)),
            None => (target.as_str(), None),
        };
        let mut why = None;
        let file = if path.is_empty() {
            Some(document.to_path_buf())
        } else {
            normalize(&dir.join(path))
        };
        match (&file, fragment) {
            (None, _) => why = Some("points outside the repository".to_owned()),
            (Some(file), None) => {
                if read(file).is_none() && !root.join(file).exists() {
                    why = Some(format!("{} does not exist", file.display()));
                }
            }
            (Some(file), Some(fragment)) => match read(file) {
                None if root.join(file).is_dir() => {
                    why = Some(format!(
                        "{} is a directory: it has no headings",
                        file.display()
                    ));
                }
                None => why = Some(format!("{} does not exist", file.display())),
                Some(_) if file.extension().is_none_or(|ext| ext != "md") => {
                    why = Some(format!(
                        "{} is not Markdown: it has no headings",
                        file.display()
                    ));
                }
                Some(page) => {
                    if !anchors(&page).iter().any(|a| a == fragment) {
                        why = Some(format!("{} has no heading #{fragment}", file.display()));
                    }
                }
            },
        }
        if let Some(why) = why {
            broken.push(format!("{}:{line}: {target}: {why}", document.display()));
        }
    }
    broken
}

/// The places outside the docs that cite them: the daemon's and the channels' code, the tests,
/// the example configuration, the unit, the scripts and CI.
const CITING: &[&str] = &[
    "src",
    "channels",
    "testkit",
    "tests",
    "bench/src",
    "data",
    "systemd",
    "scripts",
    ".ci",
    "Cargo.toml",
    "deny.toml",
    "build.rs",
];

/// The files under `path` (itself, when it is a file) whose text cites the docs, skipping build
/// output and this file, whose tests cite pages that do not exist on purpose.
fn citing_files(root: &Path, path: &Path, found: &mut Vec<PathBuf>) {
    let full = root.join(path);
    if full.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(&full)
            .unwrap_or_else(|err| panic!("{} cannot be read: {err}", path.display()))
            .map(|entry| path.join(entry.expect("a directory entry").file_name()))
            .collect();
        entries.sort();
        for entry in entries {
            if !entry.ends_with("target") && !entry.ends_with("corpus") {
                citing_files(root, &entry, found);
            }
        }
    } else if path != Path::new("tests/docs.rs") {
        found.push(path.to_path_buf());
    }
}

/// The text of a citing file as one line of prose: Rust unit-test modules cut off (their test
/// data names files of a temporary directory), comment markers at line starts dropped, so a
/// citation broken over two comment lines reads as one.
fn citing_text(path: &Path, text: &str) -> String {
    let text = if path.extension().is_some_and(|ext| ext == "rs") {
        text.split("#[cfg(test)]").next().unwrap_or("")
    } else {
        text
    };
    text.lines()
        .map(|line| {
            let line = line.trim_start();
            ["//!", "///", "//", "##", "#"]
                .into_iter()
                .find_map(|marker| line.strip_prefix(marker))
                .unwrap_or(line)
                .trim()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The citations of the docs in a text: each path of a Markdown document at the root,
/// in `docs/` or in `bench/`, with the section named right after it (`, "Routing"` or
/// ` ("Running as a service")`), if any.
fn citations(text: &str) -> Vec<(String, Option<String>)> {
    let is_path_char = |c: char| c.is_ascii_alphanumeric() || "_./-".contains(c);
    let mut found = Vec::new();
    for start in ["docs/", "bench/", "CONTRIBUTING.md"] {
        for (at, _) in text.match_indices(start) {
            if text[..at].chars().next_back().is_some_and(is_path_char) {
                continue; // part of a longer path, such as tests/docs/
            }
            let path: String = text[at..]
                .chars()
                .take_while(|c| is_path_char(*c))
                .collect();
            let path = path.trim_end_matches('.');
            if !path.ends_with(".md") {
                continue;
            }
            // A section follows after `,` or `(`: `docs/x.md", …` ends a string instead.
            let after = text[at + path.len()..].trim_start();
            let section = after
                .strip_prefix([',', '('])
                .map(|rest| rest.trim_start_matches([' ', '(', '\\']))
                .and_then(|rest| rest.strip_prefix('"'))
                .and_then(|rest| rest.find(['"', '\\']).map(|end| rest[..end].to_owned()));
            found.push((path.to_owned(), section));
        }
    }
    found
}

/// Whether `section` is a heading of the Markdown `page`, or the bold lead-in of a paragraph
/// or a list item there (`**Web search.**`), as the pages name their smaller parts.
fn has_section(page: &str, section: &str) -> bool {
    let wanted = anchor(section);
    let heading = anchors(page).contains(&wanted);
    let lead_in = prose(page).iter().any(|(_, line)| {
        let line = line.trim_start().trim_start_matches("- ");
        line.strip_prefix("**").is_some_and(|rest| {
            rest.split("**").next().is_some_and(|bold| {
                anchor(bold.trim_end_matches('.').trim_end_matches(':')) == wanted
            })
        })
    });
    heading || lead_in
}

/// Every citation in `file` (relative to `root`) whose page or section does not exist.
fn broken_citations(root: &Path, file: &Path, text: &str) -> Vec<String> {
    let mut broken = Vec::new();
    for (path, section) in citations(&citing_text(file, text)) {
        let why = match (std::fs::read_to_string(root.join(&path)), &section) {
            (Err(_), _) => Some(format!("{path} does not exist")),
            (Ok(page), Some(section)) if !has_section(&page, section) => {
                Some(format!("{path} has no section \"{section}\""))
            }
            _ => None,
        };
        if let Some(why) = why {
            broken.push(format!("{}: {why}", file.display()));
        }
    }
    broken
}

#[test]
fn every_citation_of_the_docs_in_the_code_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for path in CITING {
        citing_files(root, Path::new(path), &mut files);
    }
    let mut cited = 0;
    let mut broken = Vec::new();
    for file in &files {
        // Binary files (fuzz corpora, images) cite nothing.
        let Ok(text) = std::fs::read_to_string(root.join(file)) else {
            continue;
        };
        cited += citations(&citing_text(file, &text)).len();
        broken.extend(broken_citations(root, file, &text));
    }
    assert!(
        cited > 20,
        "only {cited} citations found: the scan is broken"
    );
    assert!(
        broken.is_empty(),
        "citations of missing docs:\n{}",
        broken.join("\n")
    );
}

#[test]
fn citations_name_a_page_and_maybe_a_section() {
    let rust = "//! Which agent answers (docs/architecture.md, \"Routing\"): commands.\n\
                //! See the unit (docs/operations.md,\n\
                //! \"Running as a service\") and CONTRIBUTING.md.\n\
                #[cfg(test)]\nmod tests { const X: &str = \"docs/c.md\"; }\n";
    assert_eq!(
        citations(&citing_text(Path::new("a.rs"), rust)),
        [
            (
                "docs/architecture.md".to_owned(),
                Some("Routing".to_owned())
            ),
            (
                "docs/operations.md".to_owned(),
                Some("Running as a service".to_owned())
            ),
            ("CONTRIBUTING.md".to_owned(), None),
        ]
    );
    let page = "# Tools\n\n## Groups\n\n**Web search.** It asks …\n\n- **Passwords.** Apps …\n";
    assert!(has_section(page, "Groups"));
    assert!(has_section(page, "Web search"));
    assert!(has_section(page, "Passwords"));
    assert!(!has_section(page, "Nowhere"));
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let broken = broken_citations(
        root,
        Path::new("src/x.rs"),
        "//! (docs/architecture.md, \"No such part\"), docs/nothing.md and docs/web.md\n",
    );
    assert_eq!(
        broken,
        [
            "src/x.rs: docs/architecture.md has no section \"No such part\"",
            "src/x.rs: docs/nothing.md does not exist",
        ]
    );
}

#[test]
fn every_relative_link_in_the_docs_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |path: &Path| std::fs::read_to_string(root.join(path)).ok();
    let documents = documents(root);
    assert!(
        documents.len() > 4,
        "the docs were not found: {documents:?}"
    );
    let broken: Vec<String> = documents
        .iter()
        .flat_map(|document| broken_links(root, document, &read))
        .collect();
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn anchors_follow_githubs_rules() {
    assert_eq!(anchor("The owner's page"), "the-owners-page");
    assert_eq!(
        anchor("From the terminal to a chat app to a service"),
        "from-the-terminal-to-a-chat-app-to-a-service"
    );
    assert_eq!(
        anchor("2026-11-27, sixth: the same speed"),
        "2026-11-27-sixth-the-same-speed"
    );
    assert_eq!(anchor("Reading it: `--compare`"), "reading-it---compare");
    assert_eq!(anchor("The [HTTP API](http-api.md)"), "the-http-api");
    assert_eq!(anchor("max_turns and Größe"), "max_turns-and-größe");
    let text = "# Title\n\n## Notes\n\n```toml\n# not a heading\n```\n\n## Notes\n";
    assert_eq!(anchors(text), ["title", "notes", "notes-1"]);
}

#[test]
fn a_missing_file_a_missing_heading_and_a_link_out_of_the_repository_are_reported() {
    let root = Path::new("/nonexistent-root");
    let files: HashMap<&str, &str> = HashMap::from([
        (
            "docs/page.md",
            "# Page\n\n## Setup\n\nSee [setup](#setup), [the other](other.md#intro), \
             [gone](missing.md), [bad anchor](#nowhere), [up](../../etc/passwd), \
             [web](https://example.org/x#y) and `[code](not-a-link.md)`.\n\n\
             ```md\n[fenced](also-not-a-link.md)\n```\n",
        ),
        ("docs/other.md", "# Other\n\n## Intro (the start)\n"),
    ]);
    let read = |path: &Path| files.get(path.to_str()?).map(|text| (*text).to_owned());
    let broken = broken_links(root, Path::new("docs/page.md"), &read);
    assert_eq!(
        broken,
        [
            "docs/page.md:5: other.md#intro: docs/other.md has no heading #intro",
            "docs/page.md:5: missing.md: docs/missing.md does not exist",
            "docs/page.md:5: #nowhere: docs/page.md has no heading #nowhere",
            "docs/page.md:5: ../../etc/passwd: points outside the repository",
        ]
    );
    let missing = broken_links(root, Path::new("docs/none.md"), &read);
    assert_eq!(missing, ["docs/none.md: the document does not exist"]);
}
