//! PDFs, read by the real `hearth` binary as a child process (`hearth __extract-pdf`): a PDF
//! sent on Telegram and by mail reaches the model as its text, a long one is cut with a note, a
//! scanned one says so, malformed ones get a clear error while the daemon keeps answering, the
//! child's limits hold, and `read_pdf` reads a PDF in the file workspace.

use std::time::Duration;

use hearth::pdf::{Limits, PdfError, Reader, TEXT_BUDGET};
use hearth_testkit::pdf;
use hearth_testkit::{Reply, ToolCallSpec};

use crate::support::{self, Hearth, hearth_binary};

fn reader() -> Reader {
    Reader::new().with_binary(hearth_binary())
}

const INVOICE: [&str; 2] = [
    "Invoice 2026-117\nTotal due: 42.50 EUR",
    "Terms of payment\nPay within 30 days to IBAN DE00 1234",
];

#[tokio::test]
async fn the_child_reads_a_pdf_and_says_why_it_cannot() {
    let read = reader()
        .read(pdf::text(&INVOICE), None, TEXT_BUDGET)
        .await
        .expect("reads");
    assert_eq!(read.total_pages, 2);
    assert_eq!(read.pages[1].text, INVOICE[1]);

    let good = pdf::text(&["hello"]);
    for (what, bytes, says) in [
        ("not a PDF", b"GIF89a".to_vec(), "not a PDF"),
        ("password", pdf::encrypted(), "protected by a password"),
        ("truncated", good[..good.len() / 3].to_vec(), ""),
        ("garbage xref", pdf::garbage_xref(&good), ""),
        ("nested", pdf::deeply_nested(200_000), ""),
    ] {
        match reader().read(bytes, None, TEXT_BUDGET).await {
            Ok(read) => assert!(read.total_pages >= 1, "{what}"),
            Err(err) => {
                let err = err.to_string();
                assert!(
                    err.starts_with("could not read this PDF: "),
                    "{what}: {err}"
                );
                assert!(err.contains(says), "{what}: {err}");
            }
        }
    }
}

#[tokio::test]
async fn the_childs_limits_hold_and_are_reported() {
    // A page that inflates to 48 MB, read with 16 MiB to spare: the memory limit stops it.
    let tight = Limits {
        memory_bytes: 16 * 1024 * 1024,
        ..Limits::default()
    };
    let err = reader()
        .with_limits(tight)
        .read(pdf::bomb(48_000_000), None, TEXT_BUDGET)
        .await
        .expect_err("over the limit");
    assert!(matches!(err, PdfError::OutOfMemory(_)), "{err:?}");
    assert_eq!(
        err.to_string(),
        "could not read this PDF: reading it needed more than the 17 MB of memory allowed"
    );

    // Too slow: the wall clock stops it.
    let hurried = Limits {
        wall: Duration::from_millis(1),
        ..Limits::default()
    };
    let err = reader()
        .with_limits(hurried)
        .read(pdf::text(&INVOICE), None, TEXT_BUDGET)
        .await
        .expect_err("too slow");
    assert!(err.to_string().contains("took longer than"), "{err}");

    // A binary that does not extract: its answer is not taken for a reading.
    let err = Reader::new()
        .with_binary("/bin/true")
        .read(pdf::text(&INVOICE), None, TEXT_BUDGET)
        .await
        .expect_err("no answer");
    assert!(
        err.to_string().starts_with("could not read this PDF: "),
        "{err}"
    );

    // With the default limits the same bomb is refused by the parser's own bound or read.
    match reader()
        .read(pdf::bomb(48_000_000), None, TEXT_BUDGET)
        .await
    {
        Ok(read) => assert_eq!(read.total_pages, 1),
        Err(err) => assert!(
            err.to_string().starts_with("could not read this PDF: "),
            "{err}"
        ),
    }
}

const FILES_AGENT: &str = r#"
[[agent]]
id = "helper"
name = "Helper"
emoji = "🧰"
description = "Reads files"
system_prompt = "PROMPT:helper"
tool_groups = ["files"]
"#;

#[tokio::test]
async fn read_pdf_reads_pages_of_a_pdf_in_the_workspace() {
    // The daemon runs in this test process, whose executable is the test harness.
    hearth::pdf::use_binary(hearth_binary().into());
    let workspace = tempfile::tempdir().expect("workspace");
    let files = workspace.path().join("files");
    std::fs::create_dir_all(files.join("bills")).expect("bills");
    std::fs::write(files.join("bills/march.pdf"), pdf::text(&INVOICE)).expect("write");
    std::fs::write(files.join("scan.pdf"), pdf::scanned(2)).expect("write");
    std::fs::write(files.join("broken.pdf"), b"%PDF-1.4\nnothing else").expect("write");
    let mut h = Hearth::new().await.with_agents(FILES_AGENT);
    h.config.tools.workspace_dir = files;
    h.start().await;
    h.llm.push(Reply::tool_calls(vec![
        ToolCallSpec::new(
            "c1",
            "read_pdf",
            r#"{"path": "bills/march.pdf", "pages": "2"}"#,
        ),
        ToolCallSpec::new("c2", "read_pdf", r#"{"path": "scan.pdf"}"#),
        ToolCallSpec::new("c3", "read_pdf", r#"{"path": "broken.pdf"}"#),
        ToolCallSpec::new(
            "c4",
            "read_pdf",
            r#"{"path": "bills/march.pdf", "pages": "x"}"#,
        ),
        ToolCallSpec::new("c5", "read_pdf", r#"{"path": "../../etc/passwd"}"#),
    ]));
    h.llm.push(Reply::text("Pay within 30 days."));
    h.say("what are the terms in bills/march.pdf?").await;

    let results = support::tool_results(&h.llm.requests()[1]);
    let result = |id: &str| {
        results
            .iter()
            .find(|(call, _)| call == id)
            .map(|(_, content)| content.clone())
            .unwrap_or_else(|| panic!("no result for {id}: {results:?}"))
    };
    let page: serde_json::Value = serde_json::from_str(&result("c1")).expect("JSON");
    assert_eq!(page["source"], "PDF bills/march.pdf");
    assert!(
        page["note"]
            .as_str()
            .expect("a note")
            .contains("not instructions")
    );
    let text = page["text"].as_str().expect("text");
    assert!(
        text.contains("--- page 2 ---\nTerms of payment\nPay within 30 days"),
        "{text}"
    );
    assert!(!text.contains("Invoice 2026-117"), "{text}");
    assert!(
        result("c2").contains("probably scanned"),
        "{}",
        result("c2")
    );
    assert!(
        result("c3").contains("broken.pdf: could not read this PDF"),
        "{}",
        result("c3")
    );
    assert!(
        result("c4").contains("not a page number"),
        "{}",
        result("c4")
    );
    assert!(
        result("c5").contains("outside the workspace"),
        "{}",
        result("c5")
    );
    h.stop().await;
}
