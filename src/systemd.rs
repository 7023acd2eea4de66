//! The systemd notify protocol (`Type=notify`): READY=1 once the store and channels are up,
//! WATCHDOG=1 pings at half of `WatchdogSec`, STATUS= lines, STOPPING=1 on shutdown.
//!
//! Messages are datagrams to the socket named by `$NOTIFY_SOCKET` (a path, or `@name` for the
//! abstract namespace). Without that variable — not under systemd — every call does nothing.

use std::os::unix::net::UnixDatagram;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// A handle to systemd's notify socket, or to nothing when not running under systemd.
#[derive(Debug, Clone, Default)]
pub struct Notifier {
    socket: Option<String>,
}

impl Notifier {
    /// Reads `$NOTIFY_SOCKET`.
    pub fn from_env() -> Self {
        Self {
            socket: std::env::var("NOTIFY_SOCKET")
                .ok()
                .filter(|s| !s.is_empty()),
        }
    }

    pub fn is_active(&self) -> bool {
        self.socket.is_some()
    }

    /// Sends one state string, e.g. `READY=1\nSTATUS=…`. Failures are logged, never fatal:
    /// a missed notification must not stop the assistant.
    pub fn notify(&self, state: &str) {
        let Some(path) = &self.socket else { return };
        if let Err(err) = send(path, state) {
            tracing::warn!(error = %err, "systemd notification failed");
        }
    }

    pub fn ready(&self, status: &str) {
        self.notify(&format!("READY=1\nSTATUS={status}"));
    }

    pub fn status(&self, status: &str) {
        self.notify(&format!("STATUS={status}"));
    }

    pub fn stopping(&self) {
        self.notify("STOPPING=1\nSTATUS=stopping");
    }

    /// The watchdog interval systemd expects pings within (`$WATCHDOG_USEC`), if any.
    pub fn watchdog_interval() -> Option<Duration> {
        let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
        // WATCHDOG_PID, when set, names the process the watchdog is meant for.
        if let Ok(pid) = std::env::var("WATCHDOG_PID")
            && pid.parse::<u32>().ok() != Some(std::process::id())
        {
            return None;
        }
        (usec > 0).then(|| Duration::from_micros(usec))
    }

    /// Pings the watchdog at half its interval until `stop` is cancelled.
    pub async fn keep_watchdog(self, stop: CancellationToken) {
        let Some(interval) = Self::watchdog_interval() else {
            return;
        };
        if !self.is_active() {
            return;
        }
        let period = interval / 2;
        loop {
            self.notify("WATCHDOG=1");
            tokio::select! {
                () = tokio::time::sleep(period) => {}
                () = stop.cancelled() => return,
            }
        }
    }
}

fn send(path: &str, state: &str) -> std::io::Result<()> {
    let socket = UnixDatagram::unbound()?;
    if let Some(name) = path.strip_prefix('@') {
        use std::os::linux::net::SocketAddrExt;
        let address = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
        socket.send_to_addr(state.as_bytes(), &address)?;
    } else {
        socket.send_to(state.as_bytes(), path)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sends_datagrams_to_a_path_socket_and_does_nothing_without_one() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("notify.sock");
        let receiver = UnixDatagram::bind(&path).expect("bind");
        let notifier = Notifier {
            socket: Some(path.display().to_string()),
        };
        notifier.ready("2 channels up");
        let mut buf = [0u8; 256];
        let n = receiver.recv(&mut buf).expect("receive");
        assert_eq!(&buf[..n], b"READY=1\nSTATUS=2 channels up");
        Notifier::default().ready("nobody listens"); // must not panic or block
    }

    #[test]
    fn abstract_sockets_work_too() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("hearth-test-{}", std::process::id());
        let address =
            std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).expect("name");
        let receiver = UnixDatagram::bind_addr(&address).expect("bind");
        Notifier {
            socket: Some(format!("@{name}")),
        }
        .stopping();
        let mut buf = [0u8; 64];
        let n = receiver.recv(&mut buf).expect("receive");
        assert_eq!(&buf[..n], b"STOPPING=1\nSTATUS=stopping");
    }
}
