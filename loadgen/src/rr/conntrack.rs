//! Reads the conntrack table's use of this process's network namespace (the node's for a
//! hostNetwork client, the pod's otherwise): `/proc/sys/net/netfilter/nf_conntrack_count` and
//! `nf_conntrack_max`, at the start of a test, once a second and at the end. Reading fails
//! when nf_conntrack is not loaded (no table, so nothing to fill) or /proc/sys is not readable;
//! the report then carries the reason instead of figures.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use protocol::rr::{ConntrackUse, MAX_CONNTRACK_ENTRIES};

const COUNT: &str = "/proc/sys/net/netfilter/nf_conntrack_count";
const MAX: &str = "/proc/sys/net/netfilter/nf_conntrack_max";
/// A number in /proc/sys is a few digits and a newline; more is not one.
const LONGEST: u64 = 32;

/// The conntrack readings of one test.
pub struct ConntrackWatch {
    reading: Result<ConntrackUse, String>,
}

impl ConntrackWatch {
    /// Reads count and limit now (the start of the test).
    pub fn start() -> Self {
        ConntrackWatch::start_at(Path::new(COUNT), Path::new(MAX))
    }

    fn start_at(count: &Path, max: &Path) -> Self {
        let reading = read_number(count).and_then(|now| {
            Ok(ConntrackUse {
                at_start: now,
                at_end: now,
                highest: now,
                max: read_number(max)?,
            })
        });
        ConntrackWatch { reading }
    }

    /// Reads the count again (once a second, and at the end: the last one is `at_end`).
    pub fn sample(&mut self) {
        self.sample_at(Path::new(COUNT));
    }

    fn sample_at(&mut self, count: &Path) {
        if let Ok(c) = &mut self.reading {
            match read_number(count) {
                Ok(now) => {
                    c.at_end = now;
                    c.highest = c.highest.max(now);
                }
                Err(e) => self.reading = Err(e),
            }
        }
    }

    /// The figures, or why there are none.
    pub fn finish(self) -> (Option<ConntrackUse>, Option<String>) {
        match self.reading {
            Ok(c) => (Some(c), None),
            Err(why) => (None, Some(why)),
        }
    }
}

/// One bounded number from a /proc/sys file.
fn read_number(path: &Path) -> Result<u64, String> {
    let shown = path.display();
    let mut text = String::new();
    File::open(path)
        .and_then(|f| f.take(LONGEST).read_to_string(&mut text))
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => format!(
                "no {shown}: nf_conntrack is not loaded in the client's network namespace, so \
                 there is no conntrack table to fill"
            ),
            _ => format!("reading {shown}: {e}"),
        })?;
    text.trim()
        .parse::<u64>()
        .ok()
        .filter(|n| *n <= MAX_CONNTRACK_ENTRIES)
        .ok_or_else(|| format!("{shown} holds {:.32?}, not a count", text.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// A directory of this test's own (removed on drop).
    struct Dir(std::path::PathBuf);

    impl Dir {
        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn dir_for(test: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("nb-conntrack-{}-{test}", std::process::id()));
        fs::create_dir_all(&d).unwrap();
        Dir(d)
    }

    #[test]
    fn start_samples_and_end_give_first_last_and_highest() {
        let d = dir_for("samples");
        let (count, max) = (d.path().join("count"), d.path().join("max"));
        fs::write(&count, "120\n").unwrap();
        fs::write(&max, "262144\n").unwrap();
        let mut w = ConntrackWatch::start_at(&count, &max);
        fs::write(&count, "9000\n").unwrap();
        w.sample_at(&count);
        fs::write(&count, "300\n").unwrap();
        w.sample_at(&count);
        let (c, note) = w.finish();
        let c = c.unwrap();
        assert_eq!(
            (c.at_start, c.at_end, c.highest, c.max),
            (120, 300, 9000, 262_144)
        );
        assert_eq!(note, None);
    }

    #[test]
    fn what_cannot_be_read_is_said_with_the_reason() {
        let d = dir_for("unreadable");
        let (count, max) = (d.path().join("count"), d.path().join("max"));
        let (c, note) = ConntrackWatch::start_at(&count, &max).finish();
        assert_eq!(c, None);
        assert!(note.unwrap().contains("nf_conntrack is not loaded"));
        for garbage in ["-1", "abc", "99999999999999999999", "4294967296"] {
            fs::write(&count, garbage).unwrap();
            fs::write(&max, "10").unwrap();
            let (c, note) = ConntrackWatch::start_at(&count, &max).finish();
            assert_eq!(c, None, "{garbage}");
            assert!(note.unwrap().contains("not a count"), "{garbage}");
        }
        // Readable at the start, gone later: no half figures.
        fs::write(&count, "5").unwrap();
        let mut w = ConntrackWatch::start_at(&count, &max);
        fs::remove_file(&count).unwrap();
        w.sample_at(&count);
        assert_eq!(w.finish().0, None);
    }
}
