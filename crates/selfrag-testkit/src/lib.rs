//! What a test does when this machine lacks what it needs.
//!
//! Rust's test harness has no "skipped": a test that returns early is counted as passed. So a
//! test that cannot run calls [`skip`] with what it lacks and returns:
//! - under `CI=true`, where the machine should have run it, the call fails the test: the set-up
//!   must provide what the project's own set-up installs, CI runs as root, and a CPU that
//!   reports the features a kernel needs must run that kernel's test;
//! - otherwise it prints the reason and appends `test<TAB>reason` to the file named by
//!   `SELFRAG_TEST_SKIP_LOG`, which `cargo xtask test` empties at its start and lists at its
//!   end, so a reader sees how many tests did not run and why.
//!
//! [`llama_server`] starts the real llama.cpp server that the server-generator tests talk to.
//! `traces` (feature `traces`) builds the hand-made answers that the history, export and CLI
//! tests store and render (one builder, where each crate's tests had their own).

use std::io::Write;

pub mod llama_server;
pub mod s3_server;
#[cfg(feature = "traces")]
pub mod traces;

/// Asserts that two JSON documents (e.g. two Self-RAG traces) are equal but for numbers, which
/// may differ by `tolerance`; `at` names the root in the message, which gives the path.
#[allow(clippy::panic)]
pub fn assert_same_json(a: &serde_json::Value, b: &serde_json::Value, tolerance: f64, at: &str) {
    use serde_json::Value;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (
                x.as_f64().unwrap_or(f64::NAN),
                y.as_f64().unwrap_or(f64::NAN),
            );
            if (x - y).abs() > tolerance || x.is_nan() || y.is_nan() {
                panic!("{at}: {x} and {y} differ by more than {tolerance}");
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            if x.len() != y.len() {
                panic!("{at}: {} and {} elements", x.len(), y.len());
            }
            for (i, (x, y)) in x.iter().zip(y).enumerate() {
                assert_same_json(x, y, tolerance, &format!("{at}[{i}]"));
            }
        }
        (Value::Object(x), Value::Object(y)) => {
            let keys = |o: &serde_json::Map<String, Value>| o.keys().cloned().collect::<Vec<_>>();
            if keys(x) != keys(y) {
                panic!("{at}: keys {:?} and {:?}", keys(x), keys(y));
            }
            for (key, x) in x {
                assert_same_json(x, &y[key], tolerance, &format!("{at}.{key}"));
            }
        }
        _ if a == b => {}
        _ => panic!("{at}: {a} and {b}"),
    }
}

/// The variable naming the skip log (set by `cargo xtask test`).
pub const SKIP_LOG_ENV: &str = "SELFRAG_TEST_SKIP_LOG";

/// What a test lacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lack {
    /// Something the project's set-up provides (a package, the MiniLM weights): a machine
    /// under CI always has it, so there a skip is a failure.
    SetUp,
    /// Root (to mount a tmpfs): a failure under CI where the test runs as root.
    Root,
    /// CPU features, by their `/proc/cpuinfo` names: a failure under CI where the CPU reports
    /// every one of them.
    CpuFeatures(&'static [&'static str]),
    /// Another operating system: never a failure.
    Platform,
}

/// What [`skip`] decided.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The machine should have run the test: it fails.
    Fail,
    /// The machine lacks what the test needs: it is logged as skipped.
    Skip,
}

/// The machine facts a verdict depends on.
#[derive(Debug, Clone, Default)]
pub struct Machine {
    /// `CI=true` (or `1`).
    pub ci: bool,
    /// The effective user id is 0; `None` where it cannot be read.
    pub root: Option<bool>,
    /// The `flags` of `/proc/cpuinfo`; `None` where there is no such file.
    pub cpu_flags: Option<Vec<String>>,
}

impl Machine {
    /// This process's machine.
    pub fn current() -> Self {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
        let root = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("Uid:"))
                    .and_then(|ids| ids.split_whitespace().nth(1).map(|euid| euid == "0"))
            });
        let cpu_flags = std::fs::read_to_string("/proc/cpuinfo").ok().map(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("flags"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, flags)| flags.split_whitespace().map(str::to_owned).collect())
                .unwrap_or_default()
        });
        Self {
            ci,
            root,
            cpu_flags,
        }
    }

    /// Whether a test lacking `lack` must fail on this machine instead of skipping.
    pub fn verdict(&self, lack: Lack) -> Verdict {
        let should_have_run = self.ci
            && match lack {
                Lack::SetUp => true,
                Lack::Root => self.root == Some(true),
                Lack::CpuFeatures(wanted) => self
                    .cpu_flags
                    .as_ref()
                    .is_some_and(|have| wanted.iter().all(|w| have.iter().any(|h| h == w))),
                Lack::Platform => false,
            };
        if should_have_run {
            Verdict::Fail
        } else {
            Verdict::Skip
        }
    }
}

/// Called by a test that cannot run here, before it returns: fails it under CI where the
/// machine should have run it, else prints `why` and logs the skip for the run's summary.
#[track_caller]
#[allow(clippy::panic, clippy::print_stderr)]
pub fn skip(lack: Lack, why: &str) {
    let caller = std::panic::Location::caller();
    let test = std::thread::current()
        .name()
        .filter(|n| *n != "main")
        .map(|n| format!("{} {n}", caller.file()))
        .unwrap_or_else(|| format!("{}:{}", caller.file(), caller.line()));
    if Machine::current().verdict(lack) == Verdict::Fail {
        panic!(
            "{test} did not run: {why}. Under CI=true this machine should run it ({lack:?}), so \
             a skip is a failure."
        );
    }
    eprintln!("\n*** SKIPPED {test}: {why} ***\n");
    let Some(log) = std::env::var_os(SKIP_LOG_ENV) else {
        return;
    };
    let line = format!("{test}\t{}\n", why.replace(['\n', '\t'], " "));
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        panic!("{test}: could not log its skip in {log:?}: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VNNI: &[&str] = &["avx512f", "avx512_vnni"];

    fn machine(ci: bool, root: Option<bool>, flags: Option<&[&str]>) -> Machine {
        Machine {
            ci,
            root,
            cpu_flags: flags.map(|f| f.iter().map(|s| s.to_string()).collect()),
        }
    }

    #[test]
    fn outside_ci_everything_is_a_logged_skip() {
        let m = machine(false, Some(true), Some(&["avx512f", "avx512_vnni"]));
        for lack in [
            Lack::SetUp,
            Lack::Root,
            Lack::CpuFeatures(VNNI),
            Lack::Platform,
        ] {
            assert_eq!(m.verdict(lack), Verdict::Skip, "{lack:?}");
        }
    }

    #[test]
    fn under_ci_a_missing_set_up_always_fails() {
        assert_eq!(
            machine(true, None, None).verdict(Lack::SetUp),
            Verdict::Fail
        );
    }

    #[test]
    fn under_ci_root_fails_only_where_the_test_runs_as_root() {
        assert_eq!(
            machine(true, Some(true), None).verdict(Lack::Root),
            Verdict::Fail
        );
        assert_eq!(
            machine(true, Some(false), None).verdict(Lack::Root),
            Verdict::Skip
        );
        assert_eq!(machine(true, None, None).verdict(Lack::Root), Verdict::Skip);
    }

    #[test]
    fn under_ci_cpu_features_fail_only_where_the_cpu_reports_all_of_them() {
        let all = machine(true, None, Some(&["sse2", "avx512f", "avx512_vnni"]));
        assert_eq!(all.verdict(Lack::CpuFeatures(VNNI)), Verdict::Fail);
        let some = machine(true, None, Some(&["sse2", "avx512f"]));
        assert_eq!(some.verdict(Lack::CpuFeatures(VNNI)), Verdict::Skip);
        let unknown = machine(true, None, None);
        assert_eq!(unknown.verdict(Lack::CpuFeatures(VNNI)), Verdict::Skip);
    }

    #[test]
    fn another_platform_never_fails() {
        let m = machine(true, Some(true), Some(&[]));
        assert_eq!(m.verdict(Lack::Platform), Verdict::Skip);
    }

    #[test]
    fn this_machine_is_read() {
        let m = Machine::current();
        if cfg!(target_os = "linux") {
            assert!(m.root.is_some() && m.cpu_flags.as_ref().is_some_and(|f| !f.is_empty()));
        }
    }
}
