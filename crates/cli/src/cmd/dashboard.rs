//! `reef dashboard`: asks the running daemon for a one-time login link and opens it in the
//! browser (or prints it, with `--no-open` or when there is no browser).

use crate::args::DashboardArgs;
use crate::cmd::client::Client;
use crate::exit;
use crate::home;

pub async fn dashboard(overrides: &[String], args: DashboardArgs) -> anyhow::Result<u8> {
    let config = home::load_config(overrides)?;
    let client = Client::connect(&config)?;
    let link = client.post("/v1/dashboard/links", None).await?;
    let url = link["url"].as_str().unwrap_or_default();
    let minutes = link["expires_in_secs"].as_u64().unwrap_or(300) / 60;
    if !args.no_open {
        match reef_sandbox::open_in_browser(url) {
            Ok(true) => {
                println!("Opened the dashboard in your browser; if it did not appear, open:");
            }
            Ok(false) => println!("Open this link to sign in to the dashboard:"),
            Err(err) => println!("Cannot start a browser ({err}); open this link to sign in:"),
        }
    } else {
        println!("Open this link to sign in to the dashboard:");
    }
    println!("  {url}");
    println!("It works once, within {minutes} minutes.");
    Ok(exit::OK)
}
