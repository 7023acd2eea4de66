//! `hearth __extract-pdf`: PDF extraction in a child process of hearth's own binary, so that
//! a panic in the parser, a file that eats memory or one that loops cannot stop the daemon.
//!
//! - The child is started with an empty environment (no bot token or API key reaches it), in a
//!   process group of its own, killed when dropped.
//! - It limits itself before it reads a byte: `RLIMIT_AS` (its address space at start plus
//!   [`Limits::memory_bytes`]) and `RLIMIT_CPU`. hearth forbids unsafe code, so there is no
//!   `pre_exec` hook to set them from the parent; the child is hearth's own code, and sets them
//!   first thing in `main`, before the async runtime or logging start.
//! - The parent writes the PDF to its stdin, reads one JSON answer from its stdout (capped),
//!   keeps the end of its stderr, and kills it after [`Limits::wall`].
//! - At most two run at once: a burst of PDFs waits instead of starting a child each.

use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use process_wrap::tokio::{CommandWrap, KillOnDrop, ProcessGroup};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use super::{Extraction, PageSet, PdfError, extract};

/// The first argument that makes the `hearth` binary extract a PDF.
pub const EXTRACT_ARG: &str = "__extract-pdf";

/// Most bytes of the child's answer read: the JSON of a budget's worth of text, with room.
const MAX_ANSWER: usize = 8 * 1024 * 1024;

/// Most bytes of the child's stderr kept, for the log and the kind of failure.
const MAX_STDERR: usize = 16 * 1024;

/// Children reading at once.
const AT_ONCE: usize = 2;

/// The binary that extracts, when set (tests whose own executable is not hearth's binary).
static BINARY: OnceLock<PathBuf> = OnceLock::new();

/// Extract PDFs with `hearth` at this path from now on, instead of this process's own
/// executable: for tests, whose executable is the test harness.
pub fn use_binary(hearth: PathBuf) {
    // A second call changes nothing: every test points at the same binary.
    let _ = BINARY.set(hearth);
}

/// What one extraction may use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Memory the child may add to what it had at start.
    pub memory_bytes: u64,
    /// CPU time.
    pub cpu_secs: u64,
    /// Time from start to answer, waiting included.
    pub wall: Duration,
}

impl Default for Limits {
    /// A 20 MB PDF of text reads in a second or two with a few times its size in memory.
    fn default() -> Self {
        Self {
            memory_bytes: 512 * 1024 * 1024,
            cpu_secs: 20,
            wall: Duration::from_secs(30),
        }
    }
}

/// Reads PDFs in child processes (see the module notes).
#[derive(Clone, Debug, Default)]
pub struct Reader {
    binary: Option<PathBuf>,
    limits: Limits,
}

impl Reader {
    /// A reader with the default limits, using [`use_binary`]'s path or this executable.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads with `hearth` at `path`.
    pub fn with_binary(mut self, path: impl Into<PathBuf>) -> Self {
        self.binary = Some(path.into());
        self
    }

    /// Reads within `limits`.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    fn binary(&self) -> Result<PathBuf, PdfError> {
        if let Some(path) = self.binary.as_ref().or(BINARY.get()) {
            return Ok(path.clone());
        }
        // The running binary itself, even when an upgrade replaced the file since it started:
        // the child then speaks the same version of the answer.
        let own = std::path::Path::new("/proc/self/exe");
        if own.exists() {
            return Ok(own.to_path_buf());
        }
        std::env::current_exe().map_err(|err| PdfError::NotStarted(err.to_string()))
    }

    /// The text of `pages` (all when `None`) of the PDF in `bytes`, up to about `max_chars`
    /// characters, read by a child process. Never panics, whatever the bytes.
    pub async fn read(
        &self,
        bytes: Vec<u8>,
        pages: Option<&PageSet>,
        max_chars: usize,
    ) -> Result<Extraction, PdfError> {
        static SLOTS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(AT_ONCE);
        let started = tokio::time::Instant::now();
        let _slot = tokio::time::timeout(self.limits.wall, SLOTS.acquire())
            .await
            .map_err(|_| PdfError::TooSlow(seconds(self.limits.wall)))?
            .map_err(|err| PdfError::NotStarted(err.to_string()))?;
        let wall = self.limits.wall.saturating_sub(started.elapsed());

        let mut command = tokio::process::Command::new(self.binary()?);
        command
            .arg(EXTRACT_ARG)
            .arg(self.limits.memory_bytes.to_string())
            .arg(self.limits.cpu_secs.to_string())
            .arg(max_chars.to_string())
            .args(pages.map(PageSet::to_string))
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut wrapped = CommandWrap::from(command);
        wrapped.wrap(ProcessGroup::leader()).wrap(KillOnDrop);
        let mut child = wrapped
            .spawn()
            .map_err(|err| PdfError::NotStarted(err.to_string()))?;
        let stdin = child.stdin().take();
        let stdout = child.stdout().take();
        let stderr = child.stderr().take();

        let work = async {
            let write = async move {
                if let Some(mut stdin) = stdin {
                    // A child that stopped early closed its end: its status says why.
                    let _ = stdin.write_all(&bytes).await;
                }
            };
            let (_, answer, errors) = tokio::join!(
                write,
                read_capped(stdout, MAX_ANSWER),
                read_capped(stderr, MAX_STDERR)
            );
            (child.wait().await, answer, errors)
        };
        let (status, answer, errors) = match tokio::time::timeout(wall, work).await {
            Ok(done) => done,
            Err(_) => {
                // Best effort: KillOnDrop kills it when `child` goes, too.
                let _ = child.start_kill();
                return Err(PdfError::TooSlow(seconds(self.limits.wall)));
            }
        };
        let status = status.map_err(|err| PdfError::Crashed(err.to_string()))?;
        let errors = errors.unwrap_or_default();
        let errors = String::from_utf8_lossy(&errors);
        if status.success()
            && let Some(answer) = answer.filter(|a| !a.is_empty())
        {
            if let Ok(answer) = serde_json::from_slice::<Result<Extraction, PdfError>>(&answer) {
                return answer;
            }
            tracing::warn!(stderr = %errors, "the PDF reader answered something that is not a reading");
            return Err(PdfError::Crashed(
                "it answered something that is not a reading".into(),
            ));
        }
        tracing::warn!(%status, stderr = %errors, "the PDF reader failed");
        Err(failure(status, &errors, &self.limits))
    }
}

/// What a child that did not answer died of, from its status and its stderr.
fn failure(status: ExitStatus, stderr: &str, limits: &Limits) -> PdfError {
    const SIGXCPU: i32 = 24;
    if stderr.contains("memory allocation of") {
        PdfError::OutOfMemory(crate::text::bytes(limits.memory_bytes))
    } else if status.signal() == Some(SIGXCPU) || (status.signal() == Some(9) && stderr.is_empty())
    {
        // RLIMIT_CPU sends SIGXCPU at the soft limit and SIGKILL at the hard one.
        PdfError::TooSlow(format!("{} s of processor time", limits.cpu_secs))
    } else if stderr.contains("overflowed its stack") {
        PdfError::Malformed("it is nested too deeply".into())
    } else if stderr.contains("panicked at") {
        PdfError::Crashed("the PDF parser stopped on something in the file".into())
    } else if stderr.contains("answer too long") {
        PdfError::Crashed("it answered more than the reader may".into())
    } else {
        PdfError::Crashed(format!("it stopped with {status}"))
    }
}

fn seconds(wall: Duration) -> String {
    format!("{} s", wall.as_secs_f64().ceil())
}

/// Reads `pipe` to its end, keeping at most `max` bytes; `None` when there was more.
async fn read_capped(pipe: Option<impl AsyncRead + Unpin>, max: usize) -> Option<Vec<u8>> {
    let pipe = pipe?;
    let mut kept = Vec::new();
    // One byte more than allowed tells "exactly max" from "too much".
    let mut limited = pipe.take(max as u64 + 1);
    if limited.read_to_end(&mut kept).await.is_err() {
        return Some(kept);
    }
    if kept.len() > max {
        // Drain the rest so the child is not stuck writing; its status then tells.
        let mut rest = limited.into_inner();
        let mut sink = [0u8; 8192];
        while matches!(rest.read(&mut sink).await, Ok(n) if n > 0) {}
        return None;
    }
    Some(kept)
}

/// The child: when the arguments are `__extract-pdf <memory bytes> <cpu secs> <max chars>
/// [pages]`, limits itself, reads a PDF on stdin and writes the reading as JSON on stdout.
/// Returns the exit code, or `None` for any other command line. Called by `main` first thing.
pub fn child_main() -> Option<i32> {
    let mut args = std::env::args_os().skip(1);
    if args.next()? != EXTRACT_ARG {
        return None;
    }
    let args: Vec<String> = args.map(|a| a.to_string_lossy().into_owned()).collect();
    let number = |i: usize| args.get(i).and_then(|a| a.parse::<u64>().ok());
    let (Some(memory), Some(cpu), Some(max_chars)) = (number(0), number(1), number(2)) else {
        eprintln!(
            "usage: hearth {EXTRACT_ARG} <memory bytes> <cpu seconds> <max chars> [pages] (used by hearth itself)"
        );
        return Some(2);
    };
    let pages = match args.get(3).map(|p| PageSet::parse(p)).transpose() {
        Ok(pages) => pages,
        Err(err) => {
            eprintln!("hearth {EXTRACT_ARG}: {err}");
            return Some(2);
        }
    };
    if let Err(err) = limit_self(memory, cpu) {
        // Never read a stranger's file without the limits.
        eprintln!("hearth {EXTRACT_ARG}: cannot limit itself: {err}");
        return Some(1);
    }
    let mut bytes = Vec::new();
    if let Err(err) = std::io::stdin().lock().read_to_end(&mut bytes) {
        eprintln!("hearth {EXTRACT_ARG}: cannot read the PDF: {err}");
        return Some(1);
    }
    let max_chars = usize::try_from(max_chars).unwrap_or(usize::MAX);
    let answer = extract(&bytes, pages.as_ref(), max_chars);
    let json = match serde_json::to_vec(&answer) {
        Ok(json) => json,
        Err(err) => {
            eprintln!("hearth {EXTRACT_ARG}: cannot write the answer: {err}");
            return Some(1);
        }
    };
    if json.len() > MAX_ANSWER {
        eprintln!(
            "hearth {EXTRACT_ARG}: answer too long ({} bytes)",
            json.len()
        );
        return Some(1);
    }
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(&json).and_then(|()| stdout.flush()) {
        Ok(()) => Some(0),
        Err(err) => {
            eprintln!("hearth {EXTRACT_ARG}: cannot write the answer: {err}");
            Some(1)
        }
    }
}

/// `RLIMIT_AS` at this process's address space plus `memory`, `RLIMIT_CPU` at `cpu` seconds
/// (SIGXCPU there, SIGKILL a second later).
fn limit_self(memory: u64, cpu: u64) -> std::io::Result<()> {
    use rustix::process::{Resource, Rlimit, setrlimit};
    let now = address_space().unwrap_or(256 * 1024 * 1024);
    let memory = now.saturating_add(memory);
    setrlimit(
        Resource::As,
        Rlimit {
            current: Some(memory),
            maximum: Some(memory),
        },
    )?;
    setrlimit(
        Resource::Cpu,
        Rlimit {
            current: Some(cpu),
            maximum: Some(cpu.saturating_add(1)),
        },
    )?;
    Ok(())
}

/// This process's address space in bytes (`VmSize` in `/proc/self/status`): the binary, its
/// libraries and stack, which differ between a debug and a release build.
fn address_space() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmSize:"))?;
    let kb: u64 = line
        .trim_start_matches("VmSize:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    kb.checked_mul(1024)
}
