//! Jobs: every turn is one, moving pending → running → completed | failed | cancelled; a
//! stuck turn is failed with the reason and its agent goes on; a cancelled turn is
//! interrupted and its message dropped.

use crate::daemon::{daemon, spawn, wait_for};
use reef_runtime::Sender;
use reef_store::{InboxStatus, JobKind, JobState};
use reef_test_support::{MockReply, RecordedRequest};
use std::sync::Arc;
use std::time::Duration;

fn model(req: &RecordedRequest) -> MockReply {
    if req.last_user_text().unwrap_or_default().contains("hang") {
        return MockReply::Delayed(Duration::from_secs(120), Box::new(MockReply::text("late")));
    }
    MockReply::text("fine")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_turn_is_a_job_and_a_stuck_one_fails_with_its_reason() {
    let d = daemon(Arc::new(model), "[jobs]\nstuck_after = \"1s\"\n").await;
    let rt = &d.runtime;
    let agent = rt
        .spawn_agent(spawn("ada", "worker"), None)
        .await
        .unwrap()
        .agent;
    rt.send_message("ada", Sender::Operator, "hello", "k1", None)
        .await
        .unwrap();
    wait_for(rt, "the first turn", |e| {
        e.iter().any(|e| e.kind == "turn.ended")
    })
    .await;
    // The turn's job ends in the transaction that finishes its message, which may commit
    // just after `turn.ended` is seen.
    let mut done = Vec::new();
    for _ in 0..500 {
        done = rt.list_jobs(Some(JobState::Completed), 10).await.unwrap();
        if !done.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].kind, JobKind::Turn);
    assert_eq!(done[0].result.as_deref(), Some("fine"));
    assert_eq!(done[0].agent_name.as_deref(), Some("ada"));

    // A model that never answers: after a second without progress the job fails.
    rt.send_message("ada", Sender::Operator, "hang", "k2", None)
        .await
        .unwrap();
    wait_for(rt, "the stuck job", |e| {
        e.iter().any(|e| e.kind == "job.stuck")
    })
    .await;
    let failed = rt.list_jobs(Some(JobState::Failed), 10).await.unwrap();
    assert_eq!(failed.len(), 1);
    assert!(
        failed[0]
            .reason
            .as_deref()
            .unwrap()
            .starts_with("stuck: no progress for 1s"),
        "{:?}",
        failed[0]
    );
    // Its message is out of the inbox, and the agent goes on with the next.
    let store = rt.store();
    assert!(
        store
            .inbox(&agent.id, InboxStatus::Processing)
            .await
            .unwrap()
            .is_empty()
    );
    rt.send_message("ada", Sender::Operator, "still there?", "k3", None)
        .await
        .unwrap();
    wait_for(rt, "the turn after", |_| {
        d.mock.requests().iter().any(|r| {
            r.last_user_text()
                .is_some_and(|t| t.contains("still there?"))
        })
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_turn_is_interrupted_and_its_message_dropped() {
    let d = daemon(Arc::new(model), "").await;
    let rt = &d.runtime;
    let agent = rt
        .spawn_agent(spawn("ada", "worker"), None)
        .await
        .unwrap()
        .agent;
    rt.send_message("ada", Sender::Operator, "hang", "k1", None)
        .await
        .unwrap();
    wait_for(rt, "the model asked", |_| !d.mock.requests().is_empty()).await;
    let running = rt.list_jobs(Some(JobState::Running), 10).await.unwrap();
    assert_eq!(running.len(), 1);
    let cancelled = rt.cancel_job(running[0].id).await.unwrap();
    assert_eq!(cancelled.state, JobState::Cancelled);
    assert_eq!(
        cancelled.reason.as_deref(),
        Some("cancelled by the operator")
    );
    let events = rt.store().events_after(0, None, 1000).await.unwrap();
    assert!(events.iter().any(|e| e.kind == "turn.interrupted"));
    let store = rt.store();
    assert!(
        store
            .inbox(&agent.id, InboxStatus::Pending)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .inbox(&agent.id, InboxStatus::Processing)
            .await
            .unwrap()
            .is_empty()
    );
    // Cancelling again is a conflict that says why.
    let again = rt.cancel_job(running[0].id).await.unwrap_err().to_string();
    assert!(again.contains("already cancelled"), "{again}");
}
