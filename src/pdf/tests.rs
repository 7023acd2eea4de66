//! The reading itself, in this process ([`extract`], as the child runs it) and what the model
//! is shown ([`Extraction::render`]). The child process is tested in tests/e2e/pdf.rs, with the
//! real binary.

use hearth_testkit::pdf;

use super::*;

fn ask(pages: &str) -> String {
    format!("read_pdf with pages \"{pages}\"")
}

#[test]
fn text_pages_read_line_by_line_in_order() {
    let bytes = pdf::text(&[
        "Invoice 2026-117\nTotal due: 42.50 EUR",
        "Page two (terms)\nPay within 30 days",
    ]);
    let read = extract(&bytes, None, TEXT_BUDGET).expect("reads");
    assert_eq!(read.total_pages, 2);
    assert_eq!(read.pages[0].text, "Invoice 2026-117\nTotal due: 42.50 EUR");
    assert_eq!(read.pages[1].text, "Page two (terms)\nPay within 30 days");
    let shown = read.render(TEXT_BUDGET, &ask);
    assert!(
        shown.starts_with("PDF, 2 pages.\n--- page 1 ---\nInvoice"),
        "{shown}"
    );
    assert!(
        shown.contains("--- page 2 ---\nPage two (terms)"),
        "{shown}"
    );
    assert!(!shown.contains("left out"), "{shown}");
}

#[test]
fn a_long_document_is_cut_at_a_page_boundary_with_the_pages_left_out_named() {
    let page = "a line of a long report, long enough to count\n".repeat(12);
    let pages: Vec<&str> = (0..300).map(|_| page.as_str()).collect();
    let bytes = pdf::text(&pages);
    let read = extract(&bytes, None, TEXT_BUDGET).expect("reads");
    assert_eq!(read.total_pages, 300);
    assert!(read.pages.len() < 300, "stopped reading at the budget");
    let shown = read.render(TEXT_BUDGET, &ask);
    assert!(
        shown.chars().count() <= TEXT_BUDGET + 500,
        "{}",
        shown.len()
    );
    let kept = shown.matches("--- page ").count();
    assert!(kept > 10 && kept < 300, "{kept}");
    let note = format!(
        "[{} of 300 pages left out (pages {}–300): too long to read at once. read_pdf with pages \"{}-300\"]",
        300 - kept,
        kept + 1,
        kept + 1
    );
    assert!(shown.ends_with(&note), "{}", &shown[shown.len() - 300..]);
    // The last page shown is whole.
    let last = shown.rsplit("--- page ").next().expect("a page");
    assert_eq!(
        last.matches("a line of a long report").count(),
        12,
        "{last}"
    );
}

#[test]
fn pages_asked_for_are_read_and_others_not() {
    let pages: Vec<String> = ["one", "two", "three", "four", "five"]
        .iter()
        .map(|n| format!("This is page {n} of the document."))
        .collect();
    let pages: Vec<&str> = pages.iter().map(String::as_str).collect();
    let bytes = pdf::text(&pages);
    let set = PageSet::parse("2, 4-").expect("parses");
    let read = extract(&bytes, Some(&set), TEXT_BUDGET).expect("reads");
    let numbers: Vec<u32> = read.pages.iter().map(|p| p.number).collect();
    assert_eq!(numbers, [2, 4, 5]);
    let shown = read.render(TEXT_BUDGET, &ask);
    assert!(
        shown.starts_with("PDF, 5 pages; 3 of them below (2, 4–5).\n"),
        "{shown}"
    );
    let none = PageSet::parse("9-12").expect("parses");
    assert_eq!(
        extract(&bytes, Some(&none), TEXT_BUDGET)
            .expect_err("no such pages")
            .to_string(),
        "could not read this PDF: it has 5 pages, and none of the pages asked for (9-12) is among them"
    );
}

#[test]
fn page_sets_parse_and_say_what_is_wrong() {
    assert_eq!(
        PageSet::parse("1-5,7").expect("parses").to_string(),
        "1-5,7"
    );
    assert_eq!(PageSet::parse("3").expect("parses").pages(10), [3]);
    assert_eq!(PageSet::parse("8-").expect("parses").pages(10), [8, 9, 10]);
    assert_eq!(
        PageSet::parse("2-3,1-2").expect("parses").pages(10),
        [2, 3, 1]
    );
    for (bad, says) in [
        ("0", "not a page number"),
        ("a-b", "not a page number"),
        ("5-2", "runs backwards"),
        ("", "names no page"),
        (" , ", "names no page"),
    ] {
        let err = PageSet::parse(bad).expect_err(bad);
        assert!(err.contains(says), "{bad:?}: {err}");
    }
    let many = (1..=101)
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join(",");
    assert!(
        PageSet::parse(&many)
            .expect_err("too many ranges")
            .contains("at most 100")
    );
}

#[test]
fn a_scanned_pdf_says_it_is_scanned_not_empty() {
    let read = extract(&pdf::scanned(3), None, TEXT_BUDGET).expect("reads");
    let shown = read.render(TEXT_BUDGET, &ask);
    assert_eq!(
        shown,
        "This PDF (3 pages) has no text layer on pages 1–3: it is probably scanned, or made of \
         pictures. Its text cannot be read without OCR."
    );
}

#[test]
fn scanned_pages_among_text_pages_are_named() {
    let text = "A page with a proper text layer on it.";
    let mut pages = vec![text; 4];
    pages.extend(["", "", ""]);
    pages.extend([text; 3]);
    let read = extract(&pdf::text(&pages), None, TEXT_BUDGET).expect("reads");
    let shown = read.render(TEXT_BUDGET, &ask);
    assert!(
        shown.starts_with("PDF, 10 pages.\nScanned: no text layer on pages 5–7 "),
        "{shown}"
    );
    // One blank page in ten is not worth a word.
    let mut pages = vec![text; 9];
    pages.push("");
    let shown = extract(&pdf::text(&pages), None, TEXT_BUDGET)
        .expect("reads")
        .render(TEXT_BUDGET, &ask);
    assert!(!shown.contains("Scanned"), "{shown}");
}

#[test]
fn bad_files_get_a_clear_error() {
    let good = pdf::text(&["hello"]);
    assert_eq!(extract(b"hello", None, 100), Err(PdfError::NotPdf));
    assert_eq!(
        extract(&pdf::encrypted(), None, 100),
        Err(PdfError::Encrypted)
    );
    assert_eq!(
        PdfError::Encrypted.to_string(),
        "could not read this PDF: it is protected by a password"
    );
    for (what, bytes) in [
        ("truncated", good[..good.len() / 2].to_vec()),
        ("only a header", b"%PDF-1.7\n".to_vec()),
        ("garbage xref", pdf::garbage_xref(&good)),
        ("nested", pdf::deeply_nested(100_000)),
    ] {
        // Each either reads what it can or says why not; none panics.
        match extract(&bytes, None, 100) {
            Ok(read) => assert!(read.total_pages >= 1, "{what}"),
            Err(err) => assert!(
                err.to_string().starts_with("could not read this PDF: "),
                "{what}: {err}"
            ),
        }
    }
}

#[test]
fn ranges_are_written_short() {
    assert_eq!(ranges(&[1, 2, 3, 7, 9, 10]), "1–3, 7, 9–10");
    assert_eq!(ranges(&[4]), "4");
    assert_eq!(ranges(&[]), "");
}
