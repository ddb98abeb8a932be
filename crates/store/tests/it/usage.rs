//! Usage: per-request records and session totals.

use reef_core::{SessionId, Usage};
use reef_store::{NewUsage, StoreError};

both! {
    async fn usage_records_and_totals(store) {
        let id = crate::session_in(store, "ses_usage").await;
        assert_eq!(store.usage_total(&id).await.unwrap(), Usage::default());
        assert!(store.usage(&id).await.unwrap().is_empty());

        let first = NewUsage {
            provider: "anthropic".into(),
            model: "claude-test".into(),
            usage: Usage {
                input_tokens: 1000,
                output_tokens: 200,
                cached_input_tokens: 800,
            },
            round: 1,
            cost_micros: Some(1234),
        };
        let second = NewUsage {
            provider: "openai".into(),
            model: "gpt-test".into(),
            usage: Usage {
                input_tokens: 1500,
                output_tokens: 50,
                cached_input_tokens: 0,
            },
            round: 2,
            cost_micros: None,
        };
        store.record_usage(&id, &first).await.unwrap();
        store.record_usage(&id, &second).await.unwrap();

        let records = store.usage(&id).await.unwrap();
        assert_eq!(records.len(), 2);
        assert_eq!(records[0].provider, "anthropic");
        assert_eq!(records[0].model, "claude-test");
        assert_eq!(records[0].usage, first.usage);
        assert_eq!(records[0].round, 1);
        assert_eq!(records[1].usage, second.usage);
        assert_eq!(records[1].round, 2);
        assert_eq!(
            (records[0].cost_micros, records[1].cost_micros),
            (Some(1234), None)
        );
        assert!(records[0].created_at < records[1].created_at);

        assert_eq!(
            store.usage_total(&id).await.unwrap(),
            Usage {
                input_tokens: 2500,
                output_tokens: 250,
                cached_input_tokens: 800,
            }
        );
    }
}

both! {
    async fn usage_for_unknown_session_is_not_found(store) {
        let _ = crate::session_in(store, "ses_known").await;
        let missing = SessionId::from("ses_missing");
        let rec = NewUsage {
            provider: "p".into(),
            model: "m".into(),
            usage: Usage::default(),
            round: 0,
            cost_micros: None,
        };
        assert!(matches!(
            store.record_usage(&missing, &rec).await,
            Err(StoreError::NotFound(_))
        ));
        assert!(matches!(
            store.usage_total(&missing).await,
            Err(StoreError::NotFound(_))
        ));
    }
}

both! {
    async fn the_cost_report_groups_by_provider_and_model_and_counts_unpriced_requests(store) {
        let id = crate::session_in(store, "ses_cost").await;
        for (provider, model, cost) in [
            ("main", "gpt-4o", Some(100)),
            ("main", "gpt-4o", Some(50)),
            ("backup", "local-model", None),
        ] {
            let usage = Usage {
                input_tokens: 10,
                output_tokens: 5,
                cached_input_tokens: 0,
            };
            let rec = NewUsage {
                provider: provider.into(),
                model: model.into(),
                usage,
                round: 1,
                cost_micros: cost,
            };
            store.record_usage(&id, &rec).await.unwrap();
        }
        let rows = store.cost_report(None, None).await.unwrap();
        assert_eq!(rows.len(), 2);
        let backup = &rows[0];
        assert_eq!(
            (
                backup.provider.as_str(),
                backup.requests,
                backup.unpriced_requests
            ),
            ("backup", 1, 1)
        );
        assert_eq!(backup.cost_micros, 0);
        let main = &rows[1];
        assert_eq!(
            (main.requests, main.cost_micros, main.usage.input_tokens),
            (2, 150, 20)
        );
        assert_eq!(main.agent, None, "not a daemon agent's session");
        assert!(
            store
                .cost_report(None, Some("9999-01-01T00:00:00.000Z"))
                .await
                .unwrap()
                .is_empty()
        );
        assert!(
            store
                .cost_report(Some("nobody"), None)
                .await
                .unwrap()
                .is_empty()
        );
    }
}

both! {
    async fn the_daily_cost_report_splits_the_same_totals_by_day(store) {
        let id = crate::session_in(store, "ses_daily").await;
        for cost in [Some(100), Some(50), None] {
            let rec = NewUsage {
                provider: "main".into(),
                model: "gpt-4o".into(),
                usage: Usage {
                    input_tokens: 10,
                    output_tokens: 5,
                    cached_input_tokens: 1,
                },
                round: 1,
                cost_micros: cost,
            };
            store.record_usage(&id, &rec).await.unwrap();
        }
        let days = store.daily_cost(None, None).await.unwrap();
        let today = &reef_store::start_of_today()[..10];
        assert_eq!(
            days.iter().map(|d| d.day.as_str()).collect::<Vec<_>>(),
            [today]
        );
        let whole = store.cost_report(None, None).await.unwrap();
        assert_eq!(days[0].row, whole[0], "a day's row is the report's row");
        assert_eq!(
            (
                whole[0].requests,
                whole[0].cost_micros,
                whole[0].unpriced_requests
            ),
            (3, 150, 1)
        );
        assert!(
            store
                .daily_cost(None, Some("9999-01-01T00:00:00.000Z"))
                .await
                .unwrap()
                .is_empty()
        );
    }
}
