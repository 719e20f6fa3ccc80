//! Rate limits, bad tokens and outages, answered as the forge answers them.

use std::time::Duration;

use super::{Api, TOKEN};
use crate::support::fake_forge::{BOT_LOGIN, Forge, Kind, Limit, Outage};

#[tokio::test]
async fn rate_limits_and_outages_answer_as_the_forge_does() {
    let forge = Forge::start(Kind::GitHub, "acme", "app", TOKEN, None);
    let api = Api::new(&forge, "Bearer");
    let user = api.call("GET", "/user", None).await;
    assert_eq!(user.body["login"], BOT_LOGIN);
    assert_eq!(user.header("x-ratelimit-limit"), Some("5000"));
    assert_eq!(user.header("x-ratelimit-remaining"), Some("4999"));

    forge.rate_limit(1, Limit::Primary { reset_in_secs: 120 });
    let limited = api.call("GET", "/repos/acme/app", None).await;
    assert_eq!(limited.status, 403);
    assert!(
        limited.body["message"]
            .as_str()
            .is_some_and(|m| m.contains("rate limit"))
    );
    assert_eq!(limited.header("x-ratelimit-remaining"), Some("0"));
    let reset: u64 = limited
        .header("x-ratelimit-reset")
        .and_then(|r| r.parse().ok())
        .expect("a reset");
    assert!(reset > 0);
    forge.rate_limit(
        1,
        Limit::TooMany {
            retry_after_secs: 7,
        },
    );
    let too_many = api.call("GET", "/repos/acme/app", None).await;
    assert_eq!(too_many.status, 429);
    assert_eq!(too_many.header("retry-after"), Some("7"));
    let repo = api.call("GET", "/repos/acme/app", None).await;
    assert_eq!(repo.status, 200);
    assert_eq!(repo.body["permissions"]["push"], true);
    assert_eq!(api.call("GET", "/repos/acme/other", None).await.status, 404);

    let wrong = Api {
        auth: "Bearer nope".into(),
        ..Api::new(&forge, "Bearer")
    };
    let denied = wrong.call("GET", "/user", None).await;
    assert_eq!(denied.status, 401);
    assert_eq!(denied.body["message"], "Bad credentials");

    forge.set_rate_budget(0, Duration::from_secs(600));
    assert_eq!(api.call("GET", "/user", None).await.status, 403);
    forge.set_rate_budget(10, Duration::from_secs(600));

    forge.down(Outage::BadGateway);
    assert_eq!(api.call("GET", "/user", None).await.status, 502);
    forge.down(Outage::Refused);
    let refused = api
        .client
        .get(format!("{}/user", api.base))
        .header("Authorization", &api.auth)
        .send()
        .await;
    assert!(refused.is_err(), "the forge is down, yet it answered");
    forge.up();
    let back = api.call("GET", "/user", None).await;
    assert_eq!(back.status, 200);
    assert!(forge.busiest(Duration::from_secs(60)) >= 8);
}
