//! One library on object storage shared by several computers, each a `selfrag` process with a
//! data folder of its own, against a real S3-compatible server (`selfrag-s3-server`: s3s's
//! protocol and signatures over files) on a loopback port.

// Test code: a failed unwrap is a failed test, at the line that failed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{describe, ok};
use selfrag_testkit::s3_server::{self, Conditions, S3Server};

const LIBRARY: &str = "s3://lab/papers";

/// One computer of the lab: its own data folder and its own copy of the tiny models (the same
/// model at another path, as on two machines).
struct Computer {
    data: PathBuf,
    models: PathBuf,
}

impl Computer {
    fn new(root: &Path, name: &str) -> Self {
        let dir = root.join(name);
        Self {
            data: dir.join("data"),
            models: common::tiny_models(&dir.join("models")),
        }
    }

    /// `selfrag ARGS --library LIBRARY` on this computer, against `server`.
    fn selfrag(&self, server: &S3Server, args: &[&str]) -> Command {
        let mut c = common::selfrag_with_models(&self.data, &self.models);
        c.envs(server.client_env())
            .args(args)
            .args(["--library", LIBRARY]);
        c
    }

    fn run(&self, server: &S3Server, args: &[&str]) -> Output {
        self.selfrag(server, args).output().unwrap()
    }
}

fn server(root: &Path, conditions: Conditions) -> Option<S3Server> {
    let binary = s3_server::binary()?;
    let objects = root.join("store");
    std::fs::create_dir_all(&objects).unwrap();
    Some(S3Server::start(&binary, &objects, conditions).unwrap())
}

fn note(dir: &Path, name: &str, text: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn listed_paths(computer: &Computer, server: &S3Server) -> Vec<String> {
    let json = ok(computer.run(server, &["library", "list", "--json"]));
    let docs: Vec<serde_json::Value> = serde_json::from_str(&json).unwrap();
    let mut paths: Vec<String> = docs
        .iter()
        .map(|d| d["path"].as_str().unwrap().to_owned())
        .collect();
    paths.sort();
    paths
}

#[test]
fn two_computers_share_one_library_on_the_store() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(server) = server(tmp.path(), Conditions::Honoured) else {
        return;
    };
    let alice = Computer::new(tmp.path(), "alice");
    let bob = Computer::new(tmp.path(), "bob");

    let check = ok(alice.run(&server, &["library", "check", "--json"]));
    let check: serde_json::Value = serde_json::from_str(&check).unwrap();
    assert_eq!(check["location"], LIBRARY);
    assert_eq!(check["shared"], true);
    assert_eq!(check["endpoint"], server.endpoint.as_str());
    assert_eq!(check["library_exists"], false);

    let mitochondria = note(
        &tmp.path().join("alice-papers"),
        "mitochondria.md",
        "# Mitochondria\nThe mitochondrion makes ATP by oxidative phosphorylation.\n",
    );
    ok(alice.run(&server, &["index", mitochondria.to_str().unwrap()]));

    // Bob has never indexed anything: he finds Alice's document, and cites it by her path.
    let hits = ok(bob.run(
        &server,
        &["search", "oxidative phosphorylation", "--json", "-k", "1"],
    ));
    let hits: serde_json::Value = serde_json::from_str(&hits).unwrap();
    assert_eq!(
        hits["hits"][0]["path"],
        mitochondria.to_str().unwrap(),
        "{hits}"
    );

    // Bob indexes with the embedder in f32, Alice's ran in int8 where the CPU has VNNI: the
    // same model, so the library takes his vectors.
    let westphalia = note(
        &tmp.path().join("bob-papers"),
        "westphalia.md",
        "# Westphalia\nThe Peace of Westphalia ended the Thirty Years' War in 1648.\n",
    );
    ok(bob
        .selfrag(&server, &["index", westphalia.to_str().unwrap()])
        .env("SELFRAG_EMBEDDER_PRECISION", "f32")
        .output()
        .unwrap());
    assert_eq!(
        listed_paths(&alice, &server),
        vec![
            mitochondria.to_str().unwrap().to_owned(),
            westphalia.to_str().unwrap().to_owned()
        ]
    );
    let hits = ok(alice.run(
        &server,
        &["search", "Thirty Years' War", "--json", "-k", "1"],
    ));
    assert!(hits.contains("westphalia.md"), "{hits}");

    // Each computer's own state stays on it: nothing of a job or a lock is in the store.
    let mut in_store = Vec::new();
    walk(&tmp.path().join("store"), &mut in_store);
    assert!(
        in_store.iter().any(|p| p.ends_with("papers/library.json")),
        "{in_store:?}"
    );
    for private in ["job.json", "library.lock", "durable.json", "watched.json"] {
        assert!(
            !in_store.iter().any(|p| p.ends_with(private)),
            "{private} in the store: {in_store:?}"
        );
    }
    let check = ok(bob.run(&server, &["library", "check", "--json"]));
    assert!(check.contains("\"library_exists\": true"), "{check}");
}

/// Each computer indexes its folder, all at the same moment; every run must succeed.
fn index_at_once(server: &S3Server, writers: &[(&Computer, PathBuf)]) {
    let running: Vec<_> = writers
        .iter()
        .map(|(computer, folder)| {
            computer
                .selfrag(server, &["index", folder.to_str().unwrap()])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for writer in running {
        let out = writer.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", describe(&out));
    }
}

fn walk(dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            walk(&path, out);
        } else {
            out.push(path.to_string_lossy().into_owned());
        }
    }
}

/// Two computers index into one library at the same moment: every document of both is
/// committed once.
#[test]
fn two_writers_at_once_both_commit_and_nothing_is_lost() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(server) = server(tmp.path(), Conditions::Honoured) else {
        return;
    };
    let alice = Computer::new(tmp.path(), "alice");
    let bob = Computer::new(tmp.path(), "bob");
    // The library exists before the race, as in a lab: the race is between commits.
    let first = note(
        &tmp.path().join("first"),
        "first.md",
        "# First\nA first note.\n",
    );
    ok(alice.run(&server, &["index", first.to_str().unwrap()]));

    let mut expected = vec![first.to_str().unwrap().to_owned()];
    let mut writers: Vec<(&Computer, PathBuf)> = Vec::new();
    for (computer, name) in [(&alice, "alice"), (&bob, "bob")] {
        let folder = tmp.path().join(format!("{name}-notes"));
        for i in 0..6 {
            let path = note(
                &folder,
                &format!("{name}-{i}.md"),
                &format!("# {name} {i}\nNote {i} of {name}: topic {name}{i} and nothing else.\n"),
            );
            expected.push(path.to_str().unwrap().to_owned());
        }
        writers.push((computer, folder));
    }
    index_at_once(&server, &writers);
    expected.sort();
    assert_eq!(listed_paths(&bob, &server), expected);
    let stats = ok(alice.run(&server, &["library", "stats", "--json"]));
    let stats: serde_json::Value = serde_json::from_str(&stats).unwrap();
    assert_eq!(stats["documents"], 13, "{stats}");
    assert_eq!(
        stats["passages"], 13,
        "one passage per note, none twice: {stats}"
    );
}

/// Two computers index the same files (a shared drive) at the same moment, three times over
/// as the files change: each path keeps one row and each passage is stored once.
#[test]
fn the_same_documents_indexed_at_once_are_stored_once() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(server) = server(tmp.path(), Conditions::Honoured) else {
        return;
    };
    let alice = Computer::new(tmp.path(), "alice");
    let bob = Computer::new(tmp.path(), "bob");
    let first = note(
        &tmp.path().join("first"),
        "first.md",
        "# First\nA first note.\n",
    );
    ok(alice.run(&server, &["index", first.to_str().unwrap()]));
    let shared = tmp.path().join("shared-drive");
    for round in 0..3 {
        for i in 0..4 {
            note(
                &shared,
                &format!("paper-{i}.md"),
                &format!("# Paper {i}\nPaper {i} as of round {round}, about topic{i}.\n"),
            );
        }
        index_at_once(&server, &[(&alice, shared.clone()), (&bob, shared.clone())]);
        let stats = ok(alice.run(&server, &["library", "stats", "--json"]));
        let stats: serde_json::Value = serde_json::from_str(&stats).unwrap();
        assert_eq!(stats["documents"], 5, "round {round}: {stats}");
        // One passage per note, none twice; a changed note's old passage stays behind in a
        // shared library (another computer may hold that content), counted but never found.
        assert_eq!(
            stats["passages"],
            5 + 4 * round,
            "round {round}: one passage per note, none twice: {stats}"
        );
        let hits = ok(bob.run(&server, &["search", "topic2", "--json", "-k", "5"]));
        let hits: serde_json::Value = serde_json::from_str(&hits).unwrap();
        let ids: Vec<&str> = hits["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["passage_id"].as_str().unwrap())
            .collect();
        let mut distinct = ids.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(ids.len(), distinct.len(), "round {round}: {hits}");
        assert!(
            hits["hits"][0]["text"]
                .as_str()
                .unwrap()
                .contains(&format!("round {round}")),
            "round {round}: {hits}"
        );
    }
}

/// What a run of `selfrag index` is reading, by the crash guard's `indexing.json`.
struct Reading {
    /// The file, or the first of a batch of small files being committed.
    path: String,
    /// Whether it reads that file alone (not a batch).
    alone: bool,
    /// Which run of the app wrote it: a dead run's stays until the next run reads it.
    run: String,
}

/// What a run of `selfrag index` on the computer whose data folder is `data` is reading.
fn reading_now(data: &Path) -> Option<Reading> {
    fn find(dir: &Path) -> Option<PathBuf> {
        for entry in std::fs::read_dir(dir).ok()?.flatten() {
            let path = entry.path();
            if path.file_name().is_some_and(|n| n == "indexing.json") {
                return Some(path);
            }
            if path.is_dir()
                && let Some(found) = find(&path)
            {
                return Some(found);
            }
        }
        None
    }
    let marker: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(find(data)?).ok()?).ok()?;
    Some(Reading {
        path: marker["path"].as_str()?.to_owned(),
        alone: marker["with"].as_array().is_none_or(Vec::is_empty),
        run: marker["run"].as_str()?.to_owned(),
    })
}

/// A computer's indexing killed (SIGKILL) mid-job, three times: each time the library opens
/// with what was committed, listed once; `selfrag index` with no path then finishes the job,
/// and every note is stored once, none of its passages twice.
#[test]
fn a_writer_killed_mid_commit_leaves_the_library_whole_and_its_job_resumes() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(server) = server(tmp.path(), Conditions::Honoured) else {
        return;
    };
    let alice = Computer::new(tmp.path(), "alice");
    let bob = Computer::new(tmp.path(), "bob");
    let folder = tmp.path().join("notes");
    let notes = 30;
    let mut expected: Vec<String> = (0..notes)
        .map(|i| {
            note(
                &folder,
                &format!("note-{i:02}.md"),
                &format!("# Note {i}\nNote {i} holds the word marker{i} and little else.\n"),
            )
            .to_str()
            .unwrap()
            .to_owned()
        })
        .collect();
    expected.sort();
    // The file the last kill ended a run on while it read that file alone, and that run.
    let mut ended_alone: Option<String> = None;
    let mut killed_run: Option<String> = None;
    for kill in 1..=3 {
        let mut child = alice
            .selfrag(&server, &["index", folder.to_str().unwrap()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Killed by what it is doing, not by the clock (which a loaded or an idle machine
        // makes early or late): the first kill while it commits a batch of notes, the others
        // while it reads a file. Never twice in a row on one file read alone: the crash guard
        // rightly skips such a file, and this job must finish whole.
        let patience = std::time::Instant::now() + std::time::Duration::from_secs(120);
        loop {
            let due = match reading_now(&alice.data) {
                // The killed run's marker, until this run has read it: not this run's work.
                Some(reading) if killed_run.as_ref() == Some(&reading.run) => false,
                Some(reading) if kill == 1 => !reading.alone,
                Some(reading) => ended_alone.as_ref() != Some(&reading.path),
                None => false,
            };
            if due {
                break;
            }
            assert!(
                child.try_wait().unwrap().is_none(),
                "kill {kill}: the job ended before it"
            );
            assert!(
                std::time::Instant::now() < patience,
                "kill {kill}: no file read in 120 s"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let _ = child.kill();
        let _ = child.wait();
        let left = reading_now(&alice.data);
        ended_alone = left.as_ref().and_then(|r| r.alone.then(|| r.path.clone()));
        killed_run = left.map(|r| r.run);
        // Another computer opens the library: what is listed was committed whole.
        let listed = listed_paths(&bob, &server);
        assert!(
            listed.iter().all(|p| expected.contains(p)),
            "kill {kill}: {listed:?}"
        );
        assert!(listed.len() < notes, "kill {kill} came after the job");
        let json = ok(bob.run(&server, &["library", "list", "--json"]));
        let docs: Vec<serde_json::Value> = serde_json::from_str(&json).unwrap();
        for d in &docs {
            assert_eq!(d["passages"], 1, "kill {kill}: {d}");
        }
    }
    // The killed computer finishes its job (no path: the interrupted one).
    ok(alice.run(&server, &["index"]));
    assert_eq!(listed_paths(&bob, &server), expected);
    let stats = ok(bob.run(&server, &["library", "stats", "--json"]));
    let stats: serde_json::Value = serde_json::from_str(&stats).unwrap();
    assert_eq!(stats["documents"], notes, "{stats}");
    assert_eq!(stats["passages"], notes, "no passage twice: {stats}");
    let hits = ok(bob.run(
        &server,
        &["search", "marker17", "--mode", "fts", "--json", "-k", "1"],
    ));
    assert!(hits.contains("note-17.md"), "{hits}");
}

/// The headless indexer of a lab's server: `selfrag index --watch FOLDER` keeps the shared
/// library in step with a folder (a file added there is found by another computer), and
/// started again with no path after a restart it watches the same folder.
#[test]
fn the_headless_indexer_keeps_a_folder_in_the_shared_library_across_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(server) = server(tmp.path(), Conditions::Honoured) else {
        return;
    };
    let indexer = Computer::new(tmp.path(), "lab-server");
    let desk = Computer::new(tmp.path(), "desk");
    let inbox = tmp.path().join("inbox");
    note(
        &inbox,
        "herons.md",
        "# Herons\nHerons wade in the shallows.\n",
    );
    let found_by_desk = |word: &str| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let hits = ok(desk.run(
                &server,
                &["search", word, "--mode", "fts", "--json", "-k", "1"],
            ));
            if hits.contains(&format!("{word}.md")) {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{word}.md not found within 60 s: {hits}"
            );
            std::thread::sleep(std::time::Duration::from_millis(300));
        }
    };
    for (run, args, word) in [
        (
            1,
            vec!["index", "--watch", inbox.to_str().unwrap()],
            "egrets",
        ),
        // After a restart: no path, the folder it watched.
        (2, vec!["index", "--watch"], "ibises"),
    ] {
        let mut service = indexer
            .selfrag(&server, &args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        found_by_desk("herons");
        note(
            &inbox,
            &format!("{word}.md"),
            &format!("# {word}\nA note on {word}.\n"),
        );
        found_by_desk(word);
        assert!(
            service.try_wait().unwrap().is_none(),
            "run {run}: the indexer stopped"
        );
        let _ = service.kill();
        let _ = service.wait();
    }
}

/// Passages are stored once per content, whoever indexed it: when Alice removes her copy of a
/// paper, Bob's copy at another path keeps every passage.
#[test]
fn removing_one_computers_copy_leaves_anothers_copy_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(server) = server(tmp.path(), Conditions::Honoured) else {
        return;
    };
    let alice = Computer::new(tmp.path(), "alice");
    let bob = Computer::new(tmp.path(), "bob");
    let text = "# Kelp\nKelp forests shelter fish along the coast.\n";
    let hers = note(&tmp.path().join("alice-papers"), "kelp.md", text);
    let his = note(&tmp.path().join("bob-papers"), "kelp-copy.md", text);
    ok(alice.run(&server, &["index", hers.to_str().unwrap()]));
    ok(bob.run(&server, &["index", his.to_str().unwrap()]));
    ok(alice.run(&server, &["library", "remove", hers.to_str().unwrap()]));
    assert_eq!(
        listed_paths(&alice, &server),
        vec![his.to_str().unwrap().to_owned()]
    );
    let hits = ok(alice.run(&server, &["search", "kelp forests", "--json", "-k", "3"]));
    let hits: serde_json::Value = serde_json::from_str(&hits).unwrap();
    assert_eq!(hits["hits"][0]["path"], his.to_str().unwrap(), "{hits}");
}

/// A store that overwrites an object a conditional write must leave alone is refused by the
/// connection test and by every command that would write, and nothing is written.
#[test]
fn a_store_without_conditional_writes_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(server) = server(tmp.path(), Conditions::Ignored) else {
        return;
    };
    let alice = Computer::new(tmp.path(), "alice");
    for args in [
        vec!["library", "check"],
        vec![
            "index",
            note(tmp.path(), "a.md", "# A\nText.\n").to_str().unwrap(),
        ],
    ] {
        let out = alice.run(&server, &args);
        assert!(!out.status.success(), "{args:?}: {}", describe(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("conditional write") && stderr.contains(LIBRARY),
            "{args:?}: {stderr}"
        );
    }
    let mut in_store = Vec::new();
    walk(&tmp.path().join("store"), &mut in_store);
    assert!(
        !in_store.iter().any(|p| p.contains("papers")),
        "nothing written: {in_store:?}"
    );
}

/// An unreachable store and refused credentials are errors within seconds that name the
/// endpoint and what to set.
#[test]
fn an_unreachable_store_or_wrong_credentials_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(server) = server(tmp.path(), Conditions::Honoured) else {
        return;
    };
    let alice = Computer::new(tmp.path(), "alice");
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let nowhere = format!("http://127.0.0.1:{closed}");
    let started = std::time::Instant::now();
    let out = alice
        .selfrag(&server, &["library", "check"])
        .env("AWS_ENDPOINT_URL", &nowhere)
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&nowhere) && stderr.contains("AWS_ENDPOINT_URL"),
        "{stderr}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(40),
        "the check gave up after {:?}",
        started.elapsed()
    );

    let out = alice
        .selfrag(&server, &["library", "check"])
        .env("AWS_SECRET_ACCESS_KEY", "not-the-secret")
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("refused the credentials") && stderr.contains("AWS_ACCESS_KEY_ID"),
        "{stderr}"
    );
    assert!(!stderr.contains("not-the-secret"), "{stderr}");
}

/// A computer whose embedder is another model is refused, naming both, and the library keeps
/// only its own model's vectors.
#[test]
fn another_embedder_is_refused_by_a_shared_library() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(server) = server(tmp.path(), Conditions::Honoured) else {
        return;
    };
    let alice = Computer::new(tmp.path(), "alice");
    let first = note(tmp.path(), "first.md", "# First\nA first note.\n");
    ok(alice.run(&server, &["index", first.to_str().unwrap()]));

    // Carol's embedder has the same shape and another vocabulary order: another model.
    let carol = Computer::new(tmp.path(), "carol");
    let vocab = carol.models.join(common::EMBEDDER).join("vocab.txt");
    let words: Vec<String> = std::fs::read_to_string(&vocab)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let (special, rest): (Vec<String>, Vec<String>) =
        words.into_iter().partition(|w| w.starts_with('['));
    let shuffled: Vec<String> = special.into_iter().chain(rest.into_iter().rev()).collect();
    std::fs::write(&vocab, shuffled.join("\n") + "\n").unwrap();

    let second = note(tmp.path(), "second.md", "# Second\nA second note.\n");
    let out = carol.run(&server, &["index", second.to_str().unwrap()]);
    assert!(!out.status.success(), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("holds vectors of") && stderr.contains("cosine"),
        "{stderr}"
    );
    assert_eq!(
        listed_paths(&alice, &server),
        vec![first.to_str().unwrap().to_owned()]
    );
}

/// The lab's server embeds for Alice, who has no embedder of her own; Bob, with the same model
/// on his computer, searches what it indexed. A folder library indexed through the server is
/// searched with the local embedder too, its vectors kept (same fingerprint, another name).
#[test]
fn a_library_indexed_through_an_embeddings_server_is_searched_with_the_local_embedder() {
    use selfrag_testkit::llama_server::{self, LlamaServer};
    let tmp = tempfile::tempdir().unwrap();
    let Some(store) = server(tmp.path(), Conditions::Honoured) else {
        return;
    };
    let Some(llama) = llama_server::binary() else {
        return;
    };
    let gguf = tmp.path().join("tiny-bert.gguf");
    selfrag_fixtures::write_tiny_bert_gguf(&gguf).unwrap();
    let args = llama_server::EMBEDDING_ARGS;
    let embedder = LlamaServer::start(&llama, &gguf, tmp.path(), 1, 512, &args).unwrap();
    let url = embedder.url.as_str();

    let alice = Computer::new(tmp.path(), "alice");
    std::fs::remove_dir_all(alice.models.join(common::EMBEDDER)).unwrap();
    let papers = tmp.path().join("papers");
    let mitochondria = note(
        &papers,
        "mitochondria.md",
        "# Mitochondria\nThe mitochondrion makes ATP by oxidative phosphorylation.\n",
    );
    let westphalia = note(
        &papers,
        "westphalia.md",
        "# Westphalia\nIn 1648 the Peace of Westphalia ended the Thirty Years' War.\n",
    );
    ok(alice.run(
        &store,
        &["index", papers.to_str().unwrap(), "--embedder-url", url],
    ));
    let meta: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(tmp.path().join("store/lab/papers/library.json")).unwrap(),
    )
    .unwrap();
    let named = meta["embedder"].as_str().unwrap();
    assert!(named.ends_with(&format!(" on {url}/v1")), "{meta}");

    let first_hit = |out: String| -> String {
        let hits: serde_json::Value = serde_json::from_str(&out).unwrap();
        hits["hits"][0]["path"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    let bob = Computer::new(tmp.path(), "bob");
    let query = ["search", "oxidative phosphorylation", "--json", "-k", "1"];
    assert_eq!(
        first_hit(ok(bob.run(&store, &query))),
        mitochondria.to_str().unwrap()
    );
    let query = ["search", "Thirty Years' War", "--json", "-k", "1"];
    assert_eq!(
        first_hit(ok(
            alice.run(&store, &[&query[..], &["--embedder-url", url]].concat())
        )),
        westphalia.to_str().unwrap()
    );
    // Without the server Alice has no embedder, and is told so.
    let out = alice.run(&store, &query);
    assert!(!out.status.success(), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("embedder model is not available"),
        "{stderr}"
    );
    // A model of no server is a mistake, not a quiet fall back to the local embedder.
    let out = bob.run(&store, &["search", "x", "--embedder-model", "contriever"]);
    assert!(!out.status.success(), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("add --embedder-url"),
        "{}",
        describe(&out)
    );

    // A folder library: indexed through the server, searched locally, never re-embedded.
    let carol = Computer::new(tmp.path(), "carol");
    let carol_run = |args: &[&str]| {
        common::selfrag_with_models(&carol.data, &carol.models)
            .args(args)
            .output()
            .unwrap()
    };
    ok(carol_run(&[
        "index",
        papers.to_str().unwrap(),
        "--embedder-url",
        url,
    ]));
    let library_json = carol.data.join("library/library.json");
    let read_meta = || -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(&library_json).unwrap()).unwrap()
    };
    let through_server = read_meta();
    assert!(through_server["fingerprint"].is_array(), "{through_server}");
    let query = ["search", "oxidative phosphorylation", "--json", "-k", "1"];
    assert_eq!(
        first_hit(ok(carol_run(&query))),
        mitochondria.to_str().unwrap()
    );
    let local = read_meta();
    assert_eq!(
        local["passages_table"], through_server["passages_table"],
        "re-embedded: {local}"
    );
    assert_ne!(local["embedder"], through_server["embedder"]);
}

/// The passage id of the best hit for `query` on `computer`.
fn best_passage(computer: &Computer, server: &S3Server, query: &str) -> String {
    let hits = ok(computer.run(server, &["search", query, "--json", "-k", "1"]));
    let hits: serde_json::Value = serde_json::from_str(&hits).unwrap();
    hits["hits"][0]["passage_id"].as_str().unwrap().to_owned()
}

/// A source indexed on Alice's computer opens on Bob's, where no such file exists, from the
/// copy the store keeps under its content id; a computer that keeps its sources to itself
/// stores none, and a copy that does not hold its content is refused.
#[test]
fn a_source_indexed_on_one_computer_opens_on_another() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(server) = server(tmp.path(), Conditions::Honoured) else {
        return;
    };
    let alice = Computer::new(tmp.path(), "alice");
    let bob = Computer::new(tmp.path(), "bob");
    let text = "# Mitochondria\n\nThe mitochondrion makes ATP by oxidative phosphorylation.\n";
    let mitochondria = note(&tmp.path().join("alice-papers"), "mitochondria.md", text);
    ok(alice.run(&server, &["index", mitochondria.to_str().unwrap()]));
    let id = best_passage(&bob, &server, "oxidative phosphorylation");
    // Alice's file is on her computer only.
    std::fs::remove_file(&mitochondria).unwrap();

    let source = ok(bob.run(&server, &["library", "source", &id, "--json"]));
    let source: serde_json::Value = serde_json::from_str(&source).unwrap();
    assert_eq!(source["storedCopy"], true, "{source}");
    assert_eq!(source["path"], mitochondria.to_str().unwrap());
    let page = source["view"]["text"].as_str().unwrap();
    let span = &source["view"]["span"];
    let (start, end) = (
        span[0].as_u64().unwrap() as usize,
        span[1].as_u64().unwrap() as usize,
    );
    let marked: String = page.chars().skip(start).take(end - start).collect();
    assert!(marked.contains("oxidative phosphorylation"), "{source}");
    let document_id = source["documentId"].as_str().unwrap();
    let mut in_store = Vec::new();
    walk(&tmp.path().join("store"), &mut in_store);
    assert!(
        tmp.path()
            .join(format!("store/lab/papers/sources/{document_id}"))
            .is_file(),
        "{document_id} {in_store:?}"
    );
    let plain = ok(bob.run(&server, &["library", "source", &id]));
    assert!(plain.contains(">>>"), "{plain}");
    assert!(plain.contains("the shared library's copy"), "{plain}");

    // Carol keeps her sources to herself: her note is searchable, its file is not in the store.
    let carol = Computer::new(tmp.path(), "carol");
    let private = note(
        &tmp.path().join("carol-papers"),
        "westphalia.md",
        "# Westphalia\n\nIn 1648 the Peace of Westphalia ended the Thirty Years' War.\n",
    );
    let out = carol
        .selfrag(&server, &["index", private.to_str().unwrap()])
        .env("SELFRAG_SHARED_SOURCES_MAX_MB", "0")
        .output()
        .unwrap();
    ok(out);
    let id = best_passage(&bob, &server, "Thirty Years' War");
    std::fs::remove_file(&private).unwrap();
    let out = bob.run(&server, &["library", "source", &id]);
    assert!(!out.status.success(), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is no longer there"),
        "{}",
        describe(&out)
    );
    let mut stored = Vec::new();
    walk(&tmp.path().join("store/lab/papers/sources"), &mut stored);
    assert_eq!(stored.len(), 1, "{stored:?}");

    // A copy altered in the store is refused, never shown.
    std::fs::write(
        tmp.path()
            .join(format!("store/lab/papers/sources/{document_id}")),
        "# Mitochondria\n\nThe mitochondrion makes nothing.\n",
    )
    .unwrap();
    let dave = Computer::new(tmp.path(), "dave");
    let id = best_passage(&dave, &server, "oxidative phosphorylation");
    let out = dave.run(&server, &["library", "source", &id]);
    assert!(!out.status.success(), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("does not hold the content"),
        "{}",
        describe(&out)
    );
}
