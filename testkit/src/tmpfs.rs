//! A real small tmpfs for tests that need a full disk or a read-only file system.
//!
//! Mounting needs root (or CAP_SYS_ADMIN). Where it is refused, [`Tmpfs::mount`] returns the
//! reason and the test prints it and returns early instead of faking the fault.
//!
//! ```no_run
//! use hearth_testkit::tmpfs::Tmpfs;
//! # fn demo(dir: &std::path::Path) {
//! let disk = match Tmpfs::mount(dir, 2 * 1024 * 1024) {
//!     Ok(disk) => disk,
//!     Err(why) => return eprintln!("skipped: {why}"),
//! };
//! disk.fill().expect("filled");   // the next write that needs space fails with ENOSPC
//! disk.free().expect("freed");    // space is back
//! # }
//! ```
//! The file system is unmounted when the value is dropped.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The name of the file [`Tmpfs::fill`] writes.
const FILLER: &str = ".filler";

/// A mounted tmpfs of a fixed size. Unmounted on drop.
#[derive(Debug)]
pub struct Tmpfs {
    path: PathBuf,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size_bytes` on the existing directory `path`. `Err` says why it was
    /// refused (not root, no mount binary, a container without CAP_SYS_ADMIN …).
    pub fn mount(path: &Path, size_bytes: u64) -> Result<Self, String> {
        let output = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_bytes}"), "tmpfs"])
            .arg(path)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "mount -t tmpfs refused ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        Ok(Self {
            path: path.to_path_buf(),
        })
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes a filler file until the file system is full (ENOSPC). Returns the bytes written.
    pub fn fill(&self) -> std::io::Result<u64> {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.path.join(FILLER))?;
        let chunk = vec![0x5a_u8; 4096];
        let mut written = 0;
        loop {
            match file.write(&chunk) {
                Ok(0) => return Ok(written),
                Ok(n) => written += n as u64,
                Err(e) if e.raw_os_error() == Some(28) => return Ok(written), // ENOSPC
                Err(e) => return Err(e),
            }
        }
    }

    /// Removes the filler file: the space [`Tmpfs::fill`] took is free again.
    pub fn free(&self) -> std::io::Result<()> {
        match std::fs::remove_file(self.path.join(FILLER)) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }

    /// Bytes still free, as `statvfs` reports them (via `df`), for diagnostics.
    pub fn available(&self) -> Option<u64> {
        let output = Command::new("df")
            .args(["--output=avail", "-B1"])
            .arg(&self.path)
            .output()
            .ok()?;
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .nth(1)?
            .trim()
            .parse()
            .ok()
    }

    /// Remounts it read-only (`ro`) or read-write again. The kernel refuses a read-only
    /// remount while a file on it is open for writing; `Err` carries its answer.
    pub fn remount(&self, read_only: bool) -> Result<(), String> {
        let mode = if read_only {
            "remount,ro"
        } else {
            "remount,rw"
        };
        let output = Command::new("mount")
            .args(["-o", mode])
            .arg(&self.path)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(format!(
                "mount -o {mode} refused ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ))
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Lazy, so a process still holding a file open (a killed daemon's last moments) cannot
        // keep the mount around; a failure here only leaves a small tmpfs behind.
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}
