//! Watched folders against the real file system notifications (inotify here) and a real
//! LanceDB: created, modified, deleted and renamed files reach the library, and a burst of a
//! thousand changes ends with the library equal to the disk.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod common;

use common::{BAG_OF_WORDS, BagOfWords, Counting};
use selfrag_index::{FolderWatcher, Library, PassageEmbedder};

const EMBEDDER: BagOfWords = BAG_OF_WORDS;

/// Applies watcher batches until `done` holds for the library or `limit` passes.
async fn sync_until(
    lib: &Library,
    watcher: &mut FolderWatcher,
    embedder: &dyn PassageEmbedder,
    limit: Duration,
    done: impl Fn(&Library) -> bool,
) -> Duration {
    let started = Instant::now();
    while !done(lib) {
        let left = limit.saturating_sub(started.elapsed());
        assert!(
            !left.is_zero(),
            "the library did not catch up in {limit:?}: {:#?}",
            lib.documents()
        );
        if let Ok(Some(batch)) = tokio::time::timeout(left, watcher.next_batch()).await {
            lib.apply_changes(&batch.paths, embedder, |_| {})
                .await
                .unwrap();
        }
    }
    started.elapsed()
}

/// Path → file size for every indexed document.
fn library_view(lib: &Library) -> BTreeMap<String, u64> {
    lib.documents()
        .into_iter()
        .map(|d| (d.path, d.size))
        .collect()
}

fn disk_view(dir: &Path) -> BTreeMap<String, u64> {
    selfrag_index::job::walk(dir)
        .files
        .into_iter()
        .map(|f| {
            let size = std::fs::metadata(&f).unwrap().len();
            (std::path::absolute(&f).unwrap().display().to_string(), size)
        })
        .collect()
}

fn has(lib: &Library, path: &Path) -> bool {
    lib.document(&path.display().to_string()).is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_modify_rename_and_delete_reach_the_library_within_seconds() {
    let tmp = tempfile::tempdir().unwrap();
    let folder = tmp.path().join("watched");
    std::fs::create_dir_all(&folder).unwrap();
    let embedder = Counting::new(BAG_OF_WORDS);
    let lib = Library::open(&tmp.path().join("lib"), &embedder)
        .await
        .unwrap();
    lib.set_watched(&folder, true).unwrap();
    let mut watcher = FolderWatcher::new().unwrap();
    watcher.watch(&folder).unwrap();
    let limit = Duration::from_secs(10);

    let note = folder.join("note.md");
    std::fs::write(&note, "# Note\nThe first version mentions penguins.").unwrap();
    let took = sync_until(&lib, &mut watcher, &embedder, limit, |l| has(l, &note)).await;
    eprintln!("create reached the library in {took:?}");

    std::fs::write(
        &note,
        "# Note\nThe second version mentions albatrosses instead.",
    )
    .unwrap();
    let first_size = lib.document(&note.display().to_string()).unwrap().size;
    sync_until(&lib, &mut watcher, &embedder, limit, |l| {
        l.document(&note.display().to_string())
            .is_some_and(|d| d.size != first_size)
    })
    .await;

    let embedded = embedder.embedded();
    let renamed = folder.join("sub").join("renamed.md");
    std::fs::create_dir_all(renamed.parent().unwrap()).unwrap();
    std::fs::rename(&note, &renamed).unwrap();
    sync_until(&lib, &mut watcher, &embedder, limit, |l| {
        has(l, &renamed) && !has(l, &note)
    })
    .await;
    assert_eq!(embedder.embedded(), embedded, "a rename embeds nothing");

    std::fs::remove_file(&renamed).unwrap();
    sync_until(&lib, &mut watcher, &embedder, limit, |l| {
        l.documents().is_empty()
    })
    .await;
    assert_eq!(lib.stats().await.unwrap().passages, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_a_thousand_changes_ends_with_the_library_equal_to_the_disk() {
    let tmp = tempfile::tempdir().unwrap();
    let folder = tmp.path().join("burst");
    std::fs::create_dir_all(&folder).unwrap();
    let lib = Library::open(&tmp.path().join("lib"), &EMBEDDER)
        .await
        .unwrap();
    lib.set_watched(&folder, true).unwrap();
    let mut watcher = FolderWatcher::new().unwrap();
    watcher.watch(&folder).unwrap();

    // 600 creations (some in new sub-folders), then 200 modifications, 100 renames and
    // 100 deletions, as fast as the file system takes them: 1,000 changes.
    let path = |i: usize| -> PathBuf {
        folder
            .join(format!("group{}", i % 7))
            .join(format!("file{i}.txt"))
    };
    for i in 0..600 {
        let p = path(i);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, format!("File {i} talks about subject {}.", i % 13)).unwrap();
    }
    for i in 0..200 {
        std::fs::write(
            path(i),
            format!("File {i} was rewritten with more words, {i}."),
        )
        .unwrap();
    }
    for i in 200..300 {
        std::fs::rename(path(i), folder.join(format!("moved{i}.txt"))).unwrap();
    }
    for i in 300..400 {
        std::fs::remove_file(path(i)).unwrap();
    }
    let expected = disk_view(&folder);
    assert_eq!(expected.len(), 500);

    let took = sync_until(
        &lib,
        &mut watcher,
        &EMBEDDER,
        Duration::from_secs(120),
        |l| library_view(l) == expected,
    )
    .await;
    eprintln!("1,000 changes applied; library equal to the disk after {took:?}");
    let stats = lib.stats().await.unwrap();
    assert_eq!(stats.documents, 500);
    // Every content is stored once: 500 files, no leftovers of replaced or deleted content.
    assert_eq!(stats.passages, stats.contents);
}

/// Deletes a file the first time it embeds: the file a busy library gets to after a user
/// deleted or renamed it, between the change being seen and the file being read.
struct DeletesOnEmbed {
    inner: BagOfWords,
    victim: PathBuf,
}

impl PassageEmbedder for DeletesOnEmbed {
    fn model_id(&self) -> String {
        self.inner.model_id()
    }
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, selfrag_index::IndexError> {
        let _ = std::fs::remove_file(&self.victim);
        self.inner.embed(texts)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_deleted_before_its_batch_reaches_it_is_a_removal_not_an_error() {
    // Found by tests/load.rs in selfrag-cli: with the library busy, a watched folder that
    // churned reported "cannot read new16.md: No such file or directory" for files created and
    // deleted (or renamed) while their batch waited.
    let tmp = tempfile::tempdir().unwrap();
    let folder = tmp.path().join("watched");
    std::fs::create_dir_all(&folder).unwrap();
    let (first, second) = (folder.join("a.md"), folder.join("b.md"));
    std::fs::write(&first, "# A\nAlbatrosses glide.").unwrap();
    std::fs::write(&second, "# B\nPenguins swim.").unwrap();
    let embedder = DeletesOnEmbed {
        inner: BAG_OF_WORDS,
        victim: second.clone(),
    };
    let lib = Library::open(&tmp.path().join("lib"), &embedder)
        .await
        .unwrap();
    lib.set_watched(&folder, true).unwrap();
    let mut events = Vec::new();
    let summary = lib
        .apply_changes(&[first.clone(), second.clone()], &embedder, |e| {
            events.push(format!("{e:?}"))
        })
        .await
        .unwrap();
    assert!(
        !second.exists(),
        "the double deleted b.md while a.md was embedded"
    );
    assert_eq!(summary.failed, 0, "{events:?}");
    assert!(
        events.iter().all(|e| !e.contains("b.md")),
        "b.md was never in the library, so nothing is said about it: {events:?}"
    );
    assert!(has(&lib, &first));
    assert!(!has(&lib, &second));
}

/// One rule for hidden files: a change under a hidden folder of a watched folder (`.git`) is
/// skipped by the watcher as the first walk skips it, while a watched folder that is itself
/// hidden is watched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watcher_skips_what_lies_under_hidden_folders_as_the_first_walk_does() {
    let tmp = tempfile::tempdir().unwrap();
    let folder = tmp.path().join(".notes");
    let inside_git = folder.join(".git/objects/info.txt");
    let hidden_deep = folder.join("papers/.cache/draft.md");
    let visible = folder.join("papers/otters.md");
    for (path, text) in [
        (&inside_git, "Git keeps its objects here."),
        (&hidden_deep, "A cached draft nobody asked for."),
        (&visible, "# Otters\nOtters hold hands while sleeping."),
    ] {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let lib = Library::open(&tmp.path().join("lib"), &EMBEDDER)
        .await
        .unwrap();
    lib.set_watched(&folder, true).unwrap();
    let walked = selfrag_index::job::walk(&folder).files;
    assert_eq!(walked, std::slice::from_ref(&visible));
    let changed = [inside_git.clone(), hidden_deep.clone(), visible.clone()];
    let summary = lib
        .apply_changes(&changed, &EMBEDDER, |_| {})
        .await
        .unwrap();
    assert_eq!((summary.indexed, summary.failed), (1, 0));
    assert!(has(&lib, &visible));
    assert!(!has(&lib, &inside_git) && !has(&lib, &hidden_deep));
}

/// Every document's text in the library, for a test that some text never got in.
async fn every_text(lib: &Library) -> String {
    let mut all = String::new();
    for document in lib.documents() {
        for passage in lib.passages_of(&document.id).await.unwrap() {
            all.push_str(&passage.text);
        }
    }
    all
}

/// A watched folder holding `refs -> ../..` (a link to a folder above it, which holds files
/// the user never gave): `(tmp, watched folder, the file outside)`.
#[cfg(unix)]
fn a_folder_with_a_link_to_a_folder_above() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let above = tmp.path().join("home");
    let secret = above.join("private/diary.txt");
    std::fs::create_dir_all(secret.parent().unwrap()).unwrap();
    std::fs::write(&secret, "Dear diary, the vault code is zebrasecret.").unwrap();
    let watched = above.join("papers/watched");
    std::fs::create_dir_all(&watched).unwrap();
    std::os::unix::fs::symlink("../..", watched.join("refs")).unwrap();
    (tmp, watched, secret)
}

/// Issue 44: notify's default followed links, adding recursive watches through
/// `refs -> ../..`, so a file outside that changed came back as a change under the watched
/// folder. No watch goes through the link now: a change outside is not heard, while a change
/// inside still is.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watcher_adds_no_watch_through_a_link_to_a_folder_outside() {
    let (tmp, watched, secret) = a_folder_with_a_link_to_a_folder_above();
    let lib = Library::open(&tmp.path().join("lib"), &EMBEDDER)
        .await
        .unwrap();
    lib.set_watched(&watched, true).unwrap();
    let mut watcher = FolderWatcher::new().unwrap();
    watcher.watch(&watched).unwrap();

    std::fs::write(&secret, "Dear diary, the new vault code is zebrasecret.").unwrap();
    std::fs::write(secret.with_file_name("new.txt"), "Another zebrasecret.").unwrap();
    // Written after the changes outside: once its batch is in, theirs would have been too.
    let inside = watched.join("inside.md");
    std::fs::write(&inside, "# Inside\nOtters hold hands while sleeping.").unwrap();

    let mut heard = Vec::new();
    let started = Instant::now();
    while !heard.contains(&inside) {
        let left = Duration::from_secs(10).saturating_sub(started.elapsed());
        assert!(
            !left.is_zero(),
            "the change inside was never heard: {heard:?}"
        );
        if let Ok(Some(batch)) = tokio::time::timeout(left, watcher.next_batch()).await {
            lib.apply_changes(&batch.paths, &EMBEDDER, |_| {})
                .await
                .unwrap();
            heard.extend(batch.paths);
        }
    }
    let through_link: Vec<&PathBuf> = heard
        .iter()
        .filter(|p| p.starts_with(watched.join("refs")))
        .collect();
    assert!(
        through_link.is_empty(),
        "heard through the link: {through_link:?}"
    );
    assert!(has(&lib, &inside));
    assert!(!every_text(&lib).await.contains("zebrasecret"));
}

/// Issue 44: the walk checked containment only where the last component was a link, so a
/// change named through `refs -> ../..` (as notify reported it while it followed links) was
/// indexed: a file outside the watched folder, read into the library. Every file a walk or a
/// change yields must lie inside its folder by canonical path; what does not is named, once.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_named_through_a_link_to_a_folder_outside_is_not_read() {
    let (tmp, watched, secret) = a_folder_with_a_link_to_a_folder_above();
    let through_link = watched.join("refs/private/diary.txt");
    assert!(through_link.is_file());
    let lib = Library::open(&tmp.path().join("lib"), &EMBEDDER)
        .await
        .unwrap();
    lib.set_watched(&watched, true).unwrap();

    let walked = selfrag_index::job::walk_under(&watched, &through_link);
    assert!(walked.files.is_empty(), "{walked:?}");
    assert_eq!(
        walked.links_outside,
        [(through_link.clone(), secret.canonicalize().unwrap())]
    );
    let folder_through_link = watched.join("refs/private");
    assert_eq!(
        selfrag_index::job::walk_under(&watched, &folder_through_link),
        selfrag_index::job::Walk::default()
    );

    let mut events = Vec::new();
    let summary = lib
        .apply_changes(
            &[through_link.clone(), folder_through_link],
            &EMBEDDER,
            |e| events.push(format!("{e:?}")),
        )
        .await
        .unwrap();
    assert_eq!((summary.indexed, summary.skipped), (0, 1), "{events:?}");
    assert!(
        events.len() == 1 && events[0].contains("LinkSkipped") && events[0].contains("diary.txt"),
        "{events:?}"
    );
    assert!(lib.documents().is_empty(), "{:?}", lib.documents());

    // Indexing the file by that path, with the folder as its bound, is refused too.
    let err = lib
        .index_file_under(
            &watched,
            &through_link,
            &EMBEDDER,
            &std::sync::atomic::AtomicBool::new(false),
            |_| {},
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, selfrag_index::IndexError::LeadsOutside { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("diary.txt"), "{err}");
    assert!(lib.documents().is_empty());
}

/// Issue 44: a change that matched no watched folder by name became a root of its own and
/// was indexed. It is dropped now; and a change named by its resolved path (macOS's FSEvents
/// reports `/private/tmp/…` for a folder watched as `/tmp/…`) is placed in the folder as the
/// user named it, not indexed under a second name.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_outside_every_watched_folder_is_dropped_and_a_resolved_one_is_placed() {
    let tmp = tempfile::tempdir().unwrap();
    let real = tmp.path().join("real/notes");
    std::fs::create_dir_all(&real).unwrap();
    let named = tmp.path().join("named");
    std::os::unix::fs::symlink(&real, &named).unwrap();
    let elsewhere = tmp.path().join("elsewhere/secret.txt");
    std::fs::create_dir_all(elsewhere.parent().unwrap()).unwrap();
    std::fs::write(&elsewhere, "Nobody gave this zebrasecret to the app.").unwrap();
    let note = real.join("otters.md");
    std::fs::write(&note, "# Otters\nOtters hold hands while sleeping.").unwrap();
    let lib = Library::open(&tmp.path().join("lib"), &EMBEDDER)
        .await
        .unwrap();
    lib.set_watched(&named, true).unwrap();

    let resolved = note.canonicalize().unwrap();
    let summary = lib
        .apply_changes(&[elsewhere.clone(), resolved.clone()], &EMBEDDER, |_| {})
        .await
        .unwrap();
    assert_eq!((summary.indexed, summary.failed), (1, 0));
    let paths: Vec<String> = lib.documents().into_iter().map(|d| d.path).collect();
    assert_eq!(paths, [named.join("otters.md").display().to_string()]);
    assert!(!every_text(&lib).await.contains("zebrasecret"));

    // Its deletion, reported by the resolved path too, removes it.
    std::fs::remove_file(&note).unwrap();
    let summary = lib
        .apply_changes(std::slice::from_ref(&resolved), &EMBEDDER, |_| {})
        .await
        .unwrap();
    assert_eq!(summary.removed, 1);
    assert!(lib.documents().is_empty());
}
