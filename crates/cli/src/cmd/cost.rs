//! `reef cost`: tokens and money per agent, provider and model, from the usage each provider
//! reported and the configured prices at the time of each request.

use crate::args::CostArgs;
use crate::exit;
use crate::home;
use serde_json::json;

pub async fn cost(overrides: &[String], args: CostArgs) -> anyhow::Result<u8> {
    let config = home::load_config(overrides)?;
    let store = home::open_store(&config)?;
    let since = args.since.map(reef_store::timestamp_ago);
    let rows = store
        .cost_report(args.agent.as_deref(), since.as_deref())
        .await?;
    let total_micros: u64 = rows.iter().map(|r| r.cost_micros).sum();
    let unpriced: u64 = rows.iter().map(|r| r.unpriced_requests).sum();
    if args.json {
        let doc = json!({
            "since": since,
            "agent": args.agent,
            "rows": rows,
            "total_cost_micros": total_micros,
            "total_cost_usd": total_micros as f64 / 1e6,
            "unpriced_requests": unpriced,
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(exit::OK);
    }
    if rows.is_empty() {
        println!(
            "no model requests recorded{}",
            match &since {
                Some(s) => format!(" since {s}"),
                None => String::new(),
            }
        );
        return Ok(exit::OK);
    }
    println!(
        "{:<16} {:<12} {:<24} {:>8} {:>12} {:>10} {:>10} {:>11}",
        "agent", "provider", "model", "requests", "input", "cached", "output", "cost"
    );
    for r in &rows {
        println!(
            "{:<16} {:<12} {:<24} {:>8} {:>12} {:>10} {:>10} {:>11}",
            r.agent.as_deref().unwrap_or("(cli)"),
            r.provider,
            r.model,
            r.requests,
            r.usage.input_tokens,
            r.usage.cached_input_tokens,
            r.usage.output_tokens,
            format!("${:.4}", r.cost_micros as f64 / 1e6),
        );
    }
    println!("total: ${:.4}", total_micros as f64 / 1e6);
    if unpriced > 0 {
        println!(
            "{unpriced} request(s) used a model without a known price and are not in the total; \
             add it under [prices.\"MODEL\"] in reef.toml"
        );
    }
    Ok(exit::OK)
}
