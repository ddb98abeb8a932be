//! Routines: definitions put and replaced, fires claimed once under their identity together
//! with their effect, and jobs whose failures disable a routine.

use reef_core::{Action, AgentId, Guardrails, RoutineSpec, Trigger};
use reef_store::{
    Claimed, FireClaim, FireEffect, JobEnd, JobState, Letter, NewRoutine, PutOutcome,
    RoutineSource, Store,
};

fn spec(agent: &str, max_failures: u32) -> RoutineSpec {
    RoutineSpec {
        trigger: Trigger::Every { millis: 2000 },
        action: Action::Message {
            agent: agent.into(),
            text: "tick".into(),
        },
        guardrails: Guardrails {
            max_failures,
            ..Guardrails::default()
        },
    }
}

fn routine(name: &str, spec: RoutineSpec) -> NewRoutine {
    NewRoutine {
        name: name.into(),
        spec,
        enabled: true,
        source: RoutineSource::Config,
        owner: None,
    }
}

async fn store_with_agent(store: &Store) -> AgentId {
    let agent = store
        .create_agent(crate::agents::new_agent("clock"))
        .await
        .unwrap();
    agent.id
}

fn deliver(routine_id: &str, at: i64, to: &AgentId) -> FireClaim {
    FireClaim {
        routine_id: routine_id.into(),
        key: format!("at:{at}"),
        scheduled_ms: at,
        advance_watermark: true,
        guard: reef_store::ClaimGuard::default(),
        effect: FireEffect::Deliver(Letter {
            to: to.clone(),
            sender: "routine:tick".into(),
            body: format!("tick {at}"),
            dedup_key: format!("routine:tick:at:{at}"),
            request_id: None,
        }),
    }
}

both! {
    async fn put_creates_keeps_and_replaces_with_history(store) {
        let _ = store_with_agent(store).await;
        let (first, outcome) = store
            .put_routine(routine("tick", spec("clock", 3)), 1_000)
            .await
            .unwrap();
        assert_eq!(outcome, PutOutcome::Created);
        assert_eq!((first.anchor_ms, first.watermark_ms), (1_000, 1_000));
        let (same, outcome) = store
            .put_routine(routine("tick", spec("clock", 3)), 9_000)
            .await
            .unwrap();
        assert_eq!(outcome, PutOutcome::Unchanged);
        assert_eq!(same.anchor_ms, 1_000);
        let skip = FireClaim {
            effect: FireEffect::Skip {
                reason: "test".into(),
            },
            ..deliver(&first.id, 3_000, &AgentId::from("x"))
        };
        let claimed = store.claim_fires(vec![skip], 3_000).await.unwrap();
        assert_eq!(claimed, vec![Claimed::Skipped]);
        let (changed, outcome) = store
            .put_routine(routine("tick", spec("other", 3)), 9_000)
            .await
            .unwrap();
        assert_eq!(outcome, PutOutcome::Replaced);
        assert_eq!(changed.id, first.id);
        assert_eq!(changed.anchor_ms, 1_000, "the trigger did not change");
        assert_eq!(changed.watermark_ms, 3_000);
        assert_eq!(
            store.routine_fires(&first.id, 10).await.unwrap().len(),
            1,
            "history kept"
        );
        let err = store
            .create_routine(routine("tick", spec("clock", 3)), 0)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("already exists"), "{err}");
    }
}

both! {
    async fn a_fire_is_claimed_once_with_its_message(store) {
        let clock = store_with_agent(store).await;
        let (r, _) = store
            .put_routine(routine("tick", spec("clock", 3)), 0)
            .await
            .unwrap();
        let first = store
            .claim_fires(vec![deliver(&r.id, 2_000, &clock)], 2_001)
            .await
            .unwrap();
        let Claimed::Job {
            job_id,
            inbox_id: Some(inbox_id),
        } = first[0]
        else {
            panic!("{first:?}");
        };
        // A second claim of the same instant (a restart that computed it again) does nothing.
        let again = store
            .claim_fires(vec![deliver(&r.id, 2_000, &clock)], 2_500)
            .await
            .unwrap();
        assert_eq!(again, vec![Claimed::AlreadyClaimed]);
        let inbox = store
            .inbox(&clock, reef_store::InboxStatus::Pending)
            .await
            .unwrap();
        assert_eq!(inbox.len(), 1);
        assert_eq!(inbox[0].id, inbox_id);
        let job = store.job(job_id).await.unwrap().unwrap();
        assert_eq!(job.state, JobState::Running);
        assert_eq!(job.routine.as_deref(), Some("tick"));
        assert_eq!(store.open_job_counts().await.unwrap(), (0, 1));
        assert_eq!(
            store
                .routine_by_name("tick")
                .await
                .unwrap()
                .unwrap()
                .watermark_ms,
            2_000
        );
        // Finishing the message ends the job with the answer.
        store.claim_next(&clock).await.unwrap();
        store
            .complete_message(inbox_id, Some("done".into()))
            .await
            .unwrap();
        let job = store.job(job_id).await.unwrap().unwrap();
        assert_eq!(job.state, JobState::Completed);
        assert_eq!(job.result.as_deref(), Some("done"));
        assert_eq!(store.open_job_counts().await.unwrap(), (0, 0));
    }
}

both! {
    async fn failures_in_a_row_disable_the_routine_and_say_why(store) {
        let clock = store_with_agent(store).await;
        let (r, _) = store
            .put_routine(routine("tick", spec("clock", 3)), 0)
            .await
            .unwrap();
        for at in [1_000, 2_000, 3_000] {
            let claimed = store
                .claim_fires(vec![deliver(&r.id, at, &clock)], at)
                .await
                .unwrap();
            let Claimed::Job {
                inbox_id: Some(inbox),
                ..
            } = claimed[0]
            else {
                panic!("{claimed:?}");
            };
            store.claim_next(&clock).await.unwrap();
            store
                .abandon_message(inbox, "clock stopped: rounds")
                .await
                .unwrap();
            let now = store.routine_by_name("tick").await.unwrap().unwrap();
            assert_eq!(now.enabled, at < 3_000, "after the fire at {at}");
        }
        let disabled = store.routine_by_name("tick").await.unwrap().unwrap();
        assert_eq!(disabled.failures, 3);
        assert!(
            disabled
                .disabled_reason
                .as_deref()
                .is_some_and(|r| r.contains("3 failed runs in a row") && r.contains("rounds")),
            "{disabled:?}"
        );
        let events = store.events_after(0, None, 1000).await.unwrap();
        assert!(events.iter().any(|e| e.kind == "routine.disabled"));
        // Enabling again clears the count and starts from now: nothing missed is caught up.
        let enabled = store
            .set_routine_enabled("tick", true, None, 10_000)
            .await
            .unwrap();
        assert_eq!((enabled.failures, enabled.watermark_ms), (0, 10_000));
    }
}

both! {
    async fn a_fire_for_an_agent_that_is_gone_fails_and_counts(store) {
        let _ = store_with_agent(store).await;
        let (r, _) = store
            .put_routine(routine("tick", spec("ghost", 1)), 0)
            .await
            .unwrap();
        let claimed = store
            .claim_fires(
                vec![deliver(&r.id, 1_000, &AgentId::from("agt_ghost"))],
                1_000,
            )
            .await
            .unwrap();
        let Claimed::Failed { job_id, reason } = &claimed[0] else {
            panic!("{claimed:?}");
        };
        assert!(reason.contains("no longer exists"));
        let job = store.job(*job_id).await.unwrap().unwrap();
        assert_eq!(job.state, JobState::Failed);
        assert!(
            !store
                .routine_by_name("tick")
                .await
                .unwrap()
                .unwrap()
                .enabled
        );
        // Jobs move along valid edges only.
        assert_eq!(
            store
                .end_job(
                    *job_id,
                    JobEnd {
                        state: JobState::Completed,
                        reason: None,
                        result: None
                    }
                )
                .await
                .unwrap(),
            None
        );
        let task = Letter {
            to: AgentId::from("agt_ghost"),
            sender: "routine:tick".into(),
            body: "late".into(),
            dedup_key: "late".into(),
            request_id: None,
        };
        let err = store
            .start_job_with_task(*job_id, task, 0)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("cannot start"), "{err}");
    }
}
