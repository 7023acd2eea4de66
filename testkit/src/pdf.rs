//! PDFs made by the tests, byte for byte: text pages, pages that are only a picture, a file that
//! needs a password, a decompression bomb, deep nesting, and damaged variants. A tiny writer
//! (objects, a cross-reference table, a trailer) so no test needs a PDF tool installed.

use std::io::Write;

/// A PDF whose pages show `pages`' text, one line per `\n`, placed line by line with `Td` as
/// most writers do.
pub fn text(pages: &[&str]) -> Vec<u8> {
    let contents = pages
        .iter()
        .map(|page| {
            let mut ops = String::from("BT /F1 12 Tf 72 750 Td\n");
            for line in page.lines() {
                ops.push_str(&format!("({}) Tj 0 -14 Td\n", escape(line)));
            }
            ops.push_str("ET\n");
            ops.into_bytes()
        })
        .collect();
    document(contents, None, "")
}

/// A PDF of `n` pages that are each a picture and nothing else: a scan.
pub fn scanned(n: usize) -> Vec<u8> {
    let contents = (0..n)
        .map(|_| b"q 400 0 0 600 72 100 cm /Im1 Do Q\n".to_vec())
        .collect();
    document(contents, None, "")
}

/// A one-page PDF whose page content inflates from a few kilobytes to `size` bytes.
pub fn bomb(size: usize) -> Vec<u8> {
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    let chunk = vec![b' '; 1 << 20];
    let mut left = size;
    while left > 0 {
        let n = left.min(chunk.len());
        encoder.write_all(&chunk[..n]).expect("writing to memory");
        left -= n;
    }
    let compressed = encoder.finish().expect("writing to memory");
    document(vec![compressed], Some("/Filter /FlateDecode"), "")
}

/// A PDF that needs a password to open (its Standard security handler's entries fit no empty
/// password).
pub fn encrypted() -> Vec<u8> {
    let hex = |b: u8| format!("<{}>", format!("{b:02X}").repeat(32));
    let id = format!("<{}>", "AB".repeat(16));
    let mut out = text(&["secret"]);
    // The trailer gets an /Encrypt dictionary inline and an /ID.
    let trailer = find(&out, b"trailer\n<<").expect("a trailer");
    let at = trailer + b"trailer\n<<".len();
    let entry = format!(
        " /Encrypt << /Filter /Standard /V 1 /R 2 /O {} /U {} /P -4 >> /ID [{id} {id}]",
        hex(0x11),
        hex(0x22)
    );
    out.splice(at..at, entry.into_bytes());
    out
}

/// A one-page PDF whose page dictionary holds arrays nested `depth` deep.
pub fn deeply_nested(depth: usize) -> Vec<u8> {
    let nested = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let mut out = text(&["nested"]);
    let page = find(&out, b"/Type /Page ").expect("a page");
    let at = page + b"/Type /Page ".len();
    out.splice(at..at, format!("/Junk {nested} ").into_bytes());
    out
}

/// `pdf` with its cross-reference table's offsets replaced by nonsense.
pub fn garbage_xref(pdf: &[u8]) -> Vec<u8> {
    let mut out = pdf.to_vec();
    if let Some(xref) = find(&out, b"xref\n") {
        for byte in &mut out[xref + 5..] {
            if byte.is_ascii_digit() {
                *byte = b'9';
            }
        }
    }
    out
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).rposition(|w| w == needle)
}

fn escape(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        match c {
            '(' | ')' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_ascii() => out.push(c),
            _ => out.push('?'),
        }
    }
    out
}

/// Catalog (1), page tree (2), font (3), image (4), then a page and its content per page.
fn document(contents: Vec<Vec<u8>>, filter: Option<&str>, trailer: &str) -> Vec<u8> {
    let n = contents.len();
    let mut objects: Vec<Vec<u8>> = Vec::new();
    objects.push(b"<< /Type /Catalog /Pages 2 0 R >>".to_vec());
    let kids: Vec<String> = (0..n).map(|i| format!("{} 0 R", 5 + 2 * i)).collect();
    objects.push(format!("<< /Type /Pages /Kids [{}] /Count {n} >>", kids.join(" ")).into_bytes());
    objects.push(
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"
            .to_vec(),
    );
    objects.push(stream(
        "/Type /XObject /Subtype /Image /Width 1 /Height 1 /ColorSpace /DeviceGray /BitsPerComponent 8",
        &[0x80],
    ));
    for (i, content) in contents.into_iter().enumerate() {
        objects.push(
            format!(
                "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> /XObject << /Im1 4 0 R >> >> /Contents {} 0 R >>",
                6 + 2 * i
            )
            .into_bytes(),
        );
        objects.push(stream(filter.unwrap_or(""), &content));
    }
    let mut out = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n".to_vec();
    let mut offsets = Vec::new();
    for (i, body) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n", i + 1).as_bytes());
        out.extend_from_slice(body);
        out.extend_from_slice(b"\nendobj\n");
    }
    let xref = out.len();
    out.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for offset in offsets {
        out.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R {trailer}>>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}

fn stream(dictionary: &str, data: &[u8]) -> Vec<u8> {
    let mut out = format!("<< {dictionary} /Length {} >>\nstream\n", data.len()).into_bytes();
    out.extend_from_slice(data);
    out.extend_from_slice(b"\nendstream");
    out
}
