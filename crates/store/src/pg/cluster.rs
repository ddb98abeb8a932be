//! Cluster mode's ownership: nodes join under unique names and heartbeat; each agent is owned
//! by one node through a lease the node renews with its heartbeat; a node takes its fair share
//! of the agents no live lease holds (none, or its owner stopped renewing), so the agents of a
//! node that dies move to the others once its leases expire. Every time is the database's.

use super::{PgError, PgStore};
use reef_core::AgentId;
use std::time::Duration;

/// Agent states that need a node to run them.
const OWNABLE: &str = "a.state NOT IN ('completed', 'failed', 'terminated')";

/// A node that has joined the cluster: its name, this process's incarnation, and its lease.
#[derive(Clone, Debug)]
pub struct ClusterNode {
    name: String,
    incarnation: String,
    lease_ms: i64,
    max_agents: Option<i64>,
}

impl ClusterNode {
    /// The node's name (`cluster.node_name`).
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// An agent's lease, as [`PgStore::claim_agents`] and [`PgStore::agent_leases`] report it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentLease {
    pub agent: AgentId,
    pub node: String,
    /// Raised at every change of owner.
    pub epoch: i64,
    /// Whether the lease has run out (its node stopped renewing it and nobody took it yet).
    pub expired: bool,
}

/// A node as `reef cluster status` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeStatus {
    pub name: String,
    /// Whether its last heartbeat is within its lease.
    pub alive: bool,
    pub draining: bool,
    /// Agents whose lease it holds.
    pub agents: i64,
    /// Whether it reached NATS at its last heartbeat (otherwise it polls the database).
    pub bus_connected: bool,
    /// Events of the history its bus had not read yet at its last heartbeat.
    pub bus_lag: i64,
}

impl PgStore {
    /// Joins the cluster as `name`, with leases of `lease` and at most `max_agents` agents.
    /// Fails with [`PgError::NameTaken`] while another live node has the name; a name whose
    /// node stopped heartbeating for longer than its lease is taken over.
    pub async fn join_cluster(
        &self,
        name: &str,
        lease: Duration,
        max_agents: Option<u64>,
    ) -> Result<ClusterNode, PgError> {
        let node = ClusterNode {
            name: name.to_owned(),
            incarnation: uuid::Uuid::now_v7().to_string(),
            lease_ms: i64::try_from(lease.as_millis()).unwrap_or(i64::MAX),
            max_agents: max_agents.map(|m| i64::try_from(m).unwrap_or(i64::MAX)),
        };
        let client = self.client().await?;
        let joined = client
            .query_opt(
                "INSERT INTO cluster_nodes (name, incarnation, lease_ms, max_agents)
                 VALUES ($1, $2, $3, $4)
                 ON CONFLICT (name) DO UPDATE
                    SET incarnation = EXCLUDED.incarnation, started_at = now(),
                        heartbeat_at = now(), lease_ms = EXCLUDED.lease_ms,
                        max_agents = EXCLUDED.max_agents, draining = FALSE
                    WHERE cluster_nodes.heartbeat_at
                          + cluster_nodes.lease_ms * interval '1 millisecond' < now()
                 RETURNING incarnation",
                &[
                    &node.name,
                    &node.incarnation,
                    &node.lease_ms,
                    &node.max_agents,
                ],
            )
            .await
            .map_err(|source| self.query_error(source))?;
        match joined {
            Some(_) => Ok(node),
            None => Err(PgError::NameTaken {
                name: name.to_owned(),
            }),
        }
    }

    /// Records that `node` is alive (whether it reaches NATS, and how far behind the history
    /// its bus is, having read it through event `bus_read`) and renews every lease it holds;
    /// returns the agents it still owns. Fails with [`PgError::Superseded`] when another process took the node's
    /// name (its heartbeats had stopped for longer than its lease): the node must stop.
    pub async fn heartbeat(
        &self,
        node: &ClusterNode,
        bus_connected: bool,
        bus_read: u64,
    ) -> Result<Vec<AgentId>, PgError> {
        let mut client = self.client().await?;
        let tx = client
            .transaction()
            .await
            .map_err(|source| self.query_error(source))?;
        let alive = tx
            .execute(
                "UPDATE cluster_nodes SET heartbeat_at = now(), bus_connected = $3,
                        bus_lag = greatest((SELECT coalesce(max(seq), 0) FROM events) - $4, 0)
                 WHERE name = $1 AND incarnation = $2",
                &[
                    &node.name,
                    &node.incarnation,
                    &bus_connected,
                    &i64::try_from(bus_read).unwrap_or(i64::MAX),
                ],
            )
            .await
            .map_err(|source| self.query_error(source))?;
        if alive == 0 {
            return Err(PgError::Superseded {
                name: node.name.clone(),
            });
        }
        let owned = tx
            .query(
                "UPDATE agent_leases
                    SET expires_at = now() + $3::bigint * interval '1 millisecond'
                  WHERE node = $1 AND incarnation = $2
                  RETURNING agent_id",
                &[&node.name, &node.incarnation, &node.lease_ms],
            )
            .await
            .map_err(|source| self.query_error(source))?;
        tx.commit()
            .await
            .map_err(|source| self.query_error(source))?;
        let mut agents: Vec<AgentId> = owned
            .iter()
            .map(|row| AgentId::from_string(row.get::<_, String>(0)))
            .collect();
        agents.sort();
        Ok(agents)
    }

    /// Takes leases on agents nobody holds a live lease on, up to the node's fair share (see
    /// [`fair_share`]); returns the leases taken. Nodes claiming at once take different agents (the rows are locked
    /// and skipped), and an agent whose lease its owner renewed meanwhile is left to it.
    pub async fn claim_agents(&self, node: &ClusterNode) -> Result<Vec<AgentLease>, PgError> {
        let mut client = self.client().await?;
        let tx = client
            .transaction()
            .await
            .map_err(|source| self.query_error(source))?;
        let Standing {
            share,
            mine,
            draining,
        } = self.standing(&tx, node).await?;
        let want = share - mine;
        if draining || want <= 0 {
            return Ok(Vec::new());
        }
        let free = tx
            .query(
                &format!(
                    "SELECT a.id FROM agents a
                       LEFT JOIN agent_leases l ON l.agent_id = a.id
                      WHERE {OWNABLE} AND (l.agent_id IS NULL OR l.expires_at < now())
                      ORDER BY a.created_at, a.id
                      LIMIT $1
                      FOR UPDATE OF a SKIP LOCKED"
                ),
                &[&want],
            )
            .await
            .map_err(|source| self.query_error(source))?;
        let mut taken = Vec::with_capacity(free.len());
        for row in free {
            let agent: String = row.get(0);
            let lease = tx
                .query_opt(
                    "INSERT INTO agent_leases (agent_id, node, incarnation, expires_at, epoch)
                     VALUES ($1, $2, $3, now() + $4::bigint * interval '1 millisecond', 1)
                     ON CONFLICT (agent_id) DO UPDATE
                        SET node = EXCLUDED.node, incarnation = EXCLUDED.incarnation,
                            expires_at = EXCLUDED.expires_at, epoch = agent_leases.epoch + 1
                        WHERE agent_leases.expires_at < now()
                     RETURNING epoch",
                    &[&agent, &node.name, &node.incarnation, &node.lease_ms],
                )
                .await
                .map_err(|source| self.query_error(source))?;
            if let Some(lease) = lease {
                taken.push(AgentLease {
                    agent: AgentId::from_string(agent),
                    node: node.name.clone(),
                    epoch: lease.get(0),
                    expired: false,
                });
            }
        }
        tx.commit()
            .await
            .map_err(|source| self.query_error(source))?;
        Ok(taken)
    }

    /// How many agents `node` holds beyond its fair share, now that other nodes joined (it
    /// hands that many over, so a node that starts takes its share).
    pub async fn excess_agents(&self, node: &ClusterNode) -> Result<i64, PgError> {
        let mut client = self.client().await?;
        let tx = client
            .transaction()
            .await
            .map_err(|source| self.query_error(source))?;
        let standing = self.standing(&tx, node).await?;
        tx.commit()
            .await
            .map_err(|source| self.query_error(source))?;
        Ok((standing.mine - standing.share).max(0))
    }

    /// Gives up `node`'s lease on `agent` (its worker has stopped) so another node takes it.
    pub async fn release_agent(
        &self,
        node: &ClusterNode,
        agent: &AgentId,
    ) -> Result<bool, PgError> {
        let client = self.client().await?;
        let released = client
            .execute(
                "DELETE FROM agent_leases WHERE agent_id = $1 AND node = $2 AND incarnation = $3",
                &[&agent.as_str(), &node.name, &node.incarnation],
            )
            .await
            .map_err(|source| self.query_error(source))?;
        Ok(released > 0)
    }

    /// `node`'s fair share, what it holds, and whether it drains.
    async fn standing(
        &self,
        tx: &tokio_postgres::Transaction<'_>,
        node: &ClusterNode,
    ) -> Result<Standing, PgError> {
        let counts = tx
            .query_one(
                &format!(
                    "SELECT
                       (SELECT count(*) FROM agents a WHERE {OWNABLE}),
                       (SELECT count(*) FROM agent_leases WHERE node = $1 AND incarnation = $2),
                       (SELECT draining FROM cluster_nodes WHERE name = $1 AND incarnation = $2)"
                ),
                &[&node.name, &node.incarnation],
            )
            .await
            .map_err(|source| self.query_error(source))?;
        let (total, mine): (i64, i64) = (counts.get(0), counts.get(1));
        let Some(draining) = counts.get::<_, Option<bool>>(2) else {
            return Err(PgError::Superseded {
                name: node.name.clone(),
            });
        };
        let caps: Vec<Option<i64>> = tx
            .query(
                "SELECT max_agents FROM cluster_nodes
                  WHERE NOT draining
                    AND heartbeat_at + lease_ms * interval '1 millisecond' >= now()",
                &[],
            )
            .await
            .map_err(|source| self.query_error(source))?
            .iter()
            .map(|row| row.get(0))
            .collect();
        Ok(Standing {
            share: fair_share(total, &caps, node.max_agents),
            mine,
            draining,
        })
    }

    /// Hands `node`'s agents over before it stops: it drains (claims nothing more) and its
    /// leases go at once, so other nodes take the agents without waiting for expiry. Returns
    /// how many agents it released.
    pub async fn release_agents(&self, node: &ClusterNode) -> Result<u64, PgError> {
        let mut client = self.client().await?;
        let tx = client
            .transaction()
            .await
            .map_err(|source| self.query_error(source))?;
        tx.execute(
            "UPDATE cluster_nodes SET draining = TRUE WHERE name = $1 AND incarnation = $2",
            &[&node.name, &node.incarnation],
        )
        .await
        .map_err(|source| self.query_error(source))?;
        let released = tx
            .execute(
                "DELETE FROM agent_leases WHERE node = $1 AND incarnation = $2",
                &[&node.name, &node.incarnation],
            )
            .await
            .map_err(|source| self.query_error(source))?;
        tx.commit()
            .await
            .map_err(|source| self.query_error(source))?;
        Ok(released)
    }

    /// Asks the node named `name` to hand its agents over and take no more (`reef cluster
    /// drain`); it does so at its next tick. A node that is not alive needs nothing: its
    /// leases run out on their own.
    pub async fn drain_node(&self, name: &str) -> Result<(), PgError> {
        let client = self.client().await?;
        let changed = client
            .execute(
                "UPDATE cluster_nodes SET draining = TRUE WHERE name = $1",
                &[&name],
            )
            .await
            .map_err(|source| self.query_error(source))?;
        if changed == 0 {
            return Err(PgError::UnknownNode {
                name: name.to_owned(),
            });
        }
        Ok(())
    }

    /// Whether `node` has been asked to drain.
    pub async fn draining(&self, node: &ClusterNode) -> Result<bool, PgError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT draining FROM cluster_nodes WHERE name = $1 AND incarnation = $2",
                &[&node.name, &node.incarnation],
            )
            .await
            .map_err(|source| self.query_error(source))?;
        match row {
            Some(row) => Ok(row.get(0)),
            None => Err(PgError::Superseded {
                name: node.name.clone(),
            }),
        }
    }

    /// Takes `node` out of the cluster as it exits (after [`PgStore::release_agents`]): its
    /// name is free at once for the next process that starts with it.
    pub async fn leave_cluster(&self, node: &ClusterNode) -> Result<(), PgError> {
        let client = self.client().await?;
        client
            .execute(
                "DELETE FROM cluster_nodes WHERE name = $1 AND incarnation = $2",
                &[&node.name, &node.incarnation],
            )
            .await
            .map_err(|source| self.query_error(source))?;
        Ok(())
    }

    /// Every agent's lease, by agent id.
    pub async fn agent_leases(&self) -> Result<Vec<AgentLease>, PgError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT agent_id, node, epoch, expires_at < now() FROM agent_leases
                 ORDER BY agent_id",
                &[],
            )
            .await
            .map_err(|source| self.query_error(source))?;
        Ok(rows
            .iter()
            .map(|row| AgentLease {
                agent: AgentId::from_string(row.get::<_, String>(0)),
                node: row.get(1),
                epoch: row.get(2),
                expired: row.get(3),
            })
            .collect())
    }

    /// Every node that has joined, by name, with the agents it holds.
    pub async fn cluster_nodes(&self) -> Result<Vec<NodeStatus>, PgError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT n.name,
                        n.heartbeat_at + n.lease_ms * interval '1 millisecond' >= now(),
                        n.draining,
                        (SELECT count(*) FROM agent_leases l
                          WHERE l.node = n.name AND l.incarnation = n.incarnation),
                        n.bus_connected, n.bus_lag
                   FROM cluster_nodes n ORDER BY n.name",
                &[],
            )
            .await
            .map_err(|source| self.query_error(source))?;
        Ok(rows
            .iter()
            .map(|row| NodeStatus {
                name: row.get(0),
                alive: row.get(1),
                draining: row.get(2),
                agents: row.get(3),
                bus_connected: row.get(4),
                bus_lag: row.get(5),
            })
            .collect())
    }
}

/// A node's place in the cluster as its claims see it.
struct Standing {
    share: i64,
    mine: i64,
    draining: bool,
}

/// How many of `total` agents a node with the cap `own` should hold when the live nodes have
/// the caps `live` (`None`: no cap): the same number each (the lowest level that holds every
/// agent), less for a node whose cap is lower, so the others take what it cannot. When the
/// caps together hold fewer than `total`, each node fills its cap and the rest wait.
fn fair_share(total: i64, live: &[Option<i64>], own: Option<i64>) -> i64 {
    let holds = |level: i64| -> i64 {
        live.iter()
            .map(|cap| cap.map_or(level, |c| c.min(level)))
            .fold(0i64, i64::saturating_add)
    };
    let (mut low, mut high) = (0, total.max(0));
    while low < high {
        let mid = low + (high - low) / 2;
        if holds(mid) >= total {
            high = mid;
        } else {
            low = mid + 1;
        }
    }
    own.map_or(low, |cap| cap.min(low))
}

#[cfg(test)]
mod tests {
    use super::fair_share;

    #[test]
    fn shares_are_even_and_capped_nodes_leave_the_rest_to_the_others() {
        assert_eq!(fair_share(10, &[None, None, None], None), 4);
        assert_eq!(fair_share(9, &[None, None, None], None), 3);
        assert_eq!(fair_share(10, &[None, None, Some(3)], None), 4);
        assert_eq!(fair_share(10, &[None, None, Some(3)], Some(3)), 3);
        // Two nodes, one capped at 3: the other takes 7.
        assert_eq!(fair_share(10, &[None, Some(3)], None), 7);
        // Over capacity: each node fills its cap.
        assert_eq!(fair_share(10, &[Some(2), Some(3)], Some(3)), 3);
        // A node that is not live itself (its lease ran out) still has its own cap.
        assert_eq!(fair_share(10, &[], None), 10);
        assert_eq!(fair_share(10, &[], Some(4)), 4);
        assert_eq!(fair_share(0, &[None, None], None), 0);
    }
}
