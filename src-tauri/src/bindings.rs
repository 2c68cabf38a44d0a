//! The TypeScript types of every IPC payload, generated from the Rust types with ts-rs into
//! `ui/src/lib/ipc/bindings.ts`. The test below fails when the committed file drifts from the
//! Rust types; `UPDATE_BINDINGS=1 cargo test -p selfrag-desktop bindings` rewrites it. So are
//! the core's retrieve rule's answers (`ui/src/tests/golden/retrieve-rule.json`), which the UI's
//! test of `wouldRetrieve` reads: the UI's words for a re-run follow the rule the core runs.
//! And the exports' provenance line on a set of traces (`ui/src/tests/golden/provenance.json`),
//! which the UI's test of `provenanceLine` reads: the app and the exports say the same.
//! And the works' citation labels (`ui/src/tests/golden/works.json`: `cite::author_year`,
//! `Passage::printed_page`, `cite::doi_url` on a set of records), which the UI's test of
//! `authorYear`, `printedPage` and `doiUrl` reads: a chip says what an export says.

#[cfg(test)]
mod tests {
    use selfrag_core::{
        Answer, AnswerTimings, CachePrecision, Candidate, ClosedSetKind, ClosedSetScores,
        CritiqueWeights, DummyPrefix, EmbedderInfo, Expansion, GeneratorInfo, GeneratorKind,
        HardConstraint, IsRelDistribution, IsRelVerdict, IsSupDistribution, IsSupVerdict,
        IsUseDistribution, LongFormRanking, OptionScore, PLmTokens, Passage, Progress,
        RetrieveDecision, RetrieveMode, Segment, Settings, TreeNode, Verdicts,
    };
    use selfrag_engine::export::{BibEncoding, CitationStyle};
    use selfrag_engine::library_location::LibraryLocationState;
    use selfrag_engine::{
        AnswerRecord, AppSettings, AppStatus, DeviceChoice, DeviceKind, DeviceStatus, DocumentInfo,
        EmbedderPrecision, ErrorCode, ExportFormat, ExportOptions, GeneratorState, HistoryEntry,
        IndexEvent, LibraryStats, LoadedSettings, LookupFailure, ModelRole, ModelStatus,
        PassageSource, ServerCheck, SourceView, StoreCheck, Theme,
    };
    use selfrag_engine::{
        DownloadStage, JobKind, JobSource, LibraryEvent, ModelDownloadProgress, ModelOffer,
        ReferenceImport,
    };
    use selfrag_engine::{EmbedderServerCheck, EmbedderServerState};
    use selfrag_works::{Author, FieldSource, Sourced, Work, WorkDate, WorkType, ZoteroLink};
    use ts_rs::{Config, TS};

    use crate::commands::{IpcError, IpcErrorCode, ShellErrorCode};
    use crate::library::WatchResult;

    fn decl<T: TS>(cfg: &Config) -> String {
        format!("export {}\n", T::decl(cfg))
    }

    /// `export const NAME: TYPE = JSON;` with a doc comment.
    fn constant(doc: &str, name_and_type: &str, value: &impl serde::Serialize) -> String {
        let json = serde_json::to_string_pretty(value).unwrap_or_default();
        format!("/** {doc} */\nexport const {name_and_type} = {json};\n")
    }

    fn generate() -> String {
        let cfg = Config::new();
        let decls = [
            decl::<RetrieveMode>(&cfg),
            decl::<PLmTokens>(&cfg),
            decl::<LongFormRanking>(&cfg),
            decl::<CritiqueWeights>(&cfg),
            decl::<Settings>(&cfg),
            decl::<FieldSource>(&cfg),
            decl::<Sourced<String>>(&cfg),
            decl::<WorkType>(&cfg),
            decl::<Author>(&cfg),
            decl::<WorkDate>(&cfg),
            decl::<ZoteroLink>(&cfg),
            decl::<Work>(&cfg),
            decl::<Passage>(&cfg),
            decl::<RetrieveDecision>(&cfg),
            decl::<IsRelDistribution>(&cfg),
            decl::<IsSupDistribution>(&cfg),
            decl::<IsUseDistribution>(&cfg),
            decl::<HardConstraint>(&cfg),
            decl::<Verdicts>(&cfg),
            decl::<IsRelVerdict>(&cfg),
            decl::<IsSupVerdict>(&cfg),
            decl::<Candidate>(&cfg),
            decl::<Segment>(&cfg),
            decl::<TreeNode>(&cfg),
            decl::<Expansion>(&cfg),
            decl::<GeneratorKind>(&cfg),
            decl::<CachePrecision>(&cfg),
            decl::<DummyPrefix>(&cfg),
            decl::<GeneratorInfo>(&cfg),
            decl::<EmbedderInfo>(&cfg),
            decl::<AnswerTimings>(&cfg),
            decl::<ClosedSetKind>(&cfg),
            decl::<OptionScore>(&cfg),
            decl::<ClosedSetScores>(&cfg),
            decl::<Answer>(&cfg),
            decl::<Progress>(&cfg),
            decl::<ModelRole>(&cfg),
            decl::<ModelOffer>(&cfg),
            decl::<ModelStatus>(&cfg),
            decl::<DownloadStage>(&cfg),
            decl::<ModelDownloadProgress>(&cfg),
            decl::<LibraryStats>(&cfg),
            decl::<PassageSource>(&cfg),
            decl::<SourceView>(&cfg),
            decl::<AppStatus>(&cfg),
            decl::<DocumentInfo>(&cfg),
            decl::<LookupFailure>(&cfg),
            decl::<IndexEvent>(&cfg),
            decl::<AnswerRecord>(&cfg),
            decl::<ExportFormat>(&cfg),
            decl::<CitationStyle>(&cfg),
            decl::<BibEncoding>(&cfg),
            decl::<ExportOptions>(&cfg),
            decl::<HistoryEntry>(&cfg),
            decl::<DeviceStatus>(&cfg),
            decl::<Theme>(&cfg),
            decl::<DeviceChoice>(&cfg),
            decl::<EmbedderPrecision>(&cfg),
            decl::<DeviceKind>(&cfg),
            decl::<AppSettings>(&cfg),
            decl::<GeneratorState>(&cfg),
            decl::<ServerCheck>(&cfg),
            decl::<LibraryLocationState>(&cfg),
            decl::<EmbedderServerState>(&cfg),
            decl::<EmbedderServerCheck>(&cfg),
            decl::<StoreCheck>(&cfg),
            decl::<LoadedSettings>(&cfg),
            decl::<JobKind>(&cfg),
            decl::<JobSource>(&cfg),
            decl::<LibraryEvent>(&cfg),
            decl::<WatchResult>(&cfg),
            decl::<ReferenceImport>(&cfg),
            decl::<ErrorCode>(&cfg),
            decl::<ShellErrorCode>(&cfg),
            decl::<IpcErrorCode>(&cfg),
            decl::<IpcError>(&cfg),
        ];
        // The defaults too, as values: the UI starts from them and never restates them.
        let defaults = [
            constant(
                "`AppSettings::default()`: what a first start remembers; `ask` is `Settings::default()` of selfrag-core, the paper's defaults.",
                "DEFAULT_APP_SETTINGS: AppSettings",
                &AppSettings::default(),
            ),
            constant(
                "`FieldSource::label()` of each source: how the UI says where a field of a work came from.",
                "FIELD_SOURCE_LABELS: Record<FieldSource, string>",
                &FieldSource::ALL
                    .iter()
                    .map(|s| {
                        (
                            serde_json::to_value(s)
                                .unwrap_or_default()
                                .as_str()
                                .unwrap_or_default()
                                .to_owned(),
                            s.label(),
                        )
                    })
                    .collect::<std::collections::BTreeMap<_, _>>(),
            ),
            constant(
                "`WorkType::ALL` with each type's `label()`, in the order a type select lists them.",
                "WORK_TYPES: { kind: WorkType; label: string }[]",
                &WorkType::ALL
                    .iter()
                    .map(|kind| serde_json::json!({"kind": kind, "label": kind.label()}))
                    .collect::<Vec<_>>(),
            ),
        ];
        let commands = format!(
            "/** The commands the UI may invoke (build.rs's one list). */\nexport const COMMANDS = {} as const;\n\n/** The name of a command. */\nexport type Command = (typeof COMMANDS)[number];\n",
            serde_json::to_string_pretty(crate::COMMANDS).unwrap_or_default()
        );
        format!(
            "// Generated from the Rust types by src-tauri/src/bindings.rs. Do not edit.\n// Regenerate: UPDATE_BINDINGS=1 cargo test -p selfrag-desktop bindings\n\n{}\n{}\n{}",
            decls.join("\n"),
            defaults.join("\n"),
            commands
        )
    }

    /// Fails unless the committed file `ui_path` (under `ui/`) holds `fresh`, what the Rust side
    /// generates from `source`; with `UPDATE_BINDINGS` set, writes it first.
    fn check_generated(ui_path: &str, fresh: &str, source: &str) {
        // The run's CARGO_MANIFEST_DIR follows the checkout even when the binary was built
        // in another one sharing the target dir.
        let dir = std::env::var("CARGO_MANIFEST_DIR")
            .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").into());
        let path = std::path::Path::new(&dir).join("../ui").join(ui_path);
        if std::env::var_os("UPDATE_BINDINGS").is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, fresh).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == fresh,
            "ui/{ui_path} is out of date with {source}; run `UPDATE_BINDINGS=1 cargo test -p selfrag-desktop bindings` and commit it"
        );
    }

    #[test]
    fn bindings_ts_matches_the_rust_types() {
        check_generated("src/lib/ipc/bindings.ts", &generate(), "the Rust IPC types");
    }

    /// The core's [`RetrieveMode::retrieves`] on a grid of cases, as JSON rows
    /// `{mode, p, threshold, argmax, retrieves}` (`argmax` and `retrieves` may be null).
    fn retrieve_rule_cases() -> String {
        let modes = [
            RetrieveMode::Adaptive,
            RetrieveMode::Always,
            RetrieveMode::Never,
            RetrieveMode::Model,
        ];
        let mut rows = Vec::new();
        for mode in modes {
            for p in [0.0f32, 0.2, 0.5, 0.51, 1.0] {
                for threshold in [0.0f32, 0.2, 0.5, 1.0] {
                    for argmax in [None, Some(false), Some(true)] {
                        rows.push(serde_json::json!({
                            "mode": mode,
                            "p": p,
                            "threshold": threshold,
                            "argmax": argmax,
                            "retrieves": mode.retrieves(p, threshold, argmax),
                        }));
                    }
                }
            }
        }
        serde_json::to_string_pretty(&rows).unwrap_or_default() + "\n"
    }

    /// Traces with every kind of generator record and embedder, as JSON rows
    /// `{generator, embedder, line}` (`line` null where the trace records neither).
    fn provenance_cases() -> String {
        let local = |cache_precision, dummy_prefix| GeneratorInfo {
            kind: GeneratorKind::Local,
            model: "/models/selfrag_llama2_7b.q4_k_m.gguf".into(),
            runtime: "cpu".into(),
            url: None,
            cache_precision,
            dummy_prefix,
        };
        let server = GeneratorInfo {
            kind: GeneratorKind::Server,
            model: "C:\\models\\selfrag_llama2_13b.Q4_K_M.gguf".into(),
            runtime: "llama.cpp b6800-abc1234".into(),
            url: Some("http://gpu-box:8080".into()),
            cache_precision: None,
            dummy_prefix: Some(DummyPrefix::EveryFragment),
        };
        let embedder = |precision| EmbedderInfo {
            model: "facebook/contriever-msmarco@abc123".into(),
            precision,
            device: DeviceKind::Cpu,
            server: None,
        };
        let mut generators = vec![None, Some(local(None, None)), Some(server)];
        for cache in CachePrecision::ALL {
            for prefix in DummyPrefix::ALL {
                generators.push(Some(local(Some(cache), Some(prefix))));
            }
        }
        let embedders = [
            None,
            Some(embedder(EmbedderPrecision::Int8)),
            Some(embedder(EmbedderPrecision::F32)),
            Some(EmbedderInfo {
                server: Some("http://gpu-box:8081/v1".into()),
                ..embedder(EmbedderPrecision::F32)
            }),
        ];
        let mut rows = Vec::new();
        for generator in &generators {
            for embedder in &embedders {
                let mut answer = selfrag_testkit::traces::TraceBuilder::new("q").build();
                answer.generator = generator.clone();
                answer.embedder = embedder.clone();
                rows.push(serde_json::json!({
                    "generator": generator,
                    "embedder": embedder,
                    "line": selfrag_engine::export::provenance(&answer),
                }));
            }
        }
        serde_json::to_string_pretty(&rows).unwrap_or_default() + "\n"
    }

    #[test]
    fn the_ui_writes_the_provenance_line_the_exports_write() {
        check_generated(
            "src/tests/golden/provenance.json",
            &provenance_cases(),
            "selfrag_export::provenance",
        );
    }

    /// Work records of every shape a citation label handles (one, two and three or more
    /// authors, an organisation, no year, no authors with a short or a long title, nothing),
    /// passages with and without printed page labels, and DOIs with characters a URL cannot
    /// hold, as JSON `{authorYear: [{work, label}], printedPage: [{passage, page}], doiUrl:
    /// [{doi, url}]}`.
    fn works_cases() -> String {
        let sourced = |v| Sourced::new(v, FieldSource::ReferenceManager);
        let work = |authors: Vec<Author>, year: Option<i32>, title: Option<&str>| Work {
            authors: (!authors.is_empty()).then(|| sourced(authors)),
            date: year.map(|y| Sourced::new(WorkDate::year(y), FieldSource::FileMetadata)),
            title: title.map(|t| Sourced::new(t.to_string(), FieldSource::FirstPageGuess)),
            ..Work::default()
        };
        let marrow = Author::person("Marrow", "Ann");
        let odegard = Author::person("Ødegård", "Bjørn");
        let third = Author::person("van Beethoven", "Ludwig");
        let who = Author::Organisation {
            name: "World Health Organization".into(),
        };
        let title = Some("Telemetry of the Ålesund fjord");
        let works = [
            work(vec![marrow.clone()], Some(1998), title),
            work(vec![marrow.clone(), odegard.clone()], Some(1998), title),
            work(
                vec![marrow.clone(), odegard.clone(), third.clone()],
                Some(2004),
                title,
            ),
            work(vec![third.clone(), marrow.clone()], Some(1810), None),
            work(vec![who.clone()], Some(2021), title),
            work(vec![who, marrow.clone()], None, title),
            work(vec![odegard], None, None),
            work(vec![], Some(2001), Some("A very long title for a report")),
            work(vec![], None, Some("  Four   words of title ")),
            work(vec![], Some(1999), None),
            Work::default(),
        ];
        let author_year: Vec<_> = works
            .iter()
            .map(|w| {
                serde_json::json!({
                    "work": w,
                    "label": selfrag_works::cite::author_year(w),
                })
            })
            .collect();
        let passage = |page: Option<u32>, label: Option<&str>| Passage {
            id: "d#1".into(),
            title: "Telemetry".into(),
            path: "/papers/telemetry.pdf".into(),
            page,
            page_label: label.map(str::to_string),
            ocr_confidence: None,
            text: "The fjord's telemetry.".into(),
            work: Some(works[1].clone()),
        };
        let printed_page: Vec<_> = [
            passage(Some(3), Some("117")),
            passage(Some(1), Some("xii")),
            passage(Some(2), None),
            passage(None, None),
        ]
        .iter()
        .map(|p| serde_json::json!({"passage": p, "page": p.printed_page()}))
        .collect();
        let doi_url: Vec<_> = [
            "10.1000/xyz",
            "10.1002/(sici)1097-4571(199806)49:8<693::aid-asi3>3.0.co;2-o",
            " 10.1000/a#b?c%d\"{e} ø",
        ]
        .iter()
        .map(|doi| serde_json::json!({"doi": doi, "url": selfrag_works::cite::doi_url(doi)}))
        .collect();
        let cases = serde_json::json!({
            "authorYear": author_year,
            "printedPage": printed_page,
            "doiUrl": doi_url,
        });
        serde_json::to_string_pretty(&cases).unwrap_or_default() + "\n"
    }

    #[test]
    fn the_ui_labels_works_as_the_exports_do() {
        check_generated(
            "src/tests/golden/works.json",
            &works_cases(),
            "selfrag_works::cite",
        );
    }

    #[test]
    fn the_ui_reads_the_retrieve_rule_the_core_runs() {
        check_generated(
            "src/tests/golden/retrieve-rule.json",
            &retrieve_rule_cases(),
            "RetrieveMode::retrieves",
        );
    }
}
