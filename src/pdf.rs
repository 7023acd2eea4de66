//! The text of a PDF, for the model: a PDF that arrives in a chat (`pipeline/attachments.rs`)
//! and the `read_pdf` tool (`tool/file.rs`) both come here (docs/architecture.md, "Rooms").
//!
//! The PDF crates panic on malformed files, and hearth's release profile aborts on a panic, so
//! the daemon never parses a PDF itself: [`Reader::read`] hands the bytes to a child process of
//! hearth's own binary (`hearth __extract-pdf`, `pdf/child.rs`) that runs [`extract`] under
//! memory, CPU-time and wall-clock limits. Whatever happens there (a panic, memory running out,
//! a loop, garbage on its stdout) comes back as a [`PdfError`] that reads "could not read this
//! PDF: …", and the daemon goes on.
//!
//! What the model gets ([`Extraction::render`]) is cut at a page boundary with a line saying
//! which pages were left out and how to ask for them; pages without a text layer are named
//! (a scanned document says it is scanned, not empty). Callers wrap it in
//! [`crate::tool::untrusted::Untrusted`]: a PDF's text is data from outside.

mod child;

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

pub use child::{EXTRACT_ARG, Limits, Reader, child_main, use_binary};

/// Most characters of PDF text the model gets in one go: an attachment, or one `read_pdf` call.
pub const TEXT_BUDGET: usize = 60_000;

/// The characters of PDF text for a model whose window is `tokens`: about an eighth of the
/// window (a token is three to four characters), so the text, the prompt and the conversation
/// fit a small local model too; at most [`TEXT_BUDGET`], at least 2,000.
pub fn budget_for_window(tokens: u32) -> usize {
    usize::try_from(tokens / 2)
        .unwrap_or(TEXT_BUDGET)
        .clamp(2_000, TEXT_BUDGET)
}

/// A page with fewer visible characters than this has no text layer worth the name (a scan,
/// a picture, a page number alone).
const EMPTY_PAGE: usize = 20;

/// Why a PDF could not be read. Its text is what the owner and the model read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[non_exhaustive]
pub enum PdfError {
    #[error("could not read this PDF: it is protected by a password")]
    Encrypted,
    #[error("could not read this PDF: it is not a PDF file (it does not start with %PDF-)")]
    NotPdf,
    #[error("could not read this PDF: it is damaged or malformed ({0})")]
    Malformed(String),
    #[error("could not read this PDF: it has no pages")]
    NoPages,
    #[error(
        "could not read this PDF: it has {total} pages, and none of the pages asked for ({asked}) is among them"
    )]
    NoSuchPages { asked: String, total: u32 },
    #[error("could not read this PDF: reading it needed more than the {0} of memory allowed")]
    OutOfMemory(String),
    #[error("could not read this PDF: reading it took longer than the {0} allowed")]
    TooSlow(String),
    #[error("could not read this PDF: the reader failed on it ({0})")]
    Crashed(String),
    #[error("could not read this PDF: the reader could not be started ({0})")]
    NotStarted(String),
}

/// Which pages to read: `1-5,7`, `10-` (10 to the end); 1-based, in the order given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageSet {
    ranges: Vec<(u32, Option<u32>)>,
}

impl PageSet {
    /// Most ranges one request may name.
    const MAX_RANGES: usize = 100;

    /// Parses `1-5,7` or `10-`; the error says what is wrong in words the model can act on.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut ranges = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let number = |s: &str| {
                s.trim()
                    .parse::<u32>()
                    .ok()
                    .filter(|&n| n >= 1)
                    .ok_or_else(|| {
                        format!("pages {text:?}: {s:?} is not a page number (pages count from 1)")
                    })
            };
            let range = match part.split_once('-') {
                None => {
                    let n = number(part)?;
                    (n, Some(n))
                }
                Some((from, to)) if to.trim().is_empty() => (number(from)?, None),
                Some((from, to)) => {
                    let (from, to) = (number(from)?, number(to)?);
                    if to < from {
                        return Err(format!("pages {text:?}: {from}-{to} runs backwards"));
                    }
                    (from, Some(to))
                }
            };
            ranges.push(range);
        }
        if ranges.is_empty() {
            return Err(format!(
                "pages {text:?} names no page; write them like \"1-5,7\""
            ));
        }
        if ranges.len() > Self::MAX_RANGES {
            return Err(format!(
                "pages names {} ranges; at most {} are read at once",
                ranges.len(),
                Self::MAX_RANGES
            ));
        }
        Ok(Self { ranges })
    }

    /// The pages of a document of `total` pages this set names, in order, each once.
    fn pages(&self, total: u32) -> Vec<u32> {
        let mut seen = std::collections::BTreeSet::new();
        let mut out = Vec::new();
        for &(from, to) in &self.ranges {
            let to = to.unwrap_or(total).min(total);
            for n in from..=to {
                if seen.insert(n) {
                    out.push(n);
                }
            }
        }
        out
    }
}

impl std::fmt::Display for PageSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self
            .ranges
            .iter()
            .map(|&(from, to)| match to {
                Some(to) if to == from => from.to_string(),
                Some(to) => format!("{from}-{to}"),
                None => format!("{from}-"),
            })
            .collect();
        f.write_str(&parts.join(","))
    }
}

/// One page's text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Page {
    pub number: u32,
    pub text: String,
    /// Set when the page's content could not be decoded (its text may be partial or empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What [`extract`] read: the pages asked for, in order, until the text budget was spent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Extraction {
    /// Pages in the document.
    pub total_pages: u32,
    /// Pages asked for (all of them when no set was given).
    pub wanted: Vec<u32>,
    /// The pages read, a prefix of `wanted`.
    pub pages: Vec<Page>,
}

/// Reads the text of `wanted` pages (all when `None`) from a PDF, stopping once `max_chars`
/// characters are read (the page that crosses the line is kept whole). This is what the child
/// process runs and what the fuzz target drives; the daemon calls it only through [`Reader`],
/// because the PDF parser may panic.
pub fn extract(
    bytes: &[u8],
    wanted: Option<&PageSet>,
    max_chars: usize,
) -> Result<Extraction, PdfError> {
    // A PDF's header may follow some junk, but within its first kilobyte.
    let head = &bytes[..bytes.len().min(1024)];
    if !head.windows(5).any(|w| w == b"%PDF-") {
        return Err(PdfError::NotPdf);
    }
    let document = lopdf::Document::load_mem(bytes).map_err(|err| malformed(&err))?;
    // Loading decrypts a file whose user password is empty; one that needs a password stays
    // encrypted. (`is_encrypted` sees only an /Encrypt given by reference, not inline.)
    if document.trailer.get(b"Encrypt").is_ok() && !document.was_encrypted() {
        return Err(PdfError::Encrypted);
    }
    let numbers = document.get_pages();
    let total = u32::try_from(numbers.len()).unwrap_or(u32::MAX);
    if total == 0 {
        return Err(PdfError::NoPages);
    }
    let wanted: Vec<u32> = match wanted {
        Some(set) => {
            let pages = set.pages(total);
            if pages.is_empty() {
                return Err(PdfError::NoSuchPages {
                    asked: set.to_string(),
                    total,
                });
            }
            pages
        }
        None => (1..=total).collect(),
    };
    let mut pages = Vec::new();
    let mut read = 0;
    for &number in &wanted {
        if read >= max_chars {
            break;
        }
        let Some(&id) = numbers.get(&number) else {
            continue;
        };
        let (text, error) = match page_text(&document, id) {
            Ok(text) => (tidy(&text), None),
            Err(err) => (
                String::new(),
                Some(crate::text::clip(&err.to_string(), 200)),
            ),
        };
        read += text.chars().count();
        pages.push(Page {
            number,
            text,
            error,
        });
    }
    // Not one page could be decoded: the file is damaged, not scanned.
    if let Some(error) = pages
        .iter()
        .all(|p| p.error.is_some() && p.text.is_empty())
        .then(|| pages.first().and_then(|p| p.error.clone()))
        .flatten()
    {
        return Err(PdfError::Malformed(error));
    }
    Ok(Extraction {
        total_pages: total,
        wanted,
        pages,
    })
}

/// Most bytes one page's content (or a font's encoding) may decompress to: a small crafted
/// stream must not inflate to gigabytes.
const MAX_PAGE_CONTENT: usize = 64 * 1024 * 1024;

/// The text a page shows, in content order, with a line break where the text moves to
/// another line and a space where it moves along one. (lopdf's own `extract_text` breaks lines
/// only at `T*` and `ET`, so lines placed with `Td` or `Tm`, as most writers place them, would
/// run into each other.) Positions are followed through `cm` translations and `q`/`Q`, not
/// through rotation or scaling: enough to tell lines apart.
fn page_text(document: &lopdf::Document, page: lopdf::ObjectId) -> Result<String, lopdf::Error> {
    use lopdf::Object;
    let encodings: std::collections::BTreeMap<Vec<u8>, lopdf::Encoding<'_>> = document
        .get_page_fonts(page)?
        .into_iter()
        .filter_map(|(name, font)| {
            let encoding = font.get_font_encoding_with_limit(document, MAX_PAGE_CONTENT);
            encoding.ok().map(|encoding| (name, encoding))
        })
        .collect();
    // A content stream the page names but the file lacks (a truncated file) is damage, not a
    // page without text: lopdf would read it as empty.
    if let Ok(contents) = document.get_dictionary(page)?.get(b"Contents") {
        let ids: Vec<lopdf::ObjectId> = match contents {
            Object::Reference(id) => vec![*id],
            Object::Array(items) => items.iter().filter_map(|o| o.as_reference().ok()).collect(),
            _ => Vec::new(),
        };
        for id in ids {
            document.get_object(id)?;
        }
    }
    let content = document.get_page_content_with_limit(page, MAX_PAGE_CONTENT)?;
    let content = lopdf::content::Content::decode(&content)?;

    let mut out = String::new();
    let mut encoding = None;
    // The y of the graphics state's origin (`cm`), saved by `q` and restored by `Q`.
    let mut origin = 0.0f32;
    let mut saved: Vec<f32> = Vec::new();
    // The text line's y, its leading, and where the last text was shown.
    let (mut y, mut leading) = (0.0f32, 0.0f32);
    let mut last_y: Option<f32> = None;
    let mut moved = false;
    let mut next_line = false;
    let show = |out: &mut String, bytes: &[u8], encoding: Option<&lopdf::Encoding<'_>>| {
        if let Some(encoding) = encoding
            && let Ok(text) = lopdf::Document::decode_text(encoding, bytes)
        {
            out.push_str(&text);
        }
    };
    for op in &content.operations {
        let number = |i: usize| op.operands.get(i).and_then(|o| o.as_float().ok());
        match op.operator.as_str() {
            "q" if saved.len() < 1024 => saved.push(origin),
            "Q" => origin = saved.pop().unwrap_or(0.0),
            "cm" => origin += number(5).unwrap_or(0.0),
            "BT" => {
                y = 0.0;
                moved = true;
            }
            "TL" => leading = number(0).unwrap_or(leading),
            "Td" | "TD" => {
                let ty = number(1).unwrap_or(0.0);
                if op.operator == "TD" {
                    leading = -ty;
                }
                y += ty;
                moved = true;
            }
            "Tm" => {
                y = number(5).unwrap_or(y);
                moved = true;
            }
            "T*" => {
                y -= leading;
                next_line = true;
            }
            "Tf" => {
                encoding = op
                    .operands
                    .first()
                    .and_then(|name| name.as_name().ok())
                    .and_then(|name| encodings.get(name));
            }
            "Tj" | "TJ" | "'" | "\"" => {
                if op.operator != "Tj" && op.operator != "TJ" {
                    y -= leading;
                    next_line = true;
                }
                let at = origin + y;
                if let Some(last) = last_y {
                    if next_line || (at - last).abs() > 0.5 {
                        if !out.ends_with('\n') {
                            out.push('\n');
                        }
                    } else if moved && !out.ends_with(char::is_whitespace) {
                        out.push(' ');
                    }
                }
                (last_y, moved, next_line) = (Some(at), false, false);
                let shown = match op.operator.as_str() {
                    "\"" => op.operands.get(2),
                    _ => op.operands.first(),
                };
                match shown {
                    Some(Object::String(bytes, _)) => show(&mut out, bytes, encoding),
                    Some(Object::Array(items)) => {
                        for item in items {
                            match item {
                                Object::String(bytes, _) => show(&mut out, bytes, encoding),
                                // A gap wider than a fifth of the font's size is a space.
                                gap => {
                                    if gap.as_float().is_ok_and(|g| g < -200.0)
                                        && !out.ends_with(char::is_whitespace)
                                    {
                                        out.push(' ');
                                    }
                                }
                            }
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

fn malformed(err: &lopdf::Error) -> PdfError {
    PdfError::Malformed(crate::text::clip(&err.to_string(), 200))
}

/// Trailing spaces off each line, runs of blank lines down to one, the ends trimmed.
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = 0;
    for line in text.lines().map(str::trim_end) {
        if line.is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        out.push_str(line);
        out.push('\n');
    }
    out.trim().to_string()
}

/// How the model is told to ask for pages left out: given the pages as `read_pdf` writes them
/// (`"13-300"`), the sentence to add.
pub type AskFor<'a> = &'a dyn Fn(&str) -> String;

impl Extraction {
    /// Pages read that have no text layer.
    fn empty_pages(&self) -> Vec<u32> {
        self.pages
            .iter()
            .filter(|p| {
                p.error.is_none()
                    && p.text.chars().filter(|c| !c.is_whitespace()).count() < EMPTY_PAGE
            })
            .map(|p| p.number)
            .collect()
    }

    /// The text for the model: a header, each page under its number, a note on pages without a
    /// text layer (the Hermes rule: more than a fifth of the pages, or ten or more), and a line
    /// naming the pages left out, cut at a page boundary within `budget` characters.
    pub fn render(&self, budget: usize, ask_for: AskFor<'_>) -> String {
        let empty = self.empty_pages();
        let read = self.pages.len();
        if read > 0 && empty.len() == read {
            let mut out = format!(
                "This PDF ({} {}) has no text layer on {} {}: it is probably scanned, or \
                 made of pictures. Its text cannot be read without OCR.",
                self.total_pages,
                if self.total_pages == 1 {
                    "page"
                } else {
                    "pages"
                },
                if read == 1 { "page" } else { "pages" },
                ranges(&empty)
            );
            self.left_out(&mut out, read, ask_for);
            return out;
        }
        let mut body = String::new();
        let mut shown = 0;
        let mut used = 0;
        for page in &self.pages {
            let mut piece = format!("--- page {} ---\n{}\n", page.number, page.text);
            if let Some(error) = &page.error {
                let _ = writeln!(piece, "[part of this page could not be read: {error}]"); // a String
            }
            let size = piece.chars().count();
            if used + size > budget {
                if shown == 0 {
                    // One page larger than the budget: its beginning, rather than nothing.
                    body.push_str(&crate::text::clip(&piece, budget));
                    body.push('\n');
                    shown = 1;
                }
                break;
            }
            body.push_str(&piece);
            used += size;
            shown += 1;
        }
        let mut out =
            if shown == self.wanted.len() && self.wanted.len() == self.total_pages as usize {
                format!("PDF, {} pages.\n", self.total_pages)
            } else {
                format!(
                    "PDF, {} pages; {} of them below ({}).\n",
                    self.total_pages,
                    shown,
                    ranges(&self.wanted[..shown])
                )
            };
        let scanned: Vec<u32> = empty
            .into_iter()
            .filter(|n| self.pages[..shown].iter().any(|p| p.number == *n))
            .collect();
        if scanned.len() >= 10 || scanned.len() * 5 > shown {
            let _ = writeln!(
                out,
                "Scanned: no text layer on {} {} (probably pictures of text; they cannot be read without OCR).",
                if scanned.len() == 1 { "page" } else { "pages" },
                ranges(&scanned)
            ); // a String
        }
        out.push_str(&body);
        self.left_out(&mut out, shown, ask_for);
        out
    }

    /// The line about pages asked for but not shown (the first `shown` were).
    fn left_out(&self, out: &mut String, shown: usize, ask_for: AskFor<'_>) {
        let rest = &self.wanted[shown.min(self.wanted.len())..];
        if rest.is_empty() {
            return;
        }
        let pages = ranges(rest).replace('–', "-").replace(", ", ",");
        let _ = write!(
            out,
            "\n[{} of {} pages left out (pages {}): too long to read at once. {}]",
            rest.len(),
            self.total_pages,
            ranges(rest),
            ask_for(&pages)
        ); // a String
    }
}

/// Page numbers as ranges: `1–3, 7, 9–12`.
fn ranges(pages: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut iter = pages.iter().copied().peekable();
    while let Some(start) = iter.next() {
        let mut end = start;
        while iter.peek() == Some(&(end + 1)) {
            end += 1;
            iter.next();
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}–{end}")
        });
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests;
