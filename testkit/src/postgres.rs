//! A throwaway PostgreSQL server for tests: `initdb` into a temporary directory, `pg_ctl start`
//! on a free port on 127.0.0.1, `pg_ctl stop` on drop.
//!
//! Uses the server binaries of Debian's `postgresql` package (or any `initdb` on `PATH`). When
//! they are missing, [`TestPostgres::start`] returns `None` and the caller skips its PostgreSQL
//! test with a note; `.ci/run` installs the package so CI always runs them. As root (CI), the
//! server runs as the `postgres` system user, since PostgreSQL refuses to run as root.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A running server; stopped and deleted when dropped.
pub struct TestPostgres {
    dir: PathBuf,
    bin: PathBuf,
    port: u16,
    as_postgres_user: bool,
}

impl TestPostgres {
    /// Starts a server, or `None` (with the reason on stderr) when PostgreSQL is not installed
    /// or cannot start here.
    pub fn start() -> Option<Self> {
        let Some(bin) = find_bin() else {
            eprintln!(
                "PostgreSQL server binaries not found (apt-get install postgresql); skipping"
            );
            return None;
        };
        let as_postgres_user = is_root();
        let dir =
            std::env::temp_dir().join(format!("hearth-pg-{}-{}", std::process::id(), unique()));
        let data = dir.join("data");
        if let Err(err) = std::fs::create_dir_all(&dir) {
            eprintln!("cannot create {}: {err}; skipping", dir.display());
            return None;
        }
        if as_postgres_user {
            let chowned = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&dir)
                .status();
            if !chowned.is_ok_and(|s| s.success()) {
                eprintln!(
                    "cannot hand {} to the postgres user; skipping",
                    dir.display()
                );
                return None;
            }
        }
        let port = crate::net::free_port();
        let server = Self {
            dir: dir.clone(),
            bin,
            port,
            as_postgres_user,
        };
        let initdb = server
            .command("initdb")
            .args([
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--no-sync",
                "-D",
            ])
            .arg(&data)
            .output();
        match initdb {
            Ok(out) if out.status.success() => {}
            Ok(out) => {
                eprintln!(
                    "initdb failed: {}; skipping",
                    String::from_utf8_lossy(&out.stderr)
                );
                return None;
            }
            Err(err) => {
                eprintln!("initdb did not run: {err}; skipping");
                return None;
            }
        }
        let options = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off",
            dir.display()
        );
        let started = server
            .command("pg_ctl")
            .args(["-w", "-t", "30", "-D"])
            .arg(&data)
            .args(["-o", &options, "-l"])
            .arg(dir.join("server.log"))
            .arg("start")
            .stdout(Stdio::null())
            .output();
        match started {
            Ok(out) if out.status.success() => Some(server),
            other => {
                let log = std::fs::read_to_string(dir.join("server.log")).unwrap_or_default();
                eprintln!("PostgreSQL did not start ({other:?}): {log}; skipping");
                None
            }
        }
    }

    /// The URL of the `postgres` database.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Creates a fresh database and returns its URL.
    pub fn create_database(&self, name: &str) -> Result<String, String> {
        let out = self
            .command("createdb")
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
                name,
            ])
            .output()
            .map_err(|err| format!("createdb did not run: {err}"))?;
        if !out.status.success() {
            return Err(format!(
                "createdb failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(format!(
            "postgres://postgres@127.0.0.1:{}/{name}",
            self.port
        ))
    }

    fn command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        if self.as_postgres_user {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(path);
            command
        } else {
            Command::new(path)
        }
    }
}

impl Drop for TestPostgres {
    fn drop(&mut self) {
        // Best effort: a server left running would only hold a temporary directory.
        let _ = self
            .command("pg_ctl")
            .args(["-D"])
            .arg(self.dir.join("data"))
            .args(["-m", "immediate", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn find_bin() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path().join("bin"))
        .collect();
    candidates.sort();
    candidates.reverse();
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path));
    }
    candidates
        .into_iter()
        .find(|dir| has(dir, "initdb") && has(dir, "pg_ctl") && has(dir, "createdb"))
}

fn has(dir: &Path, program: &str) -> bool {
    dir.join(program).is_file()
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

fn unique() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}
