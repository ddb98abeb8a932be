//! The `SKILL.md` format: real-world shapes load; each rule, broken, names itself.

use crate::{PDF_SKILL, simple};
use reef_skills::{Mode, Rule, parse};

#[test]
fn a_real_world_shaped_skill_loads_with_every_field() {
    let m = parse(PDF_SKILL, "pdf").unwrap();
    assert_eq!(m.name, "pdf");
    assert_eq!(
        m.description,
        "Comprehensive PDF manipulation toolkit for extracting text and tables, creating new \
         PDFs, merging and splitting documents, and handling forms. Use when a task involves a \
         .pdf file.",
        "a folded description is one line"
    );
    assert_eq!(
        m.license.as_deref(),
        Some("Proprietary. LICENSE.txt has complete terms")
    );
    assert_eq!(
        m.compatibility.as_deref(),
        Some("Requires python3 with pypdf")
    );
    assert_eq!(m.allowed_tools, ["Bash(python3:*)", "Read", "Write"]);
    assert_eq!(m.metadata["author"], "example-org");
    assert_eq!(m.metadata["version"], "1.2");
    assert_eq!(
        m.metadata["reviewed"], "2026",
        "a number in metadata reads as its text"
    );
    assert!(m.body.starts_with("# PDF processing"), "{}", m.body);
    assert!(!m.is_tool());
}

#[test]
fn literal_descriptions_crlf_files_and_unknown_fields_load() {
    let text = "---\r\nname: notes\r\ndescription: |\r\n  Line one.\r\n  Line two.\r\nversion: 3\r\ndisable-model-invocation: false\r\n---\r\nBody\r\n";
    let m = parse(text, "notes").unwrap();
    assert_eq!(m.description, "Line one.\nLine two.");
    assert_eq!(
        m.other["version"], 3,
        "unknown fields are kept, not refused"
    );
    assert!(m.other.contains_key("disable-model-invocation"));
    assert_eq!(m.body.trim(), "Body");
}

#[test]
fn a_fireclaw_skill_declares_typed_parameters() {
    let text = "---
name: weather
description: Current weather for a city.
parameters:
  city:
    type: string
    description: City name
  days:
    type: integer
    default: 1
  units:
    type: string
    enum: [metric, imperial]
    required: false
timeout_secs: 20
---
Call it with a city.
";
    let m = parse(text, "weather").unwrap();
    assert!(m.is_tool());
    assert_eq!(m.tool_mode(), Mode::Subprocess);
    assert_eq!(m.timeout_secs, Some(20));
    let schema = reef_skills::schema(m.parameters.as_deref());
    assert_eq!(
        schema,
        serde_json::json!({
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name"},
                "days": {"type": "integer", "default": 1},
                "units": {"type": "string", "enum": ["metric", "imperial"]}
            },
            "required": ["city"],
            "additionalProperties": false
        })
    );
    // The list form of openpista-style skills reads the same.
    let listed = "---\nname: echo\ndescription: Echo.\nmode: wasm\nmemory: 32M\nparameters:\n  - name: text\n    type: string\n---\n";
    let m = parse(listed, "echo").unwrap();
    assert_eq!(m.tool_mode(), Mode::Wasm);
    assert_eq!(m.memory_bytes, Some(32 << 20));
    assert_eq!(m.parameters.unwrap()[0].name, "text");
}

/// `SKILL.md` with `front` as its front matter, for folder `folder`.
fn with(front: &str) -> String {
    format!("---\n{front}\n---\nBody\n")
}

#[test]
fn every_rule_broken_is_named() {
    let long_name = "a".repeat(65);
    let long_desc = "d".repeat(1025);
    let long_compat = "c".repeat(501);
    let cases: Vec<(String, &str, Rule)> = vec![
        ("# no front matter\n".into(), "x", Rule::NoFrontMatter),
        (
            "---\nname: x\ndescription: y\n".into(),
            "x",
            Rule::NoFrontMatter,
        ),
        (with("name: [unclosed"), "x", Rule::Yaml(String::new())),
        (with("- a\n- b"), "x", Rule::NotAMapping),
        (with("description: y"), "x", Rule::Missing("name")),
        (with("name: x"), "x", Rule::Missing("description")),
        (
            with("name: PDF\ndescription: y"),
            "PDF",
            Rule::BadName("PDF".into()),
        ),
        (
            with("name: a--b\ndescription: y"),
            "a--b",
            Rule::BadName("a--b".into()),
        ),
        (
            with("name: -ab\ndescription: y"),
            "-ab",
            Rule::BadName("-ab".into()),
        ),
        (
            with("name: ab-\ndescription: y"),
            "ab-",
            Rule::BadName("ab-".into()),
        ),
        (
            with("name: a_b\ndescription: y"),
            "a_b",
            Rule::BadName("a_b".into()),
        ),
        (
            with(&format!("name: {long_name}\ndescription: y")),
            &long_name,
            Rule::BadName(long_name.clone()),
        ),
        (
            with("name: pdf\ndescription: y"),
            "pdf-tools",
            Rule::NameNotFolder {
                name: "pdf".into(),
                folder: "pdf-tools".into(),
            },
        ),
        (
            with("name: x\ndescription: \"  \""),
            "x",
            Rule::EmptyDescription,
        ),
        (
            with(&format!("name: x\ndescription: {long_desc}")),
            "x",
            Rule::TooLong {
                field: "description",
                len: 1025,
                max: 1024,
            },
        ),
        (
            with(&format!(
                "name: x\ndescription: y\ncompatibility: {long_compat}"
            )),
            "x",
            Rule::TooLong {
                field: "compatibility",
                len: 501,
                max: 500,
            },
        ),
        (
            with("name: x\ndescription: y\nmetadata:\n  nested:\n    a: b"),
            "x",
            Rule::WrongType {
                field: "metadata.nested".into(),
                expected: "a string",
            },
        ),
        (
            with("name: x\ndescription: y\nmetadata: [a, b]"),
            "x",
            Rule::WrongType {
                field: "metadata".into(),
                expected: "a mapping of strings to strings",
            },
        ),
        (
            with("name: x\ndescription: y\nallowed-tools: 3"),
            "x",
            Rule::WrongType {
                field: "allowed-tools".into(),
                expected: "a space-separated string",
            },
        ),
        (
            with("name: x\ndescription: [y]"),
            "x",
            Rule::WrongType {
                field: "description".into(),
                expected: "a string",
            },
        ),
        (
            with("name: x\ndescription: y\nmode: docker"),
            "x",
            Rule::BadMode("docker".into()),
        ),
        (
            with("name: x\ndescription: y\nparameters:\n  n:\n    type: float"),
            "x",
            Rule::Parameters(String::new()),
        ),
        (
            with("name: x\ndescription: y\ntimeout_secs: 0"),
            "x",
            Rule::BadValue {
                field: "timeout_secs",
                message: String::new(),
            },
        ),
        (
            with("name: x\ndescription: y\nmemory: 10T"),
            "x",
            Rule::BadValue {
                field: "memory",
                message: String::new(),
            },
        ),
    ];
    for (text, folder, want) in cases {
        let got = parse(&text, folder).expect_err(&text);
        let same = match (&got, &want) {
            // The parser's own words vary: the rule is what counts.
            (Rule::Yaml(_), Rule::Yaml(_)) | (Rule::Parameters(_), Rule::Parameters(_)) => true,
            (Rule::BadValue { field: a, .. }, Rule::BadValue { field: b, .. }) => a == b,
            _ => got == want,
        };
        assert!(same, "{text:?}: got {got:?}, want {want:?}");
        assert!(!got.to_string().is_empty());
    }
}

#[test]
fn alias_bombs_and_deep_nesting_are_refused_before_loading() {
    let mut bomb = String::from(
        "---\nname: x\ndescription: y\na0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n",
    );
    for i in 1..10 {
        let prev = format!("*a{}", i - 1);
        bomb.push_str(&format!("a{i}: &a{i} [{}]\n", vec![prev; 9].join(", ")));
    }
    bomb.push_str("---\n");
    let err = parse(&bomb, "x").unwrap_err();
    assert!(err.to_string().contains("aliases"), "{err}");
    let deep = format!(
        "---\nname: x\ndescription: y\nm: {}\n---\n",
        "- ".repeat(5000)
    );
    assert!(matches!(parse(&deep, "x"), Err(Rule::Yaml(_))));
}

#[test]
fn the_simple_skill_helper_is_valid() {
    parse(&simple("git-release", "Cut a release."), "git-release").unwrap();
}
