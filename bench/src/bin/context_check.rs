//! `hearth-context-check`: what the context check costs before each model call (issue 25's
//! budget: under 1 ms at a 100-turn history). It assembles the view of histories of 25 to 400
//! turns (a third of them with a 2,000-character tool result), stubs old results, checks the
//! tool pairs and estimates the tokens, and prints the mean time per model call. Run it on a
//! release build: `cargo run --release -p hearth-bench --bin hearth-context-check`.

use hearth::runtime::context::bench::{context_check, history};

fn main() {
    println!(
        "context check per model call (release build: {})",
        !cfg!(debug_assertions)
    );
    for turns in [25, 100, 200, 400] {
        let history = history(turns);
        // Warm the allocator and caches, then measure.
        context_check(&history, 50);
        let (per_call, checksum) = context_check(&history, 2_000);
        println!(
            "  {turns:>3} turns ({:>4} messages): {:>8.3} ms   (checksum {checksum})",
            history.len(),
            per_call.as_secs_f64() * 1e3
        );
    }
}
