//! Clients from `hearth_channel::http_client::builder` share one TLS configuration whose
//! verifier reads the system's certificate store on the first handshake, not when a client is
//! built; a store that could not be read fails that handshake with the reason and is read
//! again on the next one; and the certificates are really checked.
//!
//! The store is the process's own, found through `SSL_CERT_FILE`, and is read once per
//! process, so the test runs its body in a child process of this test binary with that
//! variable set.

use std::process::Command;

use hearth_channel::error_chain;
use hearth_testkit::tls::{TEST_CA_PEM, TlsFront};

/// Set in the child: where the test CA is to be written.
const CHILD: &str = "HEARTH_HTTP_CLIENT_TEST_CA";
const TEST: &str = "the_system_roots_are_read_on_the_first_handshake_and_again_after_a_failure";

#[test]
fn the_system_roots_are_read_on_the_first_handshake_and_again_after_a_failure() {
    if let Some(ca) = std::env::var_os(CHILD) {
        return child(ca.into());
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let ca = dir.path().join("ca.pem");
    let output = Command::new(std::env::current_exe().expect("this test binary"))
        .args(["--exact", TEST, "--nocapture", "--test-threads=1"])
        .env(CHILD, &ca)
        .env("SSL_CERT_FILE", &ca)
        .env_remove("SSL_CERT_DIR")
        .output()
        .expect("run the child");
    assert!(
        output.status.success(),
        "the child failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

fn child(ca: std::path::PathBuf) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        let backend = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a free port");
        let backend_addr = backend.local_addr().expect("an address");
        let app = axum::Router::new().route("/", axum::routing::get(|| async { "hello" }));
        tokio::spawn(async move { axum::serve(backend, app).await });
        let front = TlsFront::discord(backend_addr).await;

        // No store yet: building a client reads nothing, so it succeeds (reqwest's own verifier
        // would fail here with "No CA certificates were loaded from the system").
        assert!(!ca.exists());
        let client = client_reaching("discord.com", front.addr());

        // The first handshake reads the store, finds nothing, and fails saying so.
        let chain = fetch(&client, "https://discord.com/")
            .await
            .expect_err("no root is trusted yet");
        assert!(chain.contains("No CA certificates"), "{chain}");

        // The store fixed, the next handshake reads it again and is verified.
        std::fs::write(&ca, TEST_CA_PEM).expect("write the CA");
        let body = fetch(&client, "https://discord.com/")
            .await
            .expect("the test CA is trusted now");
        assert_eq!(body, "hello");

        // Another client shares the verifier, and it checks names: the same certificate under
        // another name is refused.
        let other = client_reaching("example.com", front.addr());
        let chain = fetch(&other, "https://example.com/")
            .await
            .expect_err("the certificate is for discord.com");
        assert!(chain.contains("certificate"), "{chain}");
    });
}

/// A client from the shared configuration that resolves `host` to `addr`. Building it must
/// not read the certificate store, so it succeeds even when there is none.
fn client_reaching(host: &str, addr: std::net::SocketAddr) -> reqwest::Client {
    hearth_channel::http_client::builder()
        .resolve(host, addr)
        .build()
        .expect("a client is built without reading the store")
}

/// The body of a GET, or the error's whole cause chain.
async fn fetch(client: &reqwest::Client, url: &str) -> Result<String, String> {
    let response = client.get(url).send().await;
    match response {
        Ok(response) => response.text().await.map_err(|e| error_chain(&e)),
        Err(e) => Err(error_chain(&e)),
    }
}
