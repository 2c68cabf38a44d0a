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
