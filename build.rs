//! Link settings for the `hearth` binary that only the release build needs.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let release = std::env::var("PROFILE").as_deref() == Ok("release");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux");
    if release && linux {
        // Packed relative relocations (DT_RELR): the position-independent binary's table of
        // pointer fix-ups shrinks from about 1.8 MB to a few KB, so the binary is smaller and
        // the loader reads less at every start. GNU ld (2.38+) only packs them when the C
        // library supports it (glibc 2.36+), and leaves the binary as before otherwise.
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
