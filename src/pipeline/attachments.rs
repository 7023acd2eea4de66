//! The files of a message, once its sender is known to be allowed: downloaded within
//! `daemon.max_attachment_bytes`, voice notes turned into text, and the whole put into the
//! content the model reads.

use std::time::Duration;

use hearth_channel::{Attachment, AttachmentKind, Channel, is_text_mime};

use crate::pdf;
use crate::provider::ContentPart;
use crate::runtime::{Runtime, budget};
use crate::store::{Payer, StoreError};
use crate::tool::untrusted::Untrusted;

/// Downloads the attachments the adapter left on the platform ([`Attachment::source`]), now
/// that the sender is known to be allowed: images and voice notes as data, text documents
/// as text, PDFs as their text (see [`pdf_text`]). All files of the message share `daemon.max_attachment_bytes`; one that does not
/// fit, or cannot be had, becomes a note the model reads instead. A turn that already
/// started (resumed after a restart) has its content: nothing is fetched again.
pub(super) async fn fetch(
    rt: &Runtime,
    inbox_id: i64,
    channel: &dyn Channel,
    attachments: &[Attachment],
) -> Result<Vec<Attachment>, StoreError> {
    let wanted = |a: &Attachment| {
        a.source.is_some()
            && a.data_base64.is_none()
            && a.text.is_none()
            && (a.kind != AttachmentKind::Document || is_text_mime(&a.mime) || a.is_pdf())
    };
    if !attachments.iter().any(wanted) || rt.store.turn_for_inbox(inbox_id).await?.is_some() {
        return Ok(attachments.to_vec());
    }
    let limit = rt.config.daemon.max_attachment_bytes;
    let mut left = limit;
    let mut out = Vec::with_capacity(attachments.len());
    for attachment in attachments {
        let mut attachment = attachment.clone();
        if !wanted(&attachment) {
            out.push(attachment);
            continue;
        }
        let name = attachment.name.clone().unwrap_or_else(|| "the file".into());
        if attachment.size.is_some_and(|size| size > left) {
            tracing::info!(
                inbox_id,
                size = attachment.size,
                left,
                "attachment over the per-message limit not downloaded"
            );
            attachment.text = Some(format!(
                "[{name} was not downloaded: it is larger than the {} left of the {} allowed per message (daemon.max_attachment_bytes)]",
                crate::text::bytes(left),
                crate::text::bytes(limit)
            ));
            out.push(attachment);
            continue;
        }
        match fetch_with_retries(channel, &attachment, left).await {
            Ok(bytes) => {
                left = left.saturating_sub(bytes.len() as u64);
                match attachment.kind {
                    AttachmentKind::Document if attachment.is_pdf() => {
                        let budget = pdf_budget(rt);
                        attachment.text = Some(pdf_text(inbox_id, &name, bytes, budget).await);
                    }
                    AttachmentKind::Document => {
                        attachment.text = Some(String::from_utf8_lossy(&bytes).into_owned());
                    }
                    AttachmentKind::Image | AttachmentKind::Voice => {
                        use base64::Engine;
                        attachment.data_base64 =
                            Some(base64::engine::general_purpose::STANDARD.encode(&bytes));
                    }
                }
            }
            Err(err) => {
                tracing::warn!(inbox_id, error = %err, "attachment could not be downloaded");
                attachment.text =
                    Some(format!("[{name} could not be downloaded: {}]", err.message));
            }
        }
        out.push(attachment);
    }
    Ok(out)
}

/// Replaces voice notes by their transcript (`[transcription]`), or explains that voice is
/// not set up. Returns the text to route on and the attachments with transcripts filled in.
pub(super) async fn transcribe_voice(
    rt: &Runtime,
    inbox_id: i64,
    text: &str,
    attachments: &[Attachment],
    payer: &Payer,
) -> Result<(String, Vec<Attachment>), String> {
    let voice = attachments
        .iter()
        .any(|a| a.kind == AttachmentKind::Voice && a.text.is_none());
    // A turn that already started has the transcript; never transcribe twice.
    let started = voice
        && rt
            .store
            .turn_for_inbox(inbox_id)
            .await
            .map_or(true, |t| t.is_some());
    if !voice || started {
        return Ok((text.to_string(), attachments.to_vec()));
    }
    let Some(config) = &rt.config.transcription else {
        return Err("🎤 Voice messages are not set up here, so I cannot listen to this one. Please write it \
                    instead (the owner can enable voice with a [transcription] section in hearth.toml)."
            .into());
    };
    let mut text = text.to_string();
    let mut out = Vec::with_capacity(attachments.len());
    for attachment in attachments {
        let mut attachment = attachment.clone();
        if attachment.kind == AttachmentKind::Voice && attachment.text.is_none() {
            let Some(data) = attachment.data_base64.take() else {
                return Err("🎤 I could not download this voice message; please try again.".into());
            };
            let audio = base64_decode(&data)
                .ok_or("🎤 This voice message arrived damaged; please try again.")?;
            let transcript = crate::transcribe::transcribe(config, audio, &attachment.mime)
                .await
                .map_err(|reason| {
                    format!("🎤 I could not transcribe your voice message: {reason}.")
                })?;
            if let Err(err) = budget::record_transcription(rt, payer, config, &transcript).await {
                // The words arrived and are used; only their price is not on record.
                tracing::warn!(inbox = inbox_id, error = %err, "transcription cost not recorded");
            }
            let transcript = transcript.text;
            if text.trim().is_empty() {
                // The transcript is the message.
                text = transcript;
                continue;
            }
            attachment.name = Some("voice message (transcribed)".into());
            attachment.text = Some(transcript);
        }
        out.push(attachment);
    }
    Ok((text, out))
}

/// Downloads one attachment, trying a temporary failure (a network blip) twice more.
async fn fetch_with_retries(
    channel: &dyn Channel,
    attachment: &Attachment,
    max_bytes: u64,
) -> Result<Vec<u8>, hearth_channel::ChannelError> {
    let mut wait = Duration::from_millis(500);
    let mut tries = 0;
    loop {
        tries += 1;
        match channel.fetch_attachment(attachment, max_bytes).await {
            Err(err) if err.is_temporary() && tries < 3 => {
                tokio::time::sleep(err.retry_after().unwrap_or(wait)).await;
                wait *= 2;
            }
            result => return result,
        }
    }
}

/// How much of a PDF an attachment brings: the message is read before an agent is chosen, so
/// by the smallest window of the configured models.
fn pdf_budget(rt: &Runtime) -> usize {
    let smallest = rt
        .config
        .providers
        .iter()
        .map(|p| crate::provider::context_window(p, None))
        .min();
    smallest.map_or(pdf::TEXT_BUDGET, pdf::budget_for_window)
}

/// A PDF's text as the model reads it: read in a child process (`pdf::Reader`, where a
/// malformed file cannot stop the daemon), cut at a page boundary, and wrapped as data from
/// outside, not instructions; or one line saying why it could not be read.
async fn pdf_text(inbox_id: i64, name: &str, bytes: Vec<u8>, budget: usize) -> String {
    match pdf::Reader::new().read(bytes, None, budget).await {
        Ok(read) => {
            let text = read.render(budget, &|rest| {
                format!(
                    "To read them, the PDF can be saved in the file workspace and read with read_pdf, pages \"{rest}\"."
                )
            });
            let envelope = Untrusted::new(format!("PDF {name}"), &text, budget + 1_000);
            // A struct of strings and a bool always serializes; the fallback is never shown.
            serde_json::to_string_pretty(&envelope).unwrap_or_default()
        }
        Err(err) => {
            tracing::info!(inbox_id, error = %err, "a PDF attachment could not be read");
            format!("[{name}: {err}]")
        }
    }
}

/// Standard base64 (as adapters encode attachments), or `None` when it is not.
fn base64_decode(text: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .ok()
}

/// Replaces images by a short note when the agent's model cannot see them (`vision = false`).
pub(super) fn for_model(content: Vec<ContentPart>, vision: bool) -> Vec<ContentPart> {
    if vision {
        return content;
    }
    content
        .into_iter()
        .map(|part| match part {
            ContentPart::Image { mime, .. } => ContentPart::Text {
                text: format!(
                    "\n[an image ({mime}) was attached, but this model cannot see images]"
                ),
            },
            text => text,
        })
        .collect()
}

/// The user's message as the model sees it: the text, plus text documents inline and a note for
/// attachments the model cannot read.
pub(super) fn user_content(text: &str, attachments: &[Attachment]) -> Vec<ContentPart> {
    let mut parts = vec![ContentPart::Text {
        text: text.to_string(),
    }];
    for attachment in attachments {
        let name = attachment.name.as_deref().unwrap_or("attachment");
        match (&attachment.text, &attachment.data_base64, attachment.kind) {
            (Some(body), _, _) => parts.push(ContentPart::Text {
                text: format!("\n[{name}]\n{body}"),
            }),
            (None, Some(data), AttachmentKind::Image) => parts.push(ContentPart::Image {
                mime: attachment.mime.clone(),
                data_base64: data.clone(),
            }),
            _ => parts.push(ContentPart::Text {
                text: format!(
                    "\n[{name} ({}) attached; its content is not available]",
                    attachment.mime
                ),
            }),
        }
    }
    parts
}
