//! A real CalDAV server for the calendar tests: Radicale from PyPI, in a venv cached at
//! [`RADICALE_CACHE_DIR`] (installed on first use like [`crate::matrix`]'s Synapse; `.ci/run`
//! installs it beforehand), started on 127.0.0.1 on a free port with a temporary storage
//! directory and plain htpasswd logins. [`Radicale::client`] plays "another client" that
//! changes events behind hearth's back.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::net::free_port;

/// Where the venv with Radicale is cached.
pub const RADICALE_CACHE_DIR: &str = "/var/tmp/hearth-cache/radicale";

/// The Python of the venv with Radicale, installing it when missing.
pub fn ensure_installed() -> Result<PathBuf, String> {
    static INSTALLED: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            crate::python::venv_with(Path::new(RADICALE_CACHE_DIR), "radicale", "radicale")
        })
        .clone()
}

/// A running Radicale; killed when dropped.
pub struct Radicale {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Radicale {
    /// Starts a Radicale where each of `users` (name, password) may log in, and waits until it
    /// answers.
    pub fn start(users: &[(&str, &str)]) -> Result<Self, String> {
        let python = ensure_installed()?;
        let dir = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
        let port = free_port();
        let htpasswd: String = users.iter().map(|(u, p)| format!("{u}:{p}\n")).collect();
        std::fs::write(dir.path().join("users"), htpasswd).map_err(|e| e.to_string())?;
        let config = format!(
            "[server]\nhosts = 127.0.0.1:{port}\n\n[auth]\ntype = htpasswd\nhtpasswd_filename = {users}\nhtpasswd_encryption = plain\ndelay = 0\n\n[rights]\ntype = owner_only\n\n[storage]\nfilesystem_folder = {storage}\n\n[logging]\nlevel = warning\n",
            users = dir.path().join("users").display(),
            storage = dir.path().join("collections").display(),
        );
        std::fs::write(dir.path().join("config"), config).map_err(|e| e.to_string())?;
        let log =
            std::fs::File::create(dir.path().join("radicale.log")).map_err(|e| e.to_string())?;
        let child = Command::new(&python)
            .args(["-m", "radicale", "--config"])
            .arg(dir.path().join("config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start Radicale: {e}"))?;
        let mut server = Self { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok(server);
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                let log = std::fs::read_to_string(server.dir.path().join("radicale.log"))
                    .unwrap_or_default();
                return Err(format!("Radicale exited with {status}: {log}"));
            }
            if Instant::now() > deadline {
                return Err("Radicale did not answer within 30 s".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// A client logged in as `user`, for what another calendar app would do.
    pub fn client(&self, user: &str, password: &str) -> DavClient {
        DavClient {
            http: reqwest::Client::new(),
            user: user.into(),
            password: password.into(),
        }
    }

    /// Makes the calendar `/<user>/<name>/` (MKCALENDAR) and returns its URL, with the slash.
    pub async fn make_calendar(
        &self,
        user: &str,
        password: &str,
        name: &str,
    ) -> Result<String, String> {
        let url = format!("{}/{user}/{name}/", self.url());
        let client = self.client(user, password);
        let status = client.send("MKCALENDAR", &url, None, &[]).await?.0;
        if status != 201 {
            return Err(format!("MKCALENDAR {url}: HTTP {status}"));
        }
        Ok(url)
    }
}

impl Drop for Radicale {
    fn drop(&mut self) {
        // Best effort: the process may have exited already.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Another CalDAV client, as the owner's phone would be.
pub struct DavClient {
    http: reqwest::Client,
    user: String,
    password: String,
}

impl DavClient {
    /// Sends `method` to `url`; the status, the ETag and the body.
    pub async fn send(
        &self,
        method: &str,
        url: &str,
        body: Option<String>,
        headers: &[(&str, &str)],
    ) -> Result<(u16, Option<String>, String), String> {
        let method = reqwest::Method::from_bytes(method.as_bytes()).map_err(|e| e.to_string())?;
        let mut request = self
            .http
            .request(method, url)
            .basic_auth(&self.user, Some(&self.password));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        if let Some(body) = body {
            request = request.body(body);
        }
        let response = request.send().await.map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let etag = response
            .headers()
            .get("etag")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let text = response.text().await.map_err(|e| e.to_string())?;
        Ok((status, etag, text))
    }

    /// Puts the iCalendar `data` at `url` (unconditionally); the new ETag.
    pub async fn put(&self, url: &str, data: &str) -> Result<Option<String>, String> {
        let (status, etag, body) = self
            .send(
                "PUT",
                url,
                Some(data.to_string()),
                &[("content-type", "text/calendar")],
            )
            .await?;
        if !(200..300).contains(&status) {
            return Err(format!("PUT {url}: HTTP {status}: {body}"));
        }
        Ok(etag)
    }

    /// The object at `url`: its data, or `None` when it is not there.
    pub async fn get(&self, url: &str) -> Result<Option<String>, String> {
        let (status, _, body) = self.send("GET", url, None, &[]).await?;
        match status {
            200 => Ok(Some(body)),
            404 => Ok(None),
            _ => Err(format!("GET {url}: HTTP {status}")),
        }
    }
}
