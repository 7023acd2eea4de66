//! Defaults that come from the machine and the user running hearth rather than from the file:
//! where the data lives (systemd's `$STATE_DIRECTORY` for a service, else
//! `$XDG_DATA_HOME/hearth`) and the local timezone (`$TZ`, else what
//! `/etc/localtime` points at, else `/etc/timezone`). Each comes with the words that say where
//! it came from, which `hearth check` prints: another directory must not silently mean another
//! assistant, and "remind me at 9" must not be an hour off.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use chrono_tz::Tz;

/// Where the data lives when neither `$XDG_DATA_HOME` nor `$HOME` says: the current directory,
/// as before there was a better default (the tests and a bare `env -i hearth chat` rely on it).
const FALLBACK_DATA_DIR: &str = "./data";

/// A default and where it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found<T> {
    pub value: T,
    /// e.g. `$XDG_DATA_HOME/hearth`, `/etc/localtime`.
    pub from: String,
}

/// The defaults the machine supplies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostDefaults {
    pub data_dir: Found<PathBuf>,
    pub timezone: Found<Tz>,
}

impl HostDefaults {
    /// Reads the defaults from `env` and, when `etc` is given (`/etc`), from the zone files
    /// there; without `etc` only `$TZ` can name a timezone (tests, text loaded on its own).
    pub fn detect(env: &HashMap<String, String>, etc: Option<&Path>) -> Self {
        Self {
            data_dir: data_dir(env),
            timezone: timezone(env, etc),
        }
    }
}

/// Under systemd with `StateDirectory=`, that directory (`$STATE_DIRECTORY`, the first one
/// listed): a service's `$HOME` is no place for data (a dynamic user's is `/`). Otherwise
/// `$XDG_DATA_HOME/hearth`, else `$HOME/.local/share/hearth` (the XDG base directory rules: an
/// empty or relative `XDG_DATA_HOME` is ignored), else `./data`.
fn data_dir(env: &HashMap<String, String>) -> Found<PathBuf> {
    let absolute = |name: &str| {
        env.get(name)
            .and_then(|value| value.split(':').next())
            .map(PathBuf::from)
            .filter(|path| path.is_absolute())
    };
    if let Some(state) = absolute("STATE_DIRECTORY") {
        return Found {
            value: state,
            from: "$STATE_DIRECTORY, systemd's StateDirectory=".into(),
        };
    }
    if let Some(base) = absolute("XDG_DATA_HOME") {
        return Found {
            value: base.join("hearth"),
            from: "$XDG_DATA_HOME/hearth".into(),
        };
    }
    if let Some(home) = absolute("HOME") {
        return Found {
            value: home.join(".local/share/hearth"),
            from: "~/.local/share/hearth, as $XDG_DATA_HOME is not set".into(),
        };
    }
    Found {
        value: PathBuf::from(FALLBACK_DATA_DIR),
        from: "the current directory, as neither $XDG_DATA_HOME nor $HOME is set".into(),
    }
}

fn timezone(env: &HashMap<String, String>, etc: Option<&Path>) -> Found<Tz> {
    let mut unusable = String::new();
    if let Some(tz) = env.get("TZ").filter(|tz| !tz.is_empty()) {
        // `:Europe/Berlin` and `:/etc/localtime` are glibc's forms; a path may name the zone.
        let name = tz.strip_prefix(':').unwrap_or(tz);
        let zone = if name.starts_with('/') {
            zone_in_path(Path::new(name))
        } else {
            known_zone(name)
        };
        match zone {
            Some(zone) => {
                return Found {
                    value: zone,
                    from: "$TZ".into(),
                };
            }
            // `:/etc/localtime` means "the system's zone", which is looked up next anyway.
            None if name.starts_with("/etc/") => {}
            None => unusable = format!(" ($TZ={tz} is not an IANA zone name)"),
        }
    }
    if let Some(etc) = etc {
        let localtime = etc.join("localtime");
        if let Some(zone) = std::fs::read_link(&localtime)
            .ok()
            .and_then(|target| zone_in_path(&target))
        {
            return Found {
                value: zone,
                from: format!("{}{unusable}", localtime.display()),
            };
        }
        let file = etc.join("timezone");
        if let Some(zone) = std::fs::read_to_string(&file)
            .ok()
            .and_then(|text| known_zone(text.trim()))
        {
            return Found {
                value: zone,
                from: format!("{}{unusable}", file.display()),
            };
        }
    }
    Found {
        value: chrono_tz::UTC,
        from: format!(
            "nothing names the local zone (no $TZ, /etc/localtime or /etc/timezone){unusable}: set daemon.timezone"
        ),
    }
}

/// The zone a path into a zoneinfo directory names: `/usr/share/zoneinfo/Europe/Berlin` (the
/// usual target of `/etc/localtime`), also under `posix/` or `right/`.
fn zone_in_path(path: &Path) -> Option<Tz> {
    let text = path.to_str()?;
    let (_, zone) = text.rsplit_once("zoneinfo/")?;
    let zone = zone
        .strip_prefix("posix/")
        .or_else(|| zone.strip_prefix("right/"))
        .unwrap_or(zone);
    known_zone(zone)
}

fn known_zone(name: &str) -> Option<Tz> {
    name.parse::<Tz>().ok()
}

#[cfg(test)]
mod tests {
    use hearth_channel::testkit::env;

    use super::*;

    #[test]
    fn data_dir_follows_the_xdg_rules() {
        let found = data_dir(&env(&[("XDG_DATA_HOME", "/x/data"), ("HOME", "/home/me")]));
        assert_eq!(found.value, PathBuf::from("/x/data/hearth"));
        assert_eq!(found.from, "$XDG_DATA_HOME/hearth");
        // A relative XDG_DATA_HOME is invalid by the spec and ignored.
        let found = data_dir(&env(&[("XDG_DATA_HOME", "rel"), ("HOME", "/home/me")]));
        assert_eq!(found.value, PathBuf::from("/home/me/.local/share/hearth"));
        // A service's state directory beats a home that is `/`.
        let found = data_dir(&env(&[
            ("STATE_DIRECTORY", "/var/lib/hearth"),
            ("HOME", "/"),
        ]));
        assert_eq!(found.value, PathBuf::from("/var/lib/hearth"));
        let found = data_dir(&env(&[]));
        assert_eq!(found.value, PathBuf::from("./data"));
        assert!(found.from.contains("neither"), "{}", found.from);
    }

    #[test]
    fn timezone_from_tz_in_each_of_its_forms() {
        for tz in [
            "Europe/Berlin",
            ":Europe/Berlin",
            "/usr/share/zoneinfo/Europe/Berlin",
        ] {
            let found = timezone(&env(&[("TZ", tz)]), None);
            assert_eq!(found.value.name(), "Europe/Berlin", "{tz}");
            assert_eq!(found.from, "$TZ");
        }
    }

    #[test]
    fn timezone_from_the_localtime_link_then_the_timezone_file_then_utc_with_a_note() {
        let etc = tempfile::tempdir().expect("temp dir");
        let found = timezone(&env(&[("TZ", "Mars/Olympus")]), Some(etc.path()));
        assert_eq!(found.value, chrono_tz::UTC);
        assert!(
            found.from.contains("set daemon.timezone") && found.from.contains("Mars/Olympus"),
            "{}",
            found.from
        );

        std::fs::write(etc.path().join("timezone"), "Asia/Tokyo\n").expect("write");
        let found = timezone(&env(&[]), Some(etc.path()));
        assert_eq!(found.value.name(), "Asia/Tokyo");
        assert!(found.from.ends_with("/timezone"), "{}", found.from);

        std::os::unix::fs::symlink(
            "/usr/share/zoneinfo/posix/America/New_York",
            etc.path().join("localtime"),
        )
        .expect("symlink");
        let found = timezone(&env(&[("TZ", ":/etc/localtime")]), Some(etc.path()));
        assert_eq!(found.value.name(), "America/New_York");
        assert!(found.from.ends_with("/localtime"), "{}", found.from);
    }
}
