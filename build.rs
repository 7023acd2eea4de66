//! The commit hearth is built from (`HEARTH_COMMIT`, for `--version`), and link settings for
//! the `hearth` binary that only the release build needs.
//!
//! The release profile keeps `strip = false` and the symbols are dropped here, at the link:
//! cargo mixes the profile's `strip` into every crate's symbol hashes, and the hot-function
//! order below names symbols by those hashes, so the build that records them
//! (`scripts/hot-functions`, with `HEARTH_KEEP_SYMBOLS=1`) and the build users run must have
//! the same profile.

use std::path::Path;
use std::process::Command;

/// The functions that run to start hearth, idle and answer Telegram messages, one mangled
/// symbol a line, written by `scripts/hot-functions`.
const HOT_FUNCTIONS: &str = "link/hot-functions.txt";

/// A linker script that only drops the unwinding tables (see `without_unwind_tables`).
const DISCARD_UNWIND_TABLES: &str = "link/discard-unwind-tables.ld";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    commit();
    println!("cargo:rerun-if-changed={HOT_FUNCTIONS}");
    println!("cargo:rerun-if-changed=Cargo.lock");
    println!("cargo:rerun-if-changed={DISCARD_UNWIND_TABLES}");
    println!("cargo:rerun-if-env-changed=HEARTH_KEEP_SYMBOLS");
    println!("cargo:rerun-if-env-changed=CARGO_PROFILE_RELEASE_PANIC");
    let release = std::env::var("PROFILE").as_deref() == Ok("release");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux");
    if !(release && linux) {
        return;
    }
    // Packed relative relocations (DT_RELR): the position-independent binary's table of
    // pointer fix-ups shrinks from about 1.8 MB to a few KB, so the binary is smaller and the
    // loader reads less at every start. Both lld and GNU ld (2.38+) take the flag; GNU ld packs
    // only when the C library supports it (glibc 2.36+).
    println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    let keep_symbols = std::env::var_os("HEARTH_KEEP_SYMBOLS").is_some();
    if !keep_symbols {
        println!("cargo:rustc-link-arg-bins=-Wl,--strip-all");
    }
    if linker_is_lld() {
        hot_functions_first();
        if !keep_symbols {
            without_unwind_tables();
        }
    }
}

/// Leaves the unwinding tables (`.eh_frame` and its index, 3.1 MB: 8% of the binary) out of
/// the stripped release binary.
///
/// Why they are not needed: the release profile aborts on a panic instead of unwinding, and
/// neither hearth nor the C code in it (SQLite, aws-lc) throws or cancels threads, so nothing
/// reads them but a backtrace. A panic still logs its message and its file and line; only
/// `RUST_BACKTRACE` shows no frames, and in a binary without symbols those frames were bare
/// addresses. A build that keeps its symbols (`HEARTH_KEEP_SYMBOLS=1`, for profiling and
/// debugging) keeps the tables too, and a build that unwinds (`panic = "unwind"`) needs them.
fn without_unwind_tables() {
    // Cargo.toml's release profile says `abort`; build scripts are not told the profile's
    // setting (CARGO_CFG_PANIC is the target's default), only an override in the environment.
    if std::env::var("CARGO_PROFILE_RELEASE_PANIC").is_ok_and(|panic| panic != "abort") {
        return;
    }
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let script = Path::new(&manifest).join(DISCARD_UNWIND_TABLES);
    if script.exists() {
        println!("cargo:rustc-link-arg-bins=-Wl,-T,{}", script.display());
    }
}

/// `HEARTH_COMMIT`: the abbreviated commit of the checkout, or `unknown` when hearth is not
/// built from a git checkout (a source tarball, `cargo install` from a registry) or git is
/// missing. Rebuilt when HEAD moves (a commit, a checkout).
fn commit() {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|out| out.status.success())
            .and_then(|out| String::from_utf8(out.stdout).ok())
            .map(|text| text.trim().to_string())
            .filter(|text| !text.is_empty())
    };
    let commit = git(&["rev-parse", "--short=12", "HEAD"]);
    if commit.is_some() {
        // HEAD names the branch; the branch's file names the commit. A packed ref has no file
        // of its own, and a path that does not exist would rerun this script at every build.
        let reference = git(&["symbolic-ref", "-q", "HEAD"]);
        for path in std::iter::once("HEAD").chain(reference.as_deref()) {
            if let Some(file) = git(&["rev-parse", "--git-path", path])
                && Path::new(&file).exists()
            {
                println!("cargo:rerun-if-changed={file}");
            }
        }
    }
    println!(
        "cargo:rustc-env=HEARTH_COMMIT={}",
        commit.as_deref().unwrap_or("unknown")
    );
}

/// Rust links x86_64 Linux binaries with its own lld since 1.90 (hearth needs 1.95), unless the
/// build names another linker; the options below are lld's.
fn linker_is_lld() -> bool {
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    std::env::var("TARGET").as_deref() == Ok("x86_64-unknown-linux-gnu")
        && std::env::var_os("RUSTC_LINKER").is_none()
        && !flags.contains("linker")
        && !flags.contains("link-self-contained")
        && !flags.contains("fuse-ld")
}

/// Puts the functions hearth runs when it starts and answers a message side by side at the
/// front of the code, and folds identical functions into one.
///
/// Why: the kernel maps a program's code into memory in 64 KB blocks around each function
/// that runs, and the few megabytes of code that run are otherwise spread over the whole
/// binary among the code of the channels not configured; most of an idle daemon's resident
/// memory was such blocks (23.5 MiB idle with Telegram alone, 16 MiB with this order). Symbols
/// the file names that a build does not have (another rustc, changed dependencies) are passed
/// over: the binary is the same, only its code is laid out as before.
fn hot_functions_first() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let file = Path::new(&manifest).join(HOT_FUNCTIONS);
    let Ok(text) = std::fs::read_to_string(&file) else {
        return;
    };
    println!(
        "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
        file.display()
    );
    println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    // Identical code folding: one copy of functions that compiled to the same bytes (about
    // 1 MB of generic instantiations). Rust does not promise that two functions have different
    // addresses, and rustc already merges some itself.
    println!("cargo:rustc-link-arg-bins=-Wl,--icf=all");

    // The symbol names hash the compiler's version and the dependencies: say so when the order
    // was recorded with another rustc or another Cargo.lock, since then it matches less and the
    // idle memory grows again.
    let recorded = |key: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(key))
            .map(str::trim)
    };
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let current_rustc = Command::new(rustc)
        .arg("-V")
        .output()
        .ok()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned());
    let lock = Path::new(&manifest).join("Cargo.lock");
    let current_lock = std::fs::read(&lock).ok().map(|bytes| fnv1a64_hex(&bytes));
    let stale = match (recorded("# made with "), current_rustc) {
        (Some(then), Some(now)) if then != now => Some(format!("with {then}, this is {now}")),
        _ => match (recorded("# Cargo.lock fnv1a64 "), current_lock) {
            (Some(then), Some(now)) if then != now => Some("before Cargo.lock changed".to_owned()),
            _ => None,
        },
    };
    if let Some(why) = stale {
        println!(
            "cargo:warning={HOT_FUNCTIONS} was recorded {why}: hearth works the same, but \
             idles with up to 8 MiB more memory until scripts/hot-functions records it again"
        );
    }
}

/// FNV-1a, 64 bits, as hex: the fingerprint of Cargo.lock that scripts/hot-functions writes
/// into the file's header (the same sum in its Python).
fn fnv1a64_hex(bytes: &[u8]) -> String {
    let hash = bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("{hash:016x}")
}
