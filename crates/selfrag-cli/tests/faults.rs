//! Faults (issue 7) with real processes and a real full disk: `selfrag export` and the settings
//! and history saves SIGKILLed mid-write again and again (the file is always the old or the new
//! version, whole, and the next save leaves no temporary file behind), and a 2 MiB tmpfs filled
//! while exporting and while indexing (a clear error, no partial file, the library still opens
//! with what it had). The disk-full tests need `mount` (root); elsewhere they say loudly that
//! they did not run.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr
)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{describe, selfrag, selfrag_with_models};
use selfrag_core::Answer;
use selfrag_engine::{
    AppSettings, Engine, EngineConfig, ExportFormat, SettingsStore, render, write_atomically,
};
use selfrag_testkit::traces::TraceBuilder;

/// SplitMix64, for replayable kill moments.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// An answer of `segments` segments of about 100 words each, every word tagged with `tag`, so
/// two versions differ everywhere.
fn answer(tag: &str, segments: usize) -> Answer {
    let text = |i: usize| {
        (0..100)
            .map(|w| format!("{tag}{}", (i * 100 + w) % 997))
            .collect::<Vec<_>>()
            .join(" ")
            + "."
    };
    (0..segments)
        .fold(
            TraceBuilder::new(format!("What does {tag} say?")).passage(
                &format!("{tag} notes"),
                "/docs/notes.md",
                None,
                &text(0),
            ),
            |trace, i| trace.segment(&text(i), Some(1), None),
        )
        .build()
}

/// The names in `dir` that are temporary files of an atomic write (see `write_atomically`).
fn temp_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains(".tmp-"))
                .collect()
        })
        .unwrap_or_default()
}

/// Waits until a temporary file left by a killed writer counts as abandoned.
fn let_temp_files_age() {
    std::thread::sleep(Duration::from_millis(2_100));
}

#[test]
fn export_killed_mid_write_leaves_the_old_or_the_new_file_whole() {
    const KILLS: usize = 16;
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("exports");
    std::fs::create_dir_all(&out_dir).unwrap();
    let out = out_dir.join("answer.md");
    let old = render(&answer("old", 10), ExportFormat::Md);
    let new_answer = answer("new", 4_000);
    let new = render(&new_answer, ExportFormat::Md);
    let trace = tmp.path().join("trace.json");
    std::fs::write(&trace, serde_json::to_vec(&new_answer).unwrap()).unwrap();
    let export = || {
        let mut c = selfrag(tmp.path());
        c.args(["export", "--format", "md", "-o"])
            .arg(&out)
            .arg(&trace);
        c
    };

    let started = Instant::now();
    let full = export().output().unwrap();
    assert!(full.status.success(), "{}", describe(&full));
    let full_run = started.elapsed();
    assert_eq!(std::fs::read_to_string(&out).unwrap(), new);

    let mut seed = 7_2026_u64;
    let (mut interrupted, mut mid_write, mut landed_new) = (0, 0, 0);
    for round in 0..KILLS {
        write_atomically(&out, old.as_bytes()).unwrap();
        let temps_before = temp_files(&out_dir).len();
        let mut child = export()
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let delay = if round % 2 == 0 {
            // Any moment of the run.
            let delay = Duration::from_millis(next(&mut seed) % (full_run.as_millis() as u64 + 1));
            std::thread::sleep(delay);
            delay
        } else {
            // Once the temporary file exists, within the write, the fsync or the rename.
            let waiting = Instant::now();
            while temp_files(&out_dir).len() == temps_before
                && child.try_wait().unwrap().is_none()
                && waiting.elapsed() < Duration::from_secs(20)
            {
                std::thread::sleep(Duration::from_micros(200));
            }
            // A few ms at most: the whole write, fsync and rename of this small file take
            // about that, so a longer pause mostly lands after the rename.
            let extra = Duration::from_micros(next(&mut seed) % 3_000);
            std::thread::sleep(extra);
            waiting.elapsed()
        };
        if child.try_wait().unwrap().is_none() {
            interrupted += 1;
        }
        child.kill().unwrap();
        child.wait().unwrap();
        let now = std::fs::read_to_string(&out).unwrap();
        assert!(
            now == old || now == new,
            "round {round}, killed after {delay:?}: the export is neither the old file nor the new one ({} bytes)",
            now.len()
        );
        landed_new += usize::from(now == new);
        mid_write += usize::from(temp_files(&out_dir).len() > temps_before);
    }
    eprintln!(
        "export: full run {full_run:?}; {KILLS} kills, {interrupted} while running, {mid_write} mid-write (temp file left), {landed_new} after the rename"
    );
    assert!(
        interrupted >= KILLS / 2 && mid_write >= KILLS / 4,
        "only {interrupted} of {KILLS} kills hit a running export, {mid_write} mid-write"
    );

    let_temp_files_age();
    let last = export().output().unwrap();
    assert!(last.status.success(), "{}", describe(&last));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), new);
    assert_eq!(
        temp_files(&out_dir),
        Vec::<String>::new(),
        "the next export removes what killed ones left"
    );
}

const SAVE_CHILD_ENV: &str = "SELFRAG_TEST_SAVE_CHILD_DIR";

/// The child of [`settings_and_history_saves_killed_mid_write_keep_a_whole_file`]: saves the
/// settings and a history trace in a loop until killed. Does nothing as a plain test.
#[test]
#[ignore = "run as a child process by settings_and_history_saves_killed_mid_write_keep_a_whole_file"]
fn save_child_saves_until_killed() {
    let Ok(setup) = std::env::var(SAVE_CHILD_ENV) else {
        return;
    };
    let (dir, first) = setup.split_once('\n').unwrap();
    let dir = PathBuf::from(dir);
    let store = SettingsStore::open(&dir.join("config"));
    // Built once: the loop is only the saves, so a kill lands in one.
    let trace = serde_json::to_vec_pretty(&answer("saved", 200)).unwrap();
    for i in first.parse::<usize>().unwrap().. {
        let mut settings = AppSettings::default();
        settings.ask.k = i;
        store.save(settings).unwrap();
        write_atomically(&dir.join("history").join("answer.json"), &trace).unwrap();
    }
}

#[test]
fn settings_and_history_saves_killed_mid_write_keep_a_whole_file() {
    const KILLS: usize = 12;
    let tmp = tempfile::tempdir().unwrap();
    let mut seed = 11_2026_u64;
    let mut mid_write = 0;
    let mut last_k = 0;
    for round in 0..KILLS {
        let first = last_k + 1;
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "save_child_saves_until_killed",
                "--exact",
                "--ignored",
                "--quiet",
            ])
            .env(SAVE_CHILD_ENV, format!("{}\n{first}", tmp.path().display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Killed once the child has saved (its start-up takes a varying few hundred
        // milliseconds), after a random further moment: mid-loop every time.
        let settings = tmp.path().join("config").join("settings.json");
        let saved = || {
            std::fs::read(&settings)
                .ok()
                .and_then(|b| serde_json::from_slice::<AppSettings>(&b).ok())
                .is_some_and(|s| s.ask.k >= first)
        };
        let waiting = Instant::now();
        while !saved() && waiting.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(next(&mut seed) % 40));
        child.kill().unwrap();
        child.wait().unwrap();

        // What the app would load at its next start.
        let store = SettingsStore::open(&tmp.path().join("config"));
        let loaded = store.loaded();
        assert_eq!(
            loaded.notice, None,
            "round {round}: the settings file was broken"
        );
        assert!(
            loaded.settings.ask.k >= first,
            "round {round}: the save the child made before the kill was lost"
        );
        last_k = loaded.settings.ask.k;
        let history = tmp.path().join("history").join("answer.json");
        if history.exists() {
            let trace: Answer = serde_json::from_slice(&std::fs::read(&history).unwrap())
                .unwrap_or_else(|e| panic!("round {round}: the history trace is broken: {e}"));
            assert_eq!(trace.segments.len(), 200, "round {round}");
        }
        let left = temp_files(&tmp.path().join("config")).len()
            + temp_files(&tmp.path().join("history")).len();
        mid_write += usize::from(left > 0);
    }
    eprintln!("saves: {KILLS} kills, {mid_write} rounds with a temp file left; last k {last_k}");
    assert!(
        mid_write > 0,
        "no kill landed mid-save: the test proved nothing"
    );

    let_temp_files_age();
    let store = SettingsStore::open(&tmp.path().join("config"));
    store.save(AppSettings::default()).unwrap();
    write_atomically(&tmp.path().join("history").join("answer.json"), b"{}").unwrap();
    assert_eq!(temp_files(&tmp.path().join("config")), Vec::<String>::new());
    assert_eq!(
        temp_files(&tmp.path().join("history")),
        Vec::<String>::new()
    );
}

/// A tmpfs of `size` mounted on `dir`, unmounted on drop; `None` (with the reason printed)
/// where this process may not mount.
struct SmallDisk {
    dir: PathBuf,
}

impl SmallDisk {
    fn mount(dir: &Path, size: &str) -> Option<Self> {
        std::fs::create_dir_all(dir).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output();
        match out {
            Ok(o) if o.status.success() => Some(Self {
                dir: dir.to_path_buf(),
            }),
            Ok(o) => {
                selfrag_testkit::skip(
                    selfrag_testkit::Lack::Root,
                    &format!(
                        "the disk-full test needs a {size} tmpfs and `mount` refused ({}): run it as root (or in a container with CAP_SYS_ADMIN)",
                        String::from_utf8_lossy(&o.stderr).trim()
                    ),
                );
                None
            }
            Err(e) => {
                selfrag_testkit::skip(
                    selfrag_testkit::Lack::Platform,
                    &format!("the disk-full test needs `mount` ({e}): run it on Linux as root"),
                );
                None
            }
        }
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.dir).status();
    }
}

#[cfg(target_os = "linux")]
#[test]
fn export_to_a_full_disk_is_a_clear_error_and_keeps_the_old_file() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(disk) = SmallDisk::mount(&tmp.path().join("small"), "2m") else {
        return;
    };
    let out = disk.dir.join("answer.md");
    let old = render(&answer("old", 10), ExportFormat::Md);
    std::fs::write(&out, &old).unwrap();
    let big = answer("big", 4_000);
    let trace = tmp.path().join("trace.json");
    std::fs::write(&trace, serde_json::to_vec(&big).unwrap()).unwrap();
    assert!(render(&big, ExportFormat::Md).len() > 2 << 20);

    let result = selfrag(tmp.path())
        .args(["export", "--format", "md", "-o"])
        .arg(&out)
        .arg(&trace)
        .output()
        .unwrap();
    let message = describe(&result);
    assert!(!result.status.success(), "{message}");
    assert!(
        message.contains("answer.md") && message.contains("disk is full"),
        "the error must name the file and say the disk is full: {message}"
    );
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        old,
        "the old export is untouched"
    );
    let names: Vec<String> = std::fs::read_dir(&disk.dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        ["answer.md"],
        "no partial file is left on the full disk"
    );
}

fn write_corpus(dir: &Path, files: usize, words: usize, tag: &str) {
    std::fs::create_dir_all(dir).unwrap();
    for i in 0..files {
        let text: String = (0..words)
            .map(|w| format!("{tag}{} ", (i * 31 + w * 7) % 5003))
            .collect();
        std::fs::write(
            dir.join(format!("{tag}{i}.md")),
            format!("# {tag} {i}\n\n{text}\n"),
        )
        .unwrap();
    }
}

fn documents(data: &Path, models: &Path) -> Vec<String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let engine = Engine::new(EngineConfig {
            data_dir: data.to_path_buf(),
            library: None,
            generator: Some(models.join("tiny.gguf")),
            embedder: Some(models.join("tiny-bert")),
            device: selfrag_engine::DeviceChoice::Cpu,
            embedder_precision: Default::default(),
            generator_numerics: Default::default(),
            extract_worker: None,
            generator_server: None,
            embedder_server: None,
            shared_source_limit: selfrag_engine::DEFAULT_SHARED_SOURCE_LIMIT,
        })
        .unwrap();
        let mut paths: Vec<String> = engine
            .documents()
            .await
            .unwrap()
            .into_iter()
            .map(|d| {
                assert!(d.passages > 0, "a half-written document: {d:?}");
                d.path
            })
            .collect();
        paths.sort();
        paths
    })
}

#[cfg(target_os = "linux")]
#[test]
fn indexing_onto_a_full_disk_is_a_clear_error_and_the_library_keeps_what_it_had() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(disk) = SmallDisk::mount(&tmp.path().join("small"), "2m") else {
        return;
    };
    let models = common::tiny_models(&tmp.path().join("models"));
    let data = disk.dir.join("data");
    let run = |args: &[&Path]| {
        selfrag_with_models(&data, &models)
            .arg("index")
            .args(args)
            .output()
            .unwrap()
    };

    let first = std::path::absolute(tmp.path().join("first")).unwrap();
    write_corpus(&first, 2, 200, "first");
    let ok = run(&[&first]);
    assert!(ok.status.success(), "{}", describe(&ok));
    let before = documents(&data, &models);
    assert_eq!(before.len(), 2);

    // Text that does not compress, 2.4 MB of it.
    let big = std::path::absolute(tmp.path().join("big")).unwrap();
    std::fs::create_dir_all(&big).unwrap();
    let mut state = 0x0D15_CF11_u64;
    for i in 0..30 {
        let text: String = (0..8_000)
            .map(|_| format!("w{:x} ", next(&mut state) % 0xF_FFFF))
            .collect();
        std::fs::write(big.join(format!("big{i:02}.md")), text).unwrap();
    }
    // Something else fills the disk, leaving 200 KB: the library grows into the last of it.
    let filler = disk.dir.join("filler");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&filler).unwrap();
        while f.write_all(&[0x5A; 64 << 10]).is_ok() {}
        let len = f.metadata().unwrap().len();
        f.set_len(len.saturating_sub(200 << 10)).unwrap();
    }
    let full = run(&[&big]);
    let message = describe(&full);
    eprintln!("indexing onto a full disk: {message}");
    assert!(!full.status.success(), "{message}");
    assert!(
        message.contains("disk holding the library") && message.contains("free some space"),
        "the error must say the disk is full and what to do: {message}"
    );
    let failed = message.matches("failed ").count();
    assert!(
        failed <= 1,
        "indexing must stop at the first file the full disk refuses, not fail {failed} files one by one: {message}"
    );
    assert!(
        data.join("library").join("job.json").exists(),
        "the stopped job stays pending, to resume once there is room"
    );

    // The next start sees a consistent library with at least what it had.
    let after = documents(&data, &models);
    for path in &before {
        assert!(after.contains(path), "{path} was lost: {after:?}");
    }
    drop(disk);
}
