//! `reef cluster status`: the cluster's nodes and the placement of its agents, read from its
//! PostgreSQL (any node's configuration reaches the same database).

use crate::exit::{self, Exit};
use crate::home;
use serde_json::json;

/// The cluster's database, from the configuration; `command` names what needs it.
async fn connect(overrides: &[String], command: &str) -> anyhow::Result<reef_store::PgStore> {
    let config = home::load_config(overrides)?;
    let Some(cluster) = &config.cluster else {
        return Err(Exit::usage(format!(
            "reef cluster {command} needs cluster mode: set [cluster] enabled = true with \
             database_url and nats_url (or pass -c cluster.enabled=true)"
        )));
    };
    let password = cluster.database_password.as_ref().map(|p| p.expose());
    reef_store::PgStore::connect(&cluster.database_url, password)
        .await
        .map_err(|e| Exit::runtime(e.to_string()))
}

/// `reef cluster drain NODE`: marks the node draining, then waits until it holds no agent.
pub async fn drain(overrides: &[String], node: &str, wait_secs: u64) -> anyhow::Result<u8> {
    let store = connect(overrides, "drain").await?;
    store.drain_node(node).await.map_err(|e| match e {
        reef_store::PgError::UnknownNode { .. } => Exit::usage(e.to_string()),
        other => Exit::runtime(other.to_string()),
    })?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(wait_secs);
    loop {
        let nodes = store
            .cluster_nodes()
            .await
            .map_err(|e| Exit::runtime(e.to_string()))?;
        let Some(status) = nodes.iter().find(|n| n.name == node) else {
            // It left the cluster meanwhile (stopped): nothing to hand over.
            println!("node {node} left the cluster");
            return Ok(exit::OK);
        };
        if status.agents == 0 {
            println!("node {node} is draining and holds no agent");
            return Ok(exit::OK);
        }
        if std::time::Instant::now() >= deadline {
            return Err(Exit::runtime(format!(
                "node {node} still holds {} agent(s) after {wait_secs} s{}",
                status.agents,
                if status.alive {
                    ""
                } else {
                    ": it is not alive, so its leases move when they run out"
                }
            )));
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

pub async fn status(overrides: &[String], json: bool) -> anyhow::Result<u8> {
    let store = connect(overrides, "status").await?;
    let read = async {
        let nodes = store.cluster_nodes().await?;
        let leases = store.agent_leases().await?;
        Ok::<_, reef_store::PgError>((nodes, leases))
    };
    let (nodes, leases) = read.await.map_err(|e| Exit::runtime(e.to_string()))?;
    if json {
        let report = json!({
            "database": store.target(),
            "pgvector": store.pgvector(),
            "nodes": nodes.iter().map(|n| json!({
                "name": n.name,
                "alive": n.alive,
                "draining": n.draining,
                "agents": n.agents,
                "bus": if n.bus_connected { "nats" } else { "polling" },
                "bus_lag": n.bus_lag,
            })).collect::<Vec<_>>(),
            "leases": leases.iter().map(|l| json!({
                "agent": l.agent.as_str(),
                "node": l.node,
                "epoch": l.epoch,
                "expired": l.expired,
            })).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(exit::OK);
    }
    println!(
        "cluster database: PostgreSQL {} ({})",
        store.target(),
        match store.pgvector() {
            Some(v) => format!("vectors searched by pgvector {v}"),
            None => "no pgvector: vectors searched in each node's RAM".to_owned(),
        }
    );
    if nodes.is_empty() {
        println!("no node has joined");
    } else {
        println!(
            "{:<24}  {:<6}  {:<8}  {:<7}  {:<7}  agents",
            "node", "alive", "draining", "bus", "bus lag"
        );
        let yes = |b: bool| if b { "yes" } else { "no" };
        for n in &nodes {
            // Without NATS a node finds work by polling the database: slower, still correct.
            let bus = if n.bus_connected { "nats" } else { "polling" };
            println!(
                "{:<24}  {:<6}  {:<8}  {:<7}  {:<7}  {}",
                n.name,
                yes(n.alive),
                yes(n.draining),
                bus,
                n.bus_lag,
                n.agents
            );
        }
    }
    if !leases.is_empty() {
        println!();
        println!("{:<40}  {:<24}  {:<6}  lease", "agent", "node", "epoch");
        for l in &leases {
            println!(
                "{:<40}  {:<24}  {:<6}  {}",
                l.agent.as_str(),
                l.node,
                l.epoch,
                if l.expired { "expired" } else { "live" }
            );
        }
    }
    Ok(exit::OK)
}
