//! `cargo xtask stress`: indexing under load, in a loop, to catch a job that stops without a
//! word or a library left locked by a killed process (issue 50). Not part of `cargo xtask test`:
//! it is meant to run for many minutes on a machine made busy on purpose.
//!
//! The load is the kind a user's machine has: a busy loop on every core, a writer that fsyncs
//! 8 MiB files on the disk that holds the library, and memory taken until 2 GiB is left (at most
//! half of what was free). Under it, two kinds of rounds take turns:
//!
//! - **drop**: `selfrag index` on a folder of 63 documents into a new library, the engine path the
//!   app runs for a dropped folder. A round stalls when the job prints nothing for
//!   [`STALL`]; it then is killed and its last lines kept.
//! - **kill**: `selfrag index` killed (SIGKILL) at a random moment, then at once
//!   `selfrag library list` (which must never say the library is in use: the killed process is
//!   gone) and `selfrag index` again (which must finish the job, 63 documents).
//! - **app**: the real app's end-to-end test of the library pane (`tests/e2e/library.test.mjs`:
//!   a folder of 63 notes dropped, paused, resumed, listed, a document removed, a folder
//!   watched) under Xvfb, where the stall was first seen.
//!
//! The figures go to `target/stress/report.md` and to the terminal.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// A job that prints nothing for this long has stalled: the engine's own notice of a slow step
/// comes after 20 s, and each file of this corpus takes well under a second.
const STALL: Duration = Duration::from_secs(60);

/// Documents in the folder each round indexes: as many as in the e2e drop that stalled once.
const DOCUMENTS: usize = 63;

pub fn stress(root: &Path, args: &[String]) -> Result<()> {
    let (mut rounds, mut app_rounds) = (40usize, 10usize);
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let count = |value: Option<&String>| {
            value
                .and_then(|n| n.parse::<usize>().ok())
                .with_context(|| format!("{arg} needs a number of rounds"))
        };
        match arg.as_str() {
            "--rounds" => rounds = count(args.next())?,
            "--app" => app_rounds = count(args.next())?,
            other => {
                bail!("unknown argument `{other}`: cargo xtask stress [--rounds N] [--app N]")
            }
        }
    }
    crate::setup(root, app_rounds > 0)?;
    let t = crate::step("build the command line");
    crate::status(
        crate::cargo().args(["build", "--quiet", "--workspace", "--bin", "selfrag"]),
        "building selfrag",
    )?;
    crate::done("build the command line", t);
    let cli = crate::target_dir()
        .join("debug")
        .join(crate::exe("selfrag"));
    let out = root.join("target/stress");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).context("creating target/stress")?;
    let (gguf, bert) = crate::fixtures(&out.join("models"))?;
    let corpus = out.join("corpus");
    write_corpus(&corpus)?;

    let app = if app_rounds > 0 {
        crate::build_ui(root)?;
        Some(crate::build_app()?)
    } else {
        None
    };
    let load = Load::start(&out)?;
    eprintln!(
        "load: {} busy threads, an fsync writer in {}, {} MiB of memory held",
        load.threads,
        out.display(),
        load.memory_mib
    );
    let runner = Runner {
        cli,
        gguf,
        bert,
        corpus,
        out: out.clone(),
    };
    let mut tally = Tally::default();
    let started = Instant::now();
    if let Some(app) = &app {
        let xvfb = crate::start_xvfb()?;
        let display = xvfb.as_ref().map(|x| x.display.clone());
        for round in 0..app_rounds {
            runner.app_round(root, app, display.as_deref(), round, &mut tally)?;
            eprintln!(
                "app round {}/{app_rounds}: {} failed, {:.0} s",
                round + 1,
                tally.app_failures.len(),
                started.elapsed().as_secs_f64()
            );
        }
    }
    for round in 0..rounds {
        runner.drop_round(round, &mut tally)?;
        runner.kill_round(round, &mut tally)?;
        eprintln!(
            "round {}/{rounds}: {} drop rounds ({} stalled), {} kill rounds ({} busy, {} not finished), {:.0} s",
            round + 1,
            tally.drops,
            tally.stalls.len(),
            tally.kills,
            tally.busy.len(),
            tally.unfinished.len(),
            started.elapsed().as_secs_f64()
        );
    }
    drop(load);
    let report = tally.report(rounds, started.elapsed());
    std::fs::write(out.join("report.md"), &report).context("writing target/stress/report.md")?;
    eprintln!("\n{report}");
    if tally.stalls.is_empty()
        && tally.busy.is_empty()
        && tally.unfinished.is_empty()
        && tally.app_failures.is_empty()
    {
        Ok(())
    } else {
        bail!("indexing stalled or a library stayed locked: see target/stress/report.md")
    }
}

/// 63 documents of one to five passages: Markdown, text and HTML, in three folders.
fn write_corpus(dir: &Path) -> Result<()> {
    for i in 0..DOCUMENTS {
        let folder = dir.join(format!("folder{}", i % 3));
        std::fs::create_dir_all(&folder)
            .with_context(|| format!("creating {}", folder.display()))?;
        let mut body = String::new();
        for p in 0..(1 + i % 5) {
            let words: Vec<String> = (0..110)
                .map(|w| format!("word{} topic{}", (i * 7 + p * 3 + w) % 97, i))
                .collect();
            body.push_str(&format!("Part {p}. {}\n\n", words.join(" ")));
        }
        let (name, text) = match i % 3 {
            0 => (format!("doc{i}.md"), format!("# Document {i}\n\n{body}")),
            1 => (format!("doc{i}.txt"), body),
            _ => (
                format!("doc{i}.html"),
                format!(
                    "<html><head><title>Document {i}</title></head><body><p>{}</p></body></html>",
                    body.replace("\n\n", "</p><p>")
                ),
            ),
        };
        std::fs::write(folder.join(&name), text).with_context(|| format!("writing {name}"))?;
    }
    Ok(())
}

/// What the rounds saw.
#[derive(Default)]
struct Tally {
    drops: usize,
    kills: usize,
    /// Drop rounds that printed nothing for [`STALL`]: the round and its last lines.
    stalls: Vec<String>,
    /// Kill rounds after which the next process was told the library is in use.
    busy: Vec<String>,
    /// Kill rounds whose resumed job did not end with every document indexed.
    unfinished: Vec<String>,
    /// Notices of a step that lasted ("still … after N s"), with their rounds.
    slow_steps: Vec<String>,
    drop_seconds: Vec<f64>,
    apps: usize,
    /// App rounds whose end-to-end test failed, with the end of its output.
    app_failures: Vec<String>,
    app_seconds: Vec<f64>,
}

impl Tally {
    fn report(&self, rounds: usize, took: Duration) -> String {
        let mut text = format!(
            "# cargo xtask stress --rounds {rounds} --app {}\n\n\
             {} drop rounds ({DOCUMENTS} documents each), {} kill rounds and {} app rounds in \
             {:.1} min under load.\n\n\
             - stalled rounds (no output for {} s): {}\n\
             - kill rounds after which the library was reported in use: {}\n\
             - rounds whose job did not index every document: {}\n\
             - app rounds whose end-to-end test failed: {}\n\
             - slow-step notices: {}\n\
             - a drop round's time: {}\n\
             - an app round's time: {}\n",
            self.apps,
            self.drops,
            self.kills,
            self.apps,
            took.as_secs_f64() / 60.0,
            STALL.as_secs(),
            self.stalls.len(),
            self.busy.len(),
            self.unfinished.len(),
            self.app_failures.len(),
            self.slow_steps.len(),
            spread(&self.drop_seconds),
            spread(&self.app_seconds),
        );
        for (title, list) in [
            ("Stalls", &self.stalls),
            ("Busy after a kill", &self.busy),
            ("Not finished after a kill", &self.unfinished),
            ("Slow-step notices", &self.slow_steps),
            ("App rounds that failed", &self.app_failures),
        ] {
            if !list.is_empty() {
                text.push_str(&format!("\n## {title}\n\n"));
                for entry in list {
                    text.push_str(&format!("- {entry}\n"));
                }
            }
        }
        text
    }
}

/// "median 4.1 s, 90th percentile 5.0 s, longest 7.2 s" of some seconds.
fn spread(seconds: &[f64]) -> String {
    let mut sorted = seconds.to_vec();
    sorted.sort_by(f64::total_cmp);
    let quantile = |q: f64| {
        sorted
            .get(((sorted.len() as f64 - 1.0) * q).round() as usize)
            .copied()
            .unwrap_or(f64::NAN)
    };
    if sorted.is_empty() {
        return "none ran".into();
    }
    format!(
        "median {:.1} s, 90th percentile {:.1} s, longest {:.1} s",
        crate::bench::median(&sorted),
        quantile(0.9),
        quantile(1.0)
    )
}

struct Runner {
    cli: PathBuf,
    gguf: PathBuf,
    bert: PathBuf,
    corpus: PathBuf,
    out: PathBuf,
}

/// How a `selfrag` run ended, with its output.
struct Ran {
    success: bool,
    lines: Vec<String>,
    stalled: bool,
}

impl Runner {
    fn command(&self, data: &Path) -> Command {
        let mut command = Command::new(&self.cli);
        command
            .env("SELFRAG_DATA_DIR", data)
            .env("SELFRAG_GENERATOR", &self.gguf)
            .env("SELFRAG_EMBEDDER", &self.bert)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }

    /// Runs `selfrag ARGS`, killing it after `kill_after` or once it prints nothing for
    /// [`STALL`].
    fn run(&self, data: &Path, args: &[&str], kill_after: Option<Duration>) -> Result<Ran> {
        let mut child = self
            .command(data)
            .args(args)
            .spawn()
            .with_context(|| format!("starting {}", self.cli.display()))?;
        let (sender, lines) = std::sync::mpsc::channel::<String>();
        let readers: Vec<_> = [
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        ]
        .into_iter()
        .flatten()
        .map(|stream| {
            let sender = sender.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    let _ = sender.send(line);
                }
            })
        })
        .collect();
        drop(sender);
        let started = Instant::now();
        let mut last_line = Instant::now();
        let mut out = Vec::new();
        let mut stalled = false;
        let status = loop {
            match lines.recv_timeout(Duration::from_millis(20)) {
                Ok(line) => {
                    last_line = Instant::now();
                    out.push(line);
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    break child.wait().context("waiting for selfrag")?;
                }
            }
            if let Some(status) = child.try_wait().context("waiting for selfrag")? {
                break status;
            }
            let kill = kill_after.is_some_and(|after| started.elapsed() >= after);
            if kill || last_line.elapsed() >= STALL {
                stalled = !kill;
                let _ = child.kill();
                break child.wait().context("waiting for selfrag")?;
            }
        };
        // Whatever is still in the pipes.
        for reader in readers {
            let _ = reader.join();
        }
        out.extend(lines.try_iter());
        Ok(Ran {
            success: status.success(),
            lines: out,
            stalled,
        })
    }

    fn data_dir(&self, kind: &str, round: usize) -> Result<PathBuf> {
        let data = self.out.join(format!("{kind}-{round}"));
        let _ = std::fs::remove_dir_all(&data);
        std::fs::create_dir_all(&data).with_context(|| format!("creating {}", data.display()))?;
        Ok(data)
    }

    fn drop_round(&self, round: usize, tally: &mut Tally) -> Result<()> {
        let data = self.data_dir("drop", round)?;
        let corpus = self.corpus.display().to_string();
        let started = Instant::now();
        let ran = self.run(&data, &["index", &corpus], None)?;
        tally.drops += 1;
        tally.drop_seconds.push(started.elapsed().as_secs_f64());
        note_slow_steps(&ran, &format!("drop {round}"), tally);
        let done = format!("done: {DOCUMENTS} indexed");
        if ran.stalled {
            tally
                .stalls
                .push(format!("drop {round}: {}", last_lines(&ran.lines)));
        } else if !ran.success || !ran.lines.iter().any(|l| l.starts_with(&done)) {
            tally
                .unfinished
                .push(format!("drop {round}: {}", last_lines(&ran.lines)));
        }
        let _ = std::fs::remove_dir_all(&data);
        Ok(())
    }

    fn kill_round(&self, round: usize, tally: &mut Tally) -> Result<()> {
        let data = self.data_dir("kill", round)?;
        let corpus = self.corpus.display().to_string();
        // A moment inside the job (which takes a few seconds under this load), from the seed.
        let mut seed = (round as u64)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .wrapping_add(1);
        seed ^= seed >> 29;
        let kill_after =
            Duration::from_millis(200 + (seed.wrapping_mul(0xBF58_476D_1CE4_E5B9) >> 11) % 3000);
        self.run(&data, &["index", &corpus], Some(kill_after))?;
        tally.kills += 1;
        let listed = self.run(&data, &["library", "list"], None)?;
        if listed.lines.iter().any(|l| l.contains("in use by another")) {
            tally.busy.push(format!(
                "kill {round} (killed after {} ms): {}",
                kill_after.as_millis(),
                last_lines(&listed.lines)
            ));
        }
        let resumed = self.run(&data, &["index", &corpus], None)?;
        note_slow_steps(&resumed, &format!("kill {round}"), tally);
        let listed = self.run(&data, &["library", "list"], None)?;
        let documents = format!("{DOCUMENTS} documents");
        if resumed.stalled {
            tally.stalls.push(format!(
                "kill {round}, resumed: {}",
                last_lines(&resumed.lines)
            ));
        } else if !resumed.success || !listed.lines.iter().any(|l| l == &documents) {
            tally.unfinished.push(format!(
                "kill {round}: {} / {}",
                last_lines(&resumed.lines),
                last_lines(&listed.lines)
            ));
        }
        let _ = std::fs::remove_dir_all(&data);
        Ok(())
    }
}

impl Runner {
    /// The library pane's end-to-end test of the real app, once.
    fn app_round(
        &self,
        root: &Path,
        app: &Path,
        display: Option<&str>,
        round: usize,
        tally: &mut Tally,
    ) -> Result<()> {
        let out = self.out.join(format!("app-{round}"));
        std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
        let started = Instant::now();
        let mut command = Command::new("node");
        command
            .args([
                "--test",
                "--test-concurrency=1",
                "tests/e2e/library.test.mjs",
            ])
            .current_dir(root)
            .env("SELFRAG_APP", app)
            .env("SELFRAG_TEST_GENERATOR", &self.gguf)
            .env("SELFRAG_TEST_EMBEDDER", &self.bert)
            .env("SELFRAG_E2E_OUT", &out)
            .env(crate::skips::ENV, out.join("skips.log"))
            .env("GSETTINGS_BACKEND", "memory");
        if let Some(display) = display {
            command.env("DISPLAY", display);
        }
        let output = command.output().context("running node --test")?;
        tally.apps += 1;
        tally.app_seconds.push(started.elapsed().as_secs_f64());
        if !output.status.success() {
            let text = String::from_utf8_lossy(&output.stdout).into_owned()
                + &String::from_utf8_lossy(&output.stderr);
            let lines: Vec<String> = text
                .lines()
                .filter(|l| l.contains("Error") || l.contains("timed out") || l.contains("not ok"))
                .map(str::to_owned)
                .collect();
            std::fs::write(out.join("output.txt"), &text).context("keeping the test's output")?;
            tally.app_failures.push(format!(
                "app {round} ({}): {}",
                out.join("output.txt").display(),
                last_lines(&lines)
            ));
        } else {
            let _ = std::fs::remove_dir_all(&out);
        }
        Ok(())
    }
}

fn note_slow_steps(ran: &Ran, round: &str, tally: &mut Tally) {
    for line in ran.lines.iter().filter(|l| l.starts_with("still ")) {
        tally.slow_steps.push(format!("{round}: {line}"));
    }
}

/// The last three lines of a run, on one line.
fn last_lines(lines: &[String]) -> String {
    let from = lines.len().saturating_sub(3);
    lines[from..].join(" | ")
}

/// The busy machine: threads that spin, a writer that fsyncs, memory held. Stops on drop.
struct Load {
    stop: Arc<AtomicBool>,
    workers: Vec<std::thread::JoinHandle<()>>,
    threads: usize,
    memory_mib: usize,
}

impl Load {
    fn start(out: &Path) -> Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
        let mut workers = Vec::new();
        for _ in 0..threads {
            let stop = stop.clone();
            workers.push(std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..100_000 {
                        x = std::hint::black_box(
                            x.wrapping_mul(6364136223846793005).wrapping_add(1),
                        );
                    }
                }
            }));
        }
        let disk = out.join("fsync-writer");
        std::fs::create_dir_all(&disk).context("creating the fsync writer's folder")?;
        {
            let stop = stop.clone();
            workers.push(std::thread::spawn(move || {
                let block = vec![0x5au8; 8 << 20];
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let path = disk.join(format!("block-{}", i % 4));
                    if let Ok(mut file) = std::fs::File::create(&path) {
                        let _ = file.write_all(&block);
                        let _ = file.sync_all();
                    }
                    i += 1;
                }
            }));
        }
        let memory_mib = memory_to_take_mib();
        {
            let stop = stop.clone();
            workers.push(std::thread::spawn(move || {
                let mut held = vec![0u8; memory_mib << 20];
                // Touched again and again, so the kernel keeps it resident or swaps under
                // pressure, as a browser with many tabs does.
                let mut round = 0u8;
                while !stop.load(Ordering::Relaxed) {
                    round = round.wrapping_add(1);
                    for page in held.chunks_mut(4096) {
                        page[0] = round;
                    }
                    std::thread::sleep(Duration::from_secs(2));
                }
                drop(std::hint::black_box(held));
            }));
        }
        Ok(Self {
            stop,
            workers,
            threads,
            memory_mib,
        })
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
    }
}

/// Memory to hold: what is available less 2 GiB, at most half of what is available (MiB).
fn memory_to_take_mib() -> usize {
    let available_kib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|l| l.strip_prefix("MemAvailable:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<usize>().ok())
        })
        .unwrap_or(0);
    let available_mib = available_kib / 1024;
    available_mib.saturating_sub(2048).min(available_mib / 2)
}
