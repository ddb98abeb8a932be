//! The leak detector against its corpus (`data/leak-corpus.json`): fake credentials in the
//! formats real ones take, and text that resembles them. Prints recall and the false-positive
//! rate; each positive must be found as the kind it is.

use reef_security::leak::LeakScanner;
use serde_json::Value;

fn corpus() -> Value {
    let text = include_str!("../../data/leak-corpus.json");
    serde_json::from_str(text).unwrap()
}

#[test]
fn the_corpus_is_found_and_its_lookalikes_are_not() {
    let corpus = corpus();
    let scanner = LeakScanner::new([]);
    let positives = corpus["positives"].as_array().unwrap();
    let negatives = corpus["negatives"].as_array().unwrap();
    let mut missed = Vec::new();
    for p in positives {
        let (kind, text) = (p["kind"].as_str().unwrap(), p["text"].as_str().unwrap());
        let found = scanner.scan(text);
        if !found.iter().any(|f| f.kind == kind) {
            missed.push(format!("{kind}: {text:?} -> {found:?}"));
        }
    }
    let mut flagged = Vec::new();
    for n in negatives {
        let text = n.as_str().unwrap();
        let found = scanner.scan(text);
        if !found.is_empty() {
            flagged.push(format!("{text:?} -> {found:?}"));
        }
    }
    let recall = 1.0 - missed.len() as f64 / positives.len() as f64;
    let fpr = flagged.len() as f64 / negatives.len() as f64;
    println!(
        "leak corpus: recall {:.3} ({} of {} positives), false-positive rate {:.3} ({} of {} negatives)",
        recall,
        positives.len() - missed.len(),
        positives.len(),
        fpr,
        flagged.len(),
        negatives.len()
    );
    assert!(missed.is_empty(), "missed:\n{}", missed.join("\n"));
    assert!(flagged.is_empty(), "flagged:\n{}", flagged.join("\n"));
    // Every pattern has a positive in the corpus.
    for id in LeakScanner::pattern_ids() {
        assert!(
            positives.iter().any(|p| p["kind"] == id),
            "no positive for {id}"
        );
    }
}

#[test]
fn known_secrets_are_found_in_the_corpus_texts_they_are_hidden_in() {
    let value = "Zk2-Rq9.wT4_pLx8";
    let scanner = LeakScanner::new([("API", value)]);
    for n in corpus()["negatives"].as_array().unwrap() {
        let text = format!("{} {value}", n.as_str().unwrap());
        assert!(
            scanner
                .scan(&text)
                .iter()
                .any(|f| f.secret.as_deref() == Some("API")),
            "{text}"
        );
    }
}
