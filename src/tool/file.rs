//! The `files` group: read, write, list, search, inspect, copy and delete files inside the
//! workspace directory (`tools.workspace_dir`, created on first use) and nowhere else.
//!
//! Every path is taken relative to the workspace. [`Workspace::resolve`] refuses `..` that would
//! climb out, absolute paths elsewhere, and symlinks anywhere along the path whose target lies
//! outside; it follows the path component by component on the real file system, so what it
//! returns is the real location. Paths that do not exist yet (a file about to be written) are
//! resolved through their deepest existing ancestor.

use std::fs;
use std::io::{self, ErrorKind, Read};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::time::format_local;
use super::typed::{Count, Limit, NonEmpty};
use super::untrusted::Untrusted;
use super::{Risk, Tool, ToolContext, ToolError, TypedTool, typed};
use crate::pdf::{self, PageSet};

/// Largest file `read_file` opens and `write_file` writes.
const MAX_FILE: u64 = 10 * 1024 * 1024;
/// Largest PDF `read_pdf` opens.
const MAX_PDF: u64 = 50 * 1024 * 1024;
/// Most characters `read_file` returns in one call.
const MAX_CHARS: usize = 100_000;
/// Largest file `search_files` looks inside.
const MAX_SEARCH_FILE: u64 = 1024 * 1024;
/// Most entries a directory walk visits.
const MAX_WALK: usize = 20_000;

const GROUP: &str = "files";

pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![
        typed::<ReadFile>(),
        typed::<ReadPdf>(),
        typed::<WriteFile>(),
        typed::<ListDirectory>(),
        typed::<SearchFiles>(),
        typed::<FileInfo>(),
        typed::<CopyFile>(),
        typed::<DeleteFile>(),
    ]
}

/// The workspace root, canonical.
#[derive(Clone, Debug)]
pub struct Workspace {
    root: PathBuf,
    /// The root as configured (made absolute), for absolute paths written that way.
    configured: PathBuf,
}

impl Workspace {
    /// Opens (and creates) the workspace directory.
    pub fn open(dir: &Path) -> Result<Self, ToolError> {
        fs::create_dir_all(dir).map_err(|e| {
            ToolError::Failed(format!(
                "cannot create the workspace {}: {e}",
                dir.display()
            ))
        })?;
        let root = dir.canonicalize().map_err(|e| {
            ToolError::Failed(format!("cannot open the workspace {}: {e}", dir.display()))
        })?;
        let configured = std::path::absolute(dir).unwrap_or_else(|_| root.clone());
        Ok(Self { root, configured })
    }

    /// The real location of `path` inside the workspace; it need not exist.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, ToolError> {
        if path.contains('\0') {
            return Err(invalid("the path contains a NUL character"));
        }
        let given = Path::new(path.trim());
        let relative = if given.is_absolute() {
            given
                .strip_prefix(&self.root)
                .or_else(|_| given.strip_prefix(&self.configured))
                .map_err(|_| {
                    invalid(&format!(
                        "{path:?} is outside the workspace; use a path relative to it"
                    ))
                })?
        } else {
            given
        };
        // `..` is applied to the path as written; climbing above the root is refused.
        let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
        for component in relative.components() {
            match component {
                Component::Normal(part) => parts.push(part),
                Component::CurDir => {}
                Component::ParentDir => {
                    if parts.pop().is_none() {
                        return Err(invalid(&format!(
                            "{path:?} leads outside the workspace (too many `..`)"
                        )));
                    }
                }
                Component::RootDir | Component::Prefix(_) => {
                    return Err(invalid(&format!("{path:?} is not a relative path")));
                }
            }
        }
        // Walk the real file system: every existing component is checked, symlinks resolved.
        let mut current = self.root.clone();
        for (i, part) in parts.iter().enumerate() {
            let next = current.join(part);
            match fs::symlink_metadata(&next) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    let target = next.canonicalize().map_err(|_| {
                        ToolError::Failed(format!(
                            "{} is a symlink whose target does not exist",
                            self.display(&next)
                        ))
                    })?;
                    if !target.starts_with(&self.root) {
                        return Err(ToolError::Failed(format!(
                            "refused: {} is a symlink that leads outside the workspace",
                            self.display(&next)
                        )));
                    }
                    current = target;
                }
                Ok(_) => current = next,
                Err(e) if e.kind() == ErrorKind::NotFound => {
                    // Nothing further exists, so nothing further can be a link.
                    for rest in &parts[i..] {
                        current.push(rest);
                    }
                    break;
                }
                Err(e) => return Err(io_error(&self.display(&next), e)),
            }
        }
        debug_assert!(current.starts_with(&self.root));
        Ok(current)
    }

    /// A real path as the model should see it: relative to the workspace, `/`-separated.
    pub fn display(&self, path: &Path) -> String {
        match path.strip_prefix(&self.root) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".into(),
            Ok(rel) => rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/"),
            Err(_) => path.display().to_string(),
        }
    }

    fn is_root(&self, path: &Path) -> bool {
        path == self.root
    }
}

fn invalid(message: &str) -> ToolError {
    ToolError::InvalidArguments(message.to_string())
}

fn io_error(path: &str, err: io::Error) -> ToolError {
    ToolError::Failed(match err.kind() {
        ErrorKind::NotFound => format!("{path} does not exist"),
        ErrorKind::PermissionDenied => format!("permission denied: {path}"),
        ErrorKind::AlreadyExists => format!("{path} already exists"),
        ErrorKind::DirectoryNotEmpty => format!("{path} is a directory that is not empty"),
        _ => format!("{path}: {err}"),
    })
}

/// Runs file-system work off the async threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ToolError::Failed(format!("the file operation stopped: {e}")))?
}

/// The workspace of this call's configuration, opened off the async threads, and the work.
async fn in_workspace<T: Send + 'static>(
    ctx: &ToolContext,
    work: impl FnOnce(Workspace) -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    let dir = ctx.config.tools.workspace_dir.clone();
    blocking(move || work(Workspace::open(&dir)?)).await
}

fn kind(meta: &fs::Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_symlink() {
        "symlink"
    } else if t.is_dir() {
        "directory"
    } else if t.is_file() {
        "file"
    } else {
        "other"
    }
}

/// A directory argument: the workspace itself when left out or blank.
fn directory(path: Option<String>) -> String {
    match path {
        Some(path) if !path.trim().is_empty() => path,
        _ => ".".into(),
    }
}

fn modified_ms(meta: &fs::Metadata) -> Option<i64> {
    let since = meta.modified().ok()?.duration_since(UNIX_EPOCH).ok()?;
    i64::try_from(since.as_millis()).ok()
}

const READ_LIMIT: Limit = Limit::new(2000, 10_000);

/// Read a text file from the workspace, optionally a range of lines.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadFile {
    /// path relative to the workspace, e.g. notes/todo.md
    path: NonEmpty,
    /// first line to return (1-based); default 1
    #[schemars(range(min = 1))]
    offset: Option<Count>,
    /// most lines to return; default 2000, max 10000
    limit: Option<Count>,
}

impl TypedTool for ReadFile {
    const NAME: &'static str = "read_file";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "open, cat, view, load, text file";
    const LIMIT: Option<Limit> = Some(READ_LIMIT);
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let path = self.path.0;
        let offset = usize::try_from(self.offset.map_or(1, |o| o.0).max(1)).unwrap_or(1);
        let limit = usize::try_from(READ_LIMIT.of(self.limit)).unwrap_or(2000);
        in_workspace(ctx, move |ws| {
            let real = ws.resolve(&path)?;
            let shown = ws.display(&real);
            let meta = fs::metadata(&real).map_err(|e| io_error(&shown, e))?;
            if meta.is_dir() {
                return Err(ToolError::Failed(format!(
                    "{shown} is a directory; use list_directory"
                )));
            }
            if meta.len() > MAX_FILE {
                return Err(ToolError::Failed(format!(
                    "{shown} is {} bytes, larger than the {MAX_FILE} bytes read_file opens",
                    meta.len()
                )));
            }
            let mut bytes = Vec::new();
            fs::File::open(&real)
                .and_then(|f| f.take(MAX_FILE).read_to_end(&mut bytes))
                .map_err(|e| io_error(&shown, e))?;
            let text = String::from_utf8(bytes).map_err(|_| {
                ToolError::Failed(format!("{shown} is not a text file (not UTF-8)"))
            })?;
            let total = text.lines().count();
            let mut content = String::new();
            let mut last = offset.saturating_sub(1);
            let mut cut = false;
            for line in text.lines().skip(offset - 1).take(limit) {
                if content.len() + line.len() + 1 > MAX_CHARS {
                    cut = true;
                    break;
                }
                content.push_str(line);
                content.push('\n');
                last += 1;
            }
            let more = last < total;
            let mut out = json!({
                "path": shown,
                "size": meta.len(),
                "content": content,
                "from_line": offset.min(total.max(1)),
                "to_line": last,
                "total_lines": total,
                "truncated": more,
            });
            if more {
                out["note"] = json!(format!(
                    "{}; call again with offset {} for more",
                    if cut {
                        "output size limit reached"
                    } else {
                        "more lines follow"
                    },
                    last + 1
                ));
            }
            Ok(out)
        })
        .await
    }
}

/// Read the text of a PDF in the workspace (a bill, a contract, a ticket), optionally some
/// pages. A long document is cut at a page boundary and says which pages are left out; a scanned
/// one says it has no text layer.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadPdf {
    /// path relative to the workspace, e.g. bills/march.pdf
    path: NonEmpty,
    /// pages to read, e.g. "1-5,7" or "10-" (10 to the end); default all that fit
    pages: Option<String>,
}

impl TypedTool for ReadPdf {
    const NAME: &'static str = "read_pdf";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str =
        "pdf, document, bill, invoice, contract, ticket, extract text, pages";
    // The reading runs in a child process with its own wall-clock limit (pdf::Limits).
    const TIMEOUT: Option<std::time::Duration> = Some(std::time::Duration::from_secs(45));
    type Output = Untrusted;

    async fn run(self, ctx: &ToolContext) -> Result<Untrusted, ToolError> {
        let pages = match self.pages.as_deref().map(str::trim) {
            Some(pages) if !pages.is_empty() => {
                Some(PageSet::parse(pages).map_err(ToolError::InvalidArguments)?)
            }
            _ => None,
        };
        let path = self.path.0;
        let (shown, bytes) = in_workspace(ctx, move |ws| {
            let real = ws.resolve(&path)?;
            let shown = ws.display(&real);
            let meta = fs::metadata(&real).map_err(|e| io_error(&shown, e))?;
            if meta.is_dir() {
                return Err(ToolError::Failed(format!(
                    "{shown} is a directory; use list_directory"
                )));
            }
            if meta.len() > MAX_PDF {
                return Err(ToolError::Failed(format!(
                    "{shown} is {}, larger than the {} read_pdf opens",
                    crate::text::bytes(meta.len()),
                    crate::text::bytes(MAX_PDF)
                )));
            }
            let mut bytes = Vec::new();
            fs::File::open(&real)
                .and_then(|f| f.take(MAX_PDF).read_to_end(&mut bytes))
                .map_err(|e| io_error(&shown, e))?;
            Ok((shown, bytes))
        })
        .await?;
        // By the smallest window of the configured models, as for an attachment.
        let budget = ctx
            .config
            .providers
            .iter()
            .map(|p| crate::provider::context_window(p, None))
            .min()
            .map_or(pdf::TEXT_BUDGET, pdf::budget_for_window);
        let read = pdf::Reader::new()
            .read(bytes, pages.as_ref(), budget)
            .await
            .map_err(|err| ToolError::Failed(format!("{shown}: {err}")))?;
        let text = read.render(budget, &|rest| {
            format!("Call read_pdf again with pages \"{rest}\" for them.")
        });
        // The render is already within the budget; the envelope's cap leaves room for its lines.
        Ok(Untrusted::new(
            format!("PDF {shown}"),
            &text,
            budget + 1_000,
        ))
    }
}

/// Write a text file in the workspace, creating folders as needed. An existing file is only
/// replaced with overwrite: true.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WriteFile {
    /// path relative to the workspace
    path: NonEmpty,
    /// the whole new content
    content: String,
    /// replace an existing file; default false
    #[serde(default)]
    overwrite: bool,
}

impl TypedTool for WriteFile {
    const NAME: &'static str = "write_file";
    const GROUP: &'static str = GROUP;
    const RISK: Risk = Risk::Write;
    const TAGS: &'static str = "save, create, store, export, text file";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let (path, content, overwrite) = (self.path.0, self.content, self.overwrite);
        if content.len() as u64 > MAX_FILE {
            return Err(invalid(&format!(
                "`content` is larger than {MAX_FILE} bytes"
            )));
        }
        in_workspace(ctx, move |ws| {
            let real = ws.resolve(&path)?;
            let shown = ws.display(&real);
            if ws.is_root(&real) {
                return Err(invalid("give a file name, not the workspace itself"));
            }
            let existed = match fs::metadata(&real) {
                Ok(meta) if meta.is_dir() => {
                    return Err(ToolError::Failed(format!("{shown} is a directory")));
                }
                Ok(_) if !overwrite => {
                    return Err(ToolError::Failed(format!(
                        "{shown} already exists; pass overwrite: true to replace it"
                    )));
                }
                Ok(_) => true,
                Err(_) => false,
            };
            if let Some(parent) = real.parent() {
                fs::create_dir_all(parent).map_err(|e| io_error(&ws.display(parent), e))?;
            }
            fs::write(&real, content.as_bytes()).map_err(|e| io_error(&shown, e))?;
            Ok(json!({
                "path": shown,
                "bytes": content.len(),
                "created": !existed,
                "overwritten": existed,
            }))
        })
        .await
    }
}

const LIST_LIMIT: Limit = Limit::new(100, 1000);

/// List the files and folders in a workspace directory, optionally recursively.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListDirectory {
    /// directory relative to the workspace; default . (the workspace)
    path: Option<String>,
    /// include subdirectories; default false
    #[serde(default)]
    recursive: bool,
    /// most entries; default 100, max 1000
    limit: Option<Count>,
}

/// One entry found by a walk.
struct Entry {
    path: PathBuf,
    meta: fs::Metadata,
}

/// Entries under `dir`, sorted by path, symlinks listed but not followed; at most `max`
/// entries are visited. Returns whether the walk stopped early.
fn walk(dir: &Path, recursive: bool, max: usize, found: &mut Vec<Entry>) -> io::Result<bool> {
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let mut entries: Vec<Entry> = fs::read_dir(&dir)?
            .filter_map(Result::ok)
            .filter_map(|e| {
                let path = e.path();
                fs::symlink_metadata(&path)
                    .ok()
                    .map(|meta| Entry { path, meta })
            })
            .collect();
        entries.sort_by(|a, b| a.path.cmp(&b.path));
        // Depth first, in order: children are visited right after their directory.
        let subdirs: Vec<PathBuf> = entries
            .iter()
            .filter(|e| e.meta.is_dir())
            .map(|e| e.path.clone())
            .collect();
        for entry in entries {
            if found.len() >= max {
                return Ok(true);
            }
            found.push(entry);
        }
        if recursive {
            pending.extend(subdirs.into_iter().rev());
        }
    }
    found.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(false)
}

impl TypedTool for ListDirectory {
    const NAME: &'static str = "list_directory";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "ls, dir, folder, browse, tree";
    const LIMIT: Option<Limit> = Some(LIST_LIMIT);
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let path = directory(self.path);
        let recursive = self.recursive;
        let limit = usize::try_from(LIST_LIMIT.of(self.limit)).unwrap_or(100);
        let tz = ctx.timezone;
        in_workspace(ctx, move |ws| {
            let real = ws.resolve(&path)?;
            let shown = ws.display(&real);
            let meta = fs::metadata(&real).map_err(|e| io_error(&shown, e))?;
            if !meta.is_dir() {
                return Err(ToolError::Failed(format!("{shown} is not a directory")));
            }
            let mut found = Vec::new();
            let more =
                walk(&real, recursive, limit, &mut found).map_err(|e| io_error(&shown, e))?;
            let entries: Vec<Value> = found
                .iter()
                .map(|e| {
                    let mut item = json!({"path": ws.display(&e.path), "type": kind(&e.meta)});
                    if e.meta.is_file() {
                        item["size"] = json!(e.meta.len());
                    }
                    if let Some(ms) = modified_ms(&e.meta) {
                        item["modified"] = json!(format_local(ms, tz));
                    }
                    item
                })
                .collect();
            Ok(json!({
                "path": shown,
                "count": entries.len(),
                "entries": entries,
                "truncated": more,
            }))
        })
        .await
    }
}

const SEARCH_LIMIT: Limit = Limit::new(50, 200);

/// Find files in the workspace by name pattern (glob: * and ?, case-insensitive) and/or by text
/// they contain (case-insensitive), with the matching lines.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SearchFiles {
    /// directory to search; default . (the workspace)
    path: Option<String>,
    /// file-name glob, e.g. *.md or report-202?.csv
    name: Option<String>,
    /// text the file must contain
    contains: Option<String>,
    /// most files; default 50, max 200
    limit: Option<Count>,
}

impl TypedTool for SearchFiles {
    const NAME: &'static str = "search_files";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "find, grep, locate, glob, lookup";
    const LIMIT: Option<Limit> = Some(SEARCH_LIMIT);
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let path = directory(self.path);
        let name = self
            .name
            .filter(|s| !s.trim().is_empty())
            .map(|s| s.trim().to_lowercase());
        let contains = self
            .contains
            .filter(|s| !s.is_empty())
            .map(|s| s.to_lowercase());
        if name.is_none() && contains.is_none() {
            return Err(invalid(
                "give `name` (a glob like *.md), `contains` (text), or both",
            ));
        }
        let limit = usize::try_from(SEARCH_LIMIT.of(self.limit)).unwrap_or(50);
        in_workspace(ctx, move |ws| {
            let real = ws.resolve(&path)?;
            let shown = ws.display(&real);
            if !fs::metadata(&real)
                .map_err(|e| io_error(&shown, e))?
                .is_dir()
            {
                return Err(ToolError::Failed(format!("{shown} is not a directory")));
            }
            let mut found = Vec::new();
            let walk_cut =
                walk(&real, true, MAX_WALK, &mut found).map_err(|e| io_error(&shown, e))?;
            let mut results = Vec::new();
            let mut more = false;
            for entry in found.iter().filter(|e| e.meta.is_file()) {
                let relative = ws.display(&entry.path);
                if let Some(pattern) = &name {
                    let subject = if pattern.contains('/') {
                        relative.to_lowercase()
                    } else {
                        entry
                            .path
                            .file_name()
                            .map(|n| n.to_string_lossy().to_lowercase())
                            .unwrap_or_default()
                    };
                    if !glob_match(pattern, &subject) {
                        continue;
                    }
                }
                let mut item = json!({"path": relative, "size": entry.meta.len()});
                if let Some(needle) = &contains {
                    if entry.meta.len() > MAX_SEARCH_FILE {
                        continue;
                    }
                    let Ok(text) = fs::read_to_string(&entry.path) else {
                        continue; // not UTF-8 text: nothing to match
                    };
                    let lines: Vec<Value> = text
                        .lines()
                        .enumerate()
                        .filter(|(_, line)| line.to_lowercase().contains(needle.as_str()))
                        .take(3)
                        .map(|(n, line)| {
                            let excerpt: String = line.trim().chars().take(200).collect();
                            json!({"line": n + 1, "text": excerpt})
                        })
                        .collect();
                    if lines.is_empty() {
                        continue;
                    }
                    item["matches"] = json!(lines);
                }
                if results.len() >= limit {
                    more = true;
                    break;
                }
                results.push(item);
            }
            Ok(json!({
                "path": shown,
                "count": results.len(),
                "files": results,
                "truncated": more || walk_cut,
            }))
        })
        .await
    }
}

/// Whether `name` matches `pattern`, where `*` is any run of characters and `?` any one.
/// Greedy with one backtrack point: linear for practical patterns, never exponential.
fn glob_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// Details of a file or directory in the workspace: type, size, modification time, line count of
/// text files.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct FileInfo {
    /// path relative to the workspace
    path: NonEmpty,
}

impl TypedTool for FileInfo {
    const NAME: &'static str = "file_info";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "stat, size, modified, exists, metadata";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let path = self.path.0;
        let tz = ctx.timezone;
        in_workspace(ctx, move |ws| {
            let real = ws.resolve(&path)?;
            let shown = ws.display(&real);
            let meta = fs::metadata(&real).map_err(|e| io_error(&shown, e))?;
            let mut out = json!({
                "path": shown,
                "type": kind(&meta),
                "size": meta.len(),
                "readonly": meta.permissions().readonly(),
            });
            if let Some(ms) = modified_ms(&meta) {
                out["modified"] = json!(format_local(ms, tz));
                out["modified_ms"] = json!(ms);
            }
            if meta.is_dir() {
                let entries = fs::read_dir(&real).map(|d| d.count()).unwrap_or(0);
                out["entries"] = json!(entries);
            } else if meta.len() <= MAX_SEARCH_FILE {
                match fs::read_to_string(&real) {
                    Ok(text) => out["lines"] = json!(text.lines().count()),
                    Err(_) => out["text"] = json!(false),
                }
            }
            Ok(out)
        })
        .await
    }
}

/// Copy a file within the workspace, creating folders as needed. An existing destination is only
/// replaced with overwrite: true.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CopyFile {
    /// file to copy, relative to the workspace
    source: NonEmpty,
    /// new path, relative to the workspace
    destination: NonEmpty,
    /// replace an existing destination; default false
    #[serde(default)]
    overwrite: bool,
}

impl TypedTool for CopyFile {
    const NAME: &'static str = "copy_file";
    const GROUP: &'static str = GROUP;
    const RISK: Risk = Risk::Write;
    const TAGS: &'static str = "duplicate, backup, cp";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let (source, destination) = (self.source.0, self.destination.0);
        let overwrite = self.overwrite;
        in_workspace(ctx, move |ws| {
            let from = ws.resolve(&source)?;
            let to = ws.resolve(&destination)?;
            let (from_shown, to_shown) = (ws.display(&from), ws.display(&to));
            let meta = fs::metadata(&from).map_err(|e| io_error(&from_shown, e))?;
            if !meta.is_file() {
                return Err(ToolError::Failed(format!("{from_shown} is not a file")));
            }
            if from == to {
                return Err(invalid("source and destination are the same file"));
            }
            match fs::metadata(&to) {
                Ok(m) if m.is_dir() => {
                    return Err(ToolError::Failed(format!(
                        "{to_shown} is a directory; give the new file's full path"
                    )));
                }
                Ok(_) if !overwrite => {
                    return Err(ToolError::Failed(format!(
                        "{to_shown} already exists; pass overwrite: true to replace it"
                    )));
                }
                _ => {}
            }
            if let Some(parent) = to.parent() {
                fs::create_dir_all(parent).map_err(|e| io_error(&ws.display(parent), e))?;
            }
            let bytes = fs::copy(&from, &to).map_err(|e| io_error(&to_shown, e))?;
            Ok(json!({"source": from_shown, "destination": to_shown, "bytes": bytes}))
        })
        .await
    }
}

/// Delete a file (or a symlink) in the workspace; a directory with recursive: true, or when
/// empty.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DeleteFile {
    /// path relative to the workspace
    path: NonEmpty,
    /// delete a directory with everything in it; default false
    #[serde(default)]
    recursive: bool,
}

impl TypedTool for DeleteFile {
    const NAME: &'static str = "delete_file";
    const GROUP: &'static str = GROUP;
    const RISK: Risk = Risk::Destructive;
    const TAGS: &'static str = "remove, rm, erase, unlink";
    type Output = Value;

    async fn run(self, ctx: &ToolContext) -> Result<Value, ToolError> {
        let (path, recursive) = (self.path.0, self.recursive);
        in_workspace(ctx, move |ws| {
            // Checks the whole path (a link leading outside is refused), then deletes the entry
            // itself: for a symlink that is the link, never what it points to.
            let real = ws.resolve(&path)?;
            let trimmed = path.trim().trim_end_matches('/');
            let (parent, name) = match Path::new(trimmed).file_name() {
                Some(name) => (
                    ws.resolve(&Path::new(trimmed).parent().map_or(String::new(), |p| p.to_string_lossy().into_owned()))?,
                    name.to_os_string(),
                ),
                None => (real.clone(), Default::default()),
            };
            let entry = if name.is_empty() { real } else { parent.join(name) };
            if ws.is_root(&entry) || !entry.starts_with(&ws.root) {
                return Err(invalid("the workspace itself cannot be deleted"));
            }
            let shown = ws.display(&entry);
            let meta = fs::symlink_metadata(&entry).map_err(|e| io_error(&shown, e))?;
            let what = kind(&meta);
            if meta.is_dir() {
                if recursive {
                    fs::remove_dir_all(&entry)
                } else {
                    fs::remove_dir(&entry)
                }
                .map_err(|e| match e.kind() {
                    ErrorKind::DirectoryNotEmpty => ToolError::Failed(format!(
                        "{shown} is a directory that is not empty; pass recursive: true to delete it with its contents"
                    )),
                    _ => io_error(&shown, e),
                })?;
            } else {
                fs::remove_file(&entry).map_err(|e| io_error(&shown, e))?;
            }
            Ok(json!({"deleted": shown, "type": what}))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Files {
        ctx: ToolContext,
        dir: tempfile::TempDir,
    }

    impl Files {
        async fn new() -> Self {
            let (ctx, dir) = crate::tool::test_context().await;
            Self { ctx, dir }
        }

        fn workspace(&self) -> PathBuf {
            self.ctx.config.tools.workspace_dir.clone()
        }

        /// A directory next to the workspace, outside it, with a secret in it.
        fn outside(&self) -> PathBuf {
            let outside = self.dir.path().join("outside");
            fs::create_dir_all(&outside).expect("outside dir");
            fs::write(outside.join("secret.txt"), "top secret").expect("secret");
            outside
        }

        async fn call(&self, name: &str, arguments: Value) -> Result<Value, ToolError> {
            let tool = tools()
                .into_iter()
                .find(|t| t.info().name == name)
                .expect("tool exists");
            let out = tool.call(&self.ctx, arguments).await?;
            Ok(serde_json::from_str(&out).expect("json result"))
        }
    }

    #[tokio::test]
    async fn bad_arguments_name_the_field() {
        let f = Files::new().await;
        for (name, arguments, expected) in [
            ("read_file", json!({"path": 5}), "`path`: invalid type"),
            ("read_file", json!({"path": "a", "offset": "x"}), "`offset`"),
            (
                "write_file",
                json!({"path": "a"}),
                "missing field `content`",
            ),
            (
                "copy_file",
                json!({"source": "a", "destination": " "}),
                "`destination`: must be a non-empty string",
            ),
            (
                "delete_file",
                json!({"path": "a", "force": true}),
                "unknown field `force`",
            ),
            ("list_directory", json!({"recursive": "yes"}), "`recursive`"),
        ] {
            let err = f.call(name, arguments).await.expect_err(name);
            assert!(
                matches!(&err, ToolError::InvalidArguments(m) if m.contains(expected)),
                "{name}: {err}"
            );
        }
    }

    #[tokio::test]
    async fn write_read_and_overwrite() {
        let f = Files::new().await;
        let out = f
            .call(
                "write_file",
                json!({"path": "notes/day.md", "content": "one\ntwo\nthree\n"}),
            )
            .await
            .expect("written");
        assert_eq!(out["path"], "notes/day.md");
        assert_eq!(out["created"], true);
        assert_eq!(
            fs::read_to_string(f.workspace().join("notes/day.md")).expect("on disk"),
            "one\ntwo\nthree\n"
        );

        let out = f
            .call("read_file", json!({"path": "notes/day.md"}))
            .await
            .expect("read");
        assert_eq!(out["content"], "one\ntwo\nthree\n");
        assert_eq!(out["total_lines"], 3);
        let out = f
            .call(
                "read_file",
                json!({"path": "./notes/../notes/day.md", "offset": 2, "limit": 1}),
            )
            .await
            .expect("range");
        assert_eq!(out["content"], "two\n");
        assert_eq!(
            (out["from_line"].as_u64(), out["to_line"].as_u64()),
            (Some(2), Some(2))
        );
        assert!(out["note"].as_str().is_some_and(|n| n.contains("offset 3")));

        let err = f
            .call(
                "write_file",
                json!({"path": "notes/day.md", "content": "new"}),
            )
            .await
            .expect_err("exists");
        assert!(err.to_string().contains("overwrite: true"), "{err}");
        assert_eq!(
            fs::read_to_string(f.workspace().join("notes/day.md")).expect("kept"),
            "one\ntwo\nthree\n",
            "a refused write loses nothing"
        );
        let out = f
            .call(
                "write_file",
                json!({"path": "notes/day.md", "content": "new", "overwrite": true}),
            )
            .await
            .expect("overwritten");
        assert_eq!(out["overwritten"], true);

        let err = f
            .call("read_file", json!({"path": "nope.txt"}))
            .await
            .expect_err("missing");
        assert_eq!(err.to_string(), "nope.txt does not exist");
        let err = f
            .call("read_file", json!({"path": "notes"}))
            .await
            .expect_err("dir");
        assert!(err.to_string().contains("is a directory"));
        fs::write(f.workspace().join("blob.bin"), [0xff, 0xfe, 0x00]).expect("binary");
        let err = f
            .call("read_file", json!({"path": "blob.bin"}))
            .await
            .expect_err("binary");
        assert!(err.to_string().contains("not a text file"));
        let err = f
            .call("write_file", json!({"path": ".", "content": "x"}))
            .await
            .expect_err("root");
        assert!(err.to_string().contains("not the workspace itself"));
    }

    #[tokio::test]
    async fn list_search_info_copy_delete() {
        let f = Files::new().await;
        for (path, content) in [
            ("a.md", "alpha\nneedle here\n"),
            ("b.txt", "beta"),
            ("docs/c.md", "gamma NEEDLE"),
            ("docs/deep/d.md", "delta"),
        ] {
            f.call("write_file", json!({"path": path, "content": content}))
                .await
                .expect("written");
        }
        let out = f.call("list_directory", json!({})).await.expect("list");
        let paths: Vec<&str> = out["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .filter_map(|e| e["path"].as_str())
            .collect();
        assert_eq!(paths, ["a.md", "b.txt", "docs"]);
        assert_eq!(out["entries"][2]["type"], "directory");
        let out = f
            .call("list_directory", json!({"path": "docs", "recursive": true}))
            .await
            .expect("recursive");
        assert_eq!(out["count"], 3);
        let out = f
            .call("list_directory", json!({"recursive": true, "limit": 2}))
            .await
            .expect("limited");
        assert_eq!(
            (out["count"].as_u64(), out["truncated"].as_bool()),
            (Some(2), Some(true))
        );

        let out = f
            .call("search_files", json!({"name": "*.MD"}))
            .await
            .expect("glob");
        assert_eq!(out["count"], 3);
        let out = f
            .call(
                "search_files",
                json!({"contains": "needle", "name": "*.md"}),
            )
            .await
            .expect("content");
        assert_eq!(out["count"], 2);
        assert_eq!(out["files"][0]["path"], "a.md");
        assert_eq!(out["files"][0]["matches"][0]["line"], 2);
        assert_eq!(out["files"][1]["path"], "docs/c.md");
        let out = f
            .call("search_files", json!({"name": "docs/*/d.md"}))
            .await
            .expect("path glob");
        assert_eq!(out["files"][0]["path"], "docs/deep/d.md");
        assert!(f.call("search_files", json!({})).await.is_err());

        let out = f
            .call("file_info", json!({"path": "a.md"}))
            .await
            .expect("info");
        assert_eq!(
            (
                out["type"].as_str(),
                out["size"].as_u64(),
                out["lines"].as_u64()
            ),
            (Some("file"), Some(18), Some(2))
        );
        let out = f
            .call("file_info", json!({"path": "docs"}))
            .await
            .expect("dir info");
        assert_eq!(
            (out["type"].as_str(), out["entries"].as_u64()),
            (Some("directory"), Some(2))
        );

        let out = f
            .call(
                "copy_file",
                json!({"source": "b.txt", "destination": "backup/b.txt"}),
            )
            .await
            .expect("copy");
        assert_eq!(out["bytes"], 4);
        assert_eq!(
            fs::read_to_string(f.workspace().join("backup/b.txt")).expect("copy"),
            "beta"
        );
        let err = f
            .call(
                "copy_file",
                json!({"source": "a.md", "destination": "b.txt"}),
            )
            .await
            .expect_err("exists");
        assert!(err.to_string().contains("already exists"));
        let err = f
            .call("copy_file", json!({"source": "docs", "destination": "x"}))
            .await
            .expect_err("dir");
        assert!(err.to_string().contains("not a file"));

        let out = f
            .call("delete_file", json!({"path": "b.txt"}))
            .await
            .expect("delete");
        assert_eq!(out["deleted"], "b.txt");
        assert!(!f.workspace().join("b.txt").exists());
        let err = f
            .call("delete_file", json!({"path": "docs"}))
            .await
            .expect_err("not empty");
        assert!(err.to_string().contains("recursive: true"), "{err}");
        assert!(f.workspace().join("docs/deep/d.md").exists());
        f.call("delete_file", json!({"path": "docs", "recursive": true}))
            .await
            .expect("recursive delete");
        assert!(!f.workspace().join("docs").exists());
        for root in [".", "", "./", "docs/.."] {
            let err = f
                .call("delete_file", json!({"path": root}))
                .await
                .expect_err("root");
            assert!(
                err.to_string().contains("workspace itself")
                    || err
                        .to_string()
                        .contains("`path`: must be a non-empty string"),
                "{root:?}: {err}"
            );
        }
        assert!(f.workspace().join("a.md").exists());
    }

    #[tokio::test]
    async fn paths_that_leave_the_workspace_are_refused() {
        let f = Files::new().await;
        let outside = f.outside();
        let secret = outside.join("secret.txt");
        let escapes = [
            "../outside/secret.txt".to_string(),
            "a/../../outside/secret.txt".to_string(),
            "../../../../../../etc/passwd".to_string(),
            secret.display().to_string(),
            "/etc/passwd".to_string(),
        ];
        for path in &escapes {
            for (tool, arguments) in [
                ("read_file", json!({"path": path})),
                (
                    "write_file",
                    json!({"path": path, "content": "pwned", "overwrite": true}),
                ),
                ("delete_file", json!({"path": path})),
                ("file_info", json!({"path": path})),
                (
                    "copy_file",
                    json!({"source": path, "destination": "stolen.txt"}),
                ),
                ("list_directory", json!({"path": path})),
            ] {
                let err = f.call(tool, arguments).await.expect_err("escape refused");
                assert!(
                    matches!(&err, ToolError::InvalidArguments(m) if m.contains("outside the workspace")),
                    "{tool} {path}: {err}"
                );
            }
        }
        assert_eq!(
            fs::read_to_string(&secret).expect("untouched"),
            "top secret"
        );
        assert!(!f.workspace().join("stolen.txt").exists());

        // An absolute path that is inside the workspace is fine.
        let inside = f.workspace().join("ok.txt");
        f.call(
            "write_file",
            json!({"path": inside.display().to_string(), "content": "fine"}),
        )
        .await
        .expect("absolute inside");
        assert_eq!(fs::read_to_string(inside).expect("written"), "fine");
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn symlinks_that_escape_are_refused_and_inner_ones_work() {
        use std::os::unix::fs::symlink;
        let f = Files::new().await;
        let outside = f.outside();
        let ws = f.workspace();
        fs::create_dir_all(ws.join("sub")).expect("sub");
        symlink(&outside, ws.join("sub/escape")).expect("dir link");
        symlink(outside.join("secret.txt"), ws.join("leak.txt")).expect("file link");
        symlink(outside.join("not-yet.txt"), ws.join("dangling.txt")).expect("dangling link");
        fs::write(ws.join("real.txt"), "inside").expect("real");
        symlink(ws.join("real.txt"), ws.join("alias.txt")).expect("inner link");

        for (tool, arguments) in [
            ("read_file", json!({"path": "sub/escape/secret.txt"})),
            ("read_file", json!({"path": "leak.txt"})),
            (
                "write_file",
                json!({"path": "sub/escape/new.txt", "content": "x"}),
            ),
            (
                "write_file",
                json!({"path": "leak.txt", "content": "x", "overwrite": true}),
            ),
            ("list_directory", json!({"path": "sub/escape"})),
            (
                "copy_file",
                json!({"source": "leak.txt", "destination": "copy.txt"}),
            ),
            (
                "copy_file",
                json!({"source": "real.txt", "destination": "sub/escape/copy.txt"}),
            ),
            ("delete_file", json!({"path": "sub/escape/secret.txt"})),
            ("file_info", json!({"path": "sub/escape"})),
        ] {
            let err = f.call(tool, arguments.clone()).await.expect_err("refused");
            assert!(
                err.to_string()
                    .contains("symlink that leads outside the workspace"),
                "{tool} {arguments}: {err}"
            );
        }
        let err = f
            .call(
                "write_file",
                json!({"path": "dangling.txt", "content": "x", "overwrite": true}),
            )
            .await
            .expect_err("dangling");
        assert!(err.to_string().contains("target does not exist"), "{err}");
        assert!(!outside.join("not-yet.txt").exists());
        assert!(!outside.join("new.txt").exists());
        assert_eq!(
            fs::read_to_string(outside.join("secret.txt")).expect("kept"),
            "top secret"
        );

        // A link that stays inside works, and deleting it removes the link, not the file.
        let out = f
            .call("read_file", json!({"path": "alias.txt"}))
            .await
            .expect("inner link");
        assert_eq!(out["content"], "inside\n");
        f.call("delete_file", json!({"path": "alias.txt"}))
            .await
            .expect("unlink");
        assert!(fs::symlink_metadata(ws.join("alias.txt")).is_err());
        assert!(ws.join("real.txt").exists());
        // Listing shows links without following them.
        let out = f
            .call("list_directory", json!({"path": "sub", "recursive": true}))
            .await
            .expect("list");
        assert_eq!(out["entries"][0]["type"], "symlink");
        assert_eq!(out["count"], 1);
    }

    #[test]
    fn globs_match_names() {
        assert!(glob_match("*.md", "readme.md"));
        assert!(!glob_match("*.md", "readme.mdx"));
        assert!(glob_match("report-202?.csv", "report-2024.csv"));
        assert!(glob_match("*a*b*", "xxaxxbxx"));
        assert!(!glob_match("a?", "a"));
        assert!(glob_match("*", ""));
        assert!(glob_match(&"*a".repeat(20), &"a".repeat(40)));
    }
}
