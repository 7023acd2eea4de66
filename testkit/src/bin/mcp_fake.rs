//! The fake MCP server over stdio, for hearth's tests (see `hearth_testkit::mcp`).

use hearth_testkit::mcp::FakeMcp;
use rmcp::ServiceExt;

#[tokio::main]
async fn main() {
    match std::env::var("MCP_FAKE_MODE").as_deref() {
        Ok("exit") => {
            eprintln!("boom: no configuration");
            std::process::exit(1);
        }
        Ok("leak") => {
            // A server that echoes its credentials when it gives up, as some do in debug output.
            let secret = std::env::var("FAKE_SECRET").unwrap_or_default();
            eprintln!("login refused for token {secret}");
            std::process::exit(1);
        }
        Ok("silent") => {
            // Keep stdin open and never answer, like a server stuck before its handshake.
            let mut sink = tokio::io::sink();
            let _ = tokio::io::copy(&mut tokio::io::stdin(), &mut sink).await; // ends with stdin
            return;
        }
        Ok("slow") => {
            // Starts like a server fetched with npx on a first run: seconds before it answers.
            tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
        }
        _ => {}
    }
    let service = match FakeMcp::for_process().serve(rmcp::transport::stdio()).await {
        Ok(service) => service,
        Err(err) => {
            eprintln!("fake MCP server: handshake failed: {err}");
            std::process::exit(1);
        }
    };
    // Ends when hearth closes stdin.
    if let Err(err) = service.waiting().await {
        eprintln!("fake MCP server: {err}");
    }
}
