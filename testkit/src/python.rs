//! Python client libraries the tests drive hearth with, each in a venv cached outside the clone
//! (`/var/tmp/hearth-cache/<name>/venv`, made on first use like [`crate::matrix`]'s Synapse;
//! `.ci/run` installs them beforehand so no pip runs inside a test's time limit).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// Where the venv with the official `openai` client is cached.
pub const OPENAI_CACHE_DIR: &str = "/var/tmp/hearth-cache/openai";

/// The Python of a venv with the official `openai` package, installing it when missing.
pub fn openai_python() -> Result<PathBuf, String> {
    static INSTALLED: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    INSTALLED
        .get_or_init(|| venv_with(Path::new(OPENAI_CACHE_DIR), "openai", "openai"))
        .clone()
}

/// Where the venv with the official MCP Python SDK (`mcp`) is cached.
pub const MCP_CACHE_DIR: &str = "/var/tmp/hearth-cache/mcp";

/// The Python of a venv with the official MCP Python SDK, installing it when missing.
pub fn mcp_python() -> Result<PathBuf, String> {
    static INSTALLED: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    INSTALLED
        .get_or_init(|| venv_with(Path::new(MCP_CACHE_DIR), "mcp", "mcp"))
        .clone()
}

/// The Python of the venv under `cache`, with `package` installed (checked by importing
/// `module`).
pub(crate) fn venv_with(cache: &Path, package: &str, module: &str) -> Result<PathBuf, String> {
    let venv = cache.join("venv");
    let python = venv.join("bin/python");
    let works = |python: &Path| {
        Command::new(python)
            .args(["-c", &format!("import {module}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if works(&python) {
        return Ok(python);
    }
    std::fs::create_dir_all(cache)
        .map_err(|e| format!("cannot create {}: {e}", cache.display()))?;
    eprintln!("installing {package} into {} (once)", venv.display());
    let run = |cmd: &mut Command, what: &str| -> Result<(), String> {
        let out = cmd.output().map_err(|e| format!("{what}: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{what} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    };
    run(
        Command::new("python3").args(["-m", "venv"]).arg(&venv),
        "creating the venv",
    )?;
    run(
        Command::new(venv.join("bin/pip")).args(["install", "-q", package]),
        &format!("pip install {package}"),
    )?;
    if works(&python) {
        Ok(python)
    } else {
        Err(format!(
            "{package} was installed but `import {module}` fails"
        ))
    }
}
